// Child processes for `memwall grade`; see grade_sandbox.hpp for what a child
// can and cannot reach.
#include "harness/grade/grade_sandbox.hpp"

#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

namespace mw::grade {

namespace fs = std::filesystem;

namespace {

constexpr uid_t kNobody = 65534;

double seconds_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// argv/envp as the char* arrays execve wants, built before fork(): after a
// fork in a multithreaded process only async-signal-safe calls are allowed.
struct ExecArgs {
    std::vector<std::string> storage;
    std::vector<char*> argv, envp;
    ExecArgs(const std::vector<std::string>& args, const std::vector<std::string>& env) {
        storage = args;
        storage.insert(storage.end(), env.begin(), env.end());
        for (std::size_t i = 0; i < args.size(); ++i) argv.push_back(storage[i].data());
        argv.push_back(nullptr);
        for (std::size_t i = args.size(); i < storage.size(); ++i) envp.push_back(storage[i].data());
        envp.push_back(nullptr);
    }
};

// In the child, between fork and exec: limits, descriptors, identity.
[[noreturn]] void exec_child(const ExecArgs& a, const Limits& limits, int log_fd, const int (*fds)[2], int n_fds) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlive the grader
    setpgid(0, 0);                     // a timeout kills the whole group
    for (int i = 0; i < n_fds; ++i)    // move each inherited descriptor to its fixed number
        if (fds[i][0] != fds[i][1]) dup2(fds[i][0], fds[i][1]);
    dup2(log_fd, 1);
    dup2(log_fd, 2);
    const int keep = 3 + n_fds;
    if (syscall(SYS_close_range, keep, ~0U, 0) != 0)
        for (int fd = keep; fd < 4096; ++fd) close(fd);
    rlimit core{0, 0};
    setrlimit(RLIMIT_CORE, &core);
    rlimit fsize{limits.log_mb << 20, limits.log_mb << 20};
    setrlimit(RLIMIT_FSIZE, &fsize);
    if (limits.memory_mb > 0) {
        rlimit as{limits.memory_mb << 20, limits.memory_mb << 20};
        setrlimit(RLIMIT_AS, &as);
    }
    if (geteuid() == 0) {
        if (setgroups(0, nullptr) != 0 || setgid(kNobody) != 0 || setuid(kNobody) != 0) _exit(126);
    }
    execve(a.argv[0], a.argv.data(), a.envp.data());
    _exit(127);
}

Exit reap(pid_t pid, bool timed_out) {
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    Exit e;
    e.timed_out = timed_out;
    if (WIFEXITED(status)) e.exit_code = WEXITSTATUS(status);
    if (WIFSIGNALED(status)) e.signal = WTERMSIG(status);
    return e;
}

int open_log(const fs::path& log) {
    const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) throw std::runtime_error("cannot create " + log.string() + ": " + std::strerror(errno));
    return fd;
}

}  // namespace

std::string Exit::describe(double wall_s) const {
    std::ostringstream s;
    if (timed_out) {
        s << "timed out after " << wall_s << " s (killed)";
    } else if (signal != 0) {
        s << "crashed: " << (sigabbrev_np(signal) ? std::string("SIG") + sigabbrev_np(signal) : "signal")
          << " (" << strsignal(signal) << ")";
        if (signal == SIGKILL || signal == SIGSEGV) s << "; over the memory limit also ends this way";
    } else {
        s << "exited with status " << exit_code;
        if (exit_code == 126) s << " (could not drop privileges)";
        if (exit_code == 127) s << " (could not start)";
    }
    return s.str();
}

Exit run_to_completion(const std::vector<std::string>& argv, const fs::path& log, const Limits& limits,
                       const std::vector<std::string>& env) {
    ExecArgs a(argv, env);
    const int log_fd = open_log(log);
    const pid_t pid = fork();
    if (pid < 0) throw std::runtime_error(std::string("fork: ") + std::strerror(errno));
    if (pid == 0) exec_child(a, limits, log_fd, nullptr, 0);
    close(log_fd);
    const auto t0 = std::chrono::steady_clock::now();
    for (;;) {
        int status = 0;
        const pid_t r = waitpid(pid, &status, WNOHANG);
        if (r == pid) {
            Exit e;
            if (WIFEXITED(status)) e.exit_code = WEXITSTATUS(status);
            if (WIFSIGNALED(status)) e.signal = WTERMSIG(status);
            return e;
        }
        if (seconds_since(t0) > limits.wall_s) {
            kill(-pid, SIGKILL);
            kill(pid, SIGKILL);
            return reap(pid, true);
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
}

SharedMemory make_shared_memory(std::size_t bytes) {
    SharedMemory shm;
    shm.size = (bytes + 4095) / 4096 * 4096;
    shm.fd = memfd_create("memwall-grade", MFD_CLOEXEC);
    if (shm.fd < 0 || ftruncate(shm.fd, static_cast<off_t>(shm.size)) != 0)
        throw std::runtime_error(std::string("shared memory: ") + std::strerror(errno));
    void* p = mmap(nullptr, shm.size, PROT_READ | PROT_WRITE, MAP_SHARED, shm.fd, 0);
    if (p == MAP_FAILED) throw std::runtime_error(std::string("mmap: ") + std::strerror(errno));
    shm.base = static_cast<unsigned char*>(p);
    return shm;
}

void release(SharedMemory& shm) {
    if (shm.base) munmap(shm.base, shm.size);
    if (shm.fd >= 0) close(shm.fd);
    shm = {};
}

Worker start_worker(const std::vector<std::string>& argv, const SharedMemory& shm, const fs::path& log,
                    const Limits& limits, const std::vector<std::string>& env) {
    int cmd[2], rep[2];
    if (pipe2(cmd, O_CLOEXEC) != 0 || pipe2(rep, O_CLOEXEC) != 0)
        throw std::runtime_error(std::string("pipe: ") + std::strerror(errno));
    ExecArgs a(argv, env);
    const int log_fd = open_log(log);
    // dup2 clears O_CLOEXEC on the copies; the originals close at exec.
    const int fds[3][2] = {{shm.fd, kShmFd}, {cmd[0], kCommandFd}, {rep[1], kReplyFd}};
    const pid_t pid = fork();
    if (pid < 0) throw std::runtime_error(std::string("fork: ") + std::strerror(errno));
    if (pid == 0) {
        // dup2 to a number another source still occupies would clobber it:
        // lift every source above the targets first.
        int lifted[3][2];
        for (int i = 0; i < 3; ++i) lifted[i][0] = fcntl(fds[i][0], F_DUPFD, 16), lifted[i][1] = fds[i][1];
        const int lf = fcntl(log_fd, F_DUPFD, 16);
        exec_child(a, limits, lf, lifted, 3);
    }
    close(log_fd);
    close(cmd[0]);
    close(rep[1]);
    return Worker{pid, cmd[1], rep[0], log};
}

CallResult call_worker(Worker& w, Command cmd, double timeout_s) {
    CallResult r;
    if (w.pid < 0) {
        r.exit.exit_code = -1;
        return r;
    }
    const auto t0 = std::chrono::steady_clock::now();
    const char c = cmd;
    bool sent = ::write(w.command_fd, &c, 1) == 1;  // EPIPE (SIGPIPE ignored) when it has died
    auto* dst = reinterpret_cast<char*>(&r.reply);
    std::size_t got = 0;
    bool dead = !sent, timed_out = false;
    while (!dead && got < sizeof r.reply) {
        const double left = timeout_s - seconds_since(t0);
        if (left <= 0) {
            timed_out = true;
            break;
        }
        pollfd p{w.reply_fd, POLLIN, 0};
        const int n = poll(&p, 1, static_cast<int>(std::min(left * 1000.0, 1e9)) + 1);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) continue;
        const ssize_t k = ::read(w.reply_fd, dst + got, sizeof r.reply - got);
        if (k <= 0) dead = true;
        else got += static_cast<std::size_t>(k);
    }
    r.wall_s = seconds_since(t0);
    if (got == sizeof r.reply) {
        r.ok = true;
        return r;
    }
    if (timed_out) kill(-w.pid, SIGKILL), kill(w.pid, SIGKILL);
    r.exit = reap(w.pid, timed_out);
    close(w.command_fd);
    close(w.reply_fd);
    w.pid = -1;
    return r;
}

void stop_worker(Worker& w) {
    if (w.pid < 0) return;
    const char q = kQuit;
    (void)!::write(w.command_fd, &q, 1);
    close(w.command_fd);
    // A polite worker exits at once; anything else is killed after a moment.
    for (int i = 0; i < 100; ++i) {
        int status = 0;
        if (waitpid(w.pid, &status, WNOHANG) == w.pid) {
            close(w.reply_fd);
            w.pid = -1;
            return;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    kill(-w.pid, SIGKILL);
    kill(w.pid, SIGKILL);
    reap(w.pid, false);
    close(w.reply_fd);
    w.pid = -1;
}

std::string log_tail(const fs::path& log, std::size_t max_bytes) {
    std::ifstream in(log, std::ios::binary);
    if (!in) return {};
    std::string s((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (s.size() > max_bytes) s.erase(0, s.size() - max_bytes).insert(0, "...");
    return s;
}

void harden_grader() {
    prctl(PR_SET_DUMPABLE, 0);
    signal(SIGPIPE, SIG_IGN);
}

fs::path make_temp_dir() {
    std::string tmpl = (fs::temp_directory_path() / "memwall-grade-XXXXXX").string();
    if (!mkdtemp(tmpl.data())) throw std::runtime_error(std::string("mkdtemp: ") + std::strerror(errno));
    // The compiler and the worker may run as `nobody` (when we are root): they
    // write the executable and temporaries here.
    if (geteuid() == 0 && chown(tmpl.c_str(), kNobody, kNobody) != 0)
        throw std::runtime_error(std::string("chown: ") + std::strerror(errno));
    return tmpl;
}

}  // namespace mw::grade
