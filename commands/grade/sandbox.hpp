// Running untrusted code for `memwall grade`: the compiler and the worker, each
// in a bubblewrap sandbox (bwrap, Debian's `bubblewrap`), with limits on the
// whole of what the submission starts.
//
// What a sandboxed child sees and may do:
//   - its own PID, mount, IPC, network, UTS and cgroup namespaces
//     (`--unshare-all`): no other process of the machine is visible (not the
//     grader, not the reference worker), no network;
//   - a root of its own: /usr read-only (BLAS and cuBLAS libraries masked
//     unless the level allows them), a private /tmp (tmpfs), a minimal /dev, a
//     /proc of its own namespace, and read-only binds of just the files it
//     needs (the worker executable; for the compiler, the project's headers);
//     the grader's files, its temporary folder, a secret seed file are not
//     there at all;
//   - `--die-with-parent` and a PID namespace: when the grader kills the
//     sandbox, or dies, every process inside dies with it (a setsid()
//     grandchild included);
//   - when the grader runs as root, the uid/gid of `nobody`;
//   - a minimal environment (no MEMWALL_GRADE_SECRET);
//   - stdout/stderr into an anonymous memory file of capped size (no file
//     name anyone could replace with a link);
//   - where cgroup v1 is writable (pids, memory, cpuacct, freezer), one
//     cgroup per child: a cap on processes + threads, on memory summed over
//     every process, CPU time summed over every thread and child, and a
//     freezer, which stops everything the submission runs between its calls
//     (so nothing of it runs while the reference is timed or after it has
//     answered). Without writable cgroups, memory is limited per process
//     (RLIMIT_AS), processes and threads by RLIMIT_NPROC (the child's user's
//     current count plus the cap), CPU time only through the wall-time
//     limit, and the report says so.
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "commands/grade/grade_protocol.hpp"
#include "commands/grade/seccomp.hpp"

namespace mw::grade {

struct Limits {
    double wall_s = 60;         // kill after this long (run_to_completion)
    std::size_t memory_mb = 0;  // all processes together (cgroup) and each (RLIMIT_AS); 0 = none
    std::size_t log_mb = 4;     // stdout/stderr and every file written: no larger (RLIMIT_FSIZE)
    int max_tasks = 0;          // processes + threads (cgroup pids.max); 0 = none
    double cpu_s = 0;           // CPU seconds over every thread and process; 0 = none
    bool per_process_memory = true;  // RLIMIT_AS too (not under ASan or CUDA: huge reservations)
    // Confine the child to exactly these CPUs (sched_setaffinity before exec;
    // the seccomp filter keeps a sandboxed child from widening it); empty =
    // all the grader's. A grade picks them with quietest_cpus.
    std::vector<int> cpus;
    // No child runs above normal priority: untrusted code at nice -20 would
    // starve the machine's other work, the grader's own included.
};

// How children are contained; one per grade.
struct Sandbox {
    bool enabled = true;   // false: --unsafe-no-sandbox (local practice only)
    std::string bwrap;     // the bwrap executable
    bool as_nobody = false;  // the grader is root: children run as nobody
    bool cgroups = false;    // cgroup v1 pids/memory/cpuacct/freezer can be made here
    bool cpu_group = false;  // and a cpu controller group: all of a sandbox shares one scheduling weight
    bool gpu = false;        // bind the NVIDIA device nodes
    std::vector<std::string> masked_dirs, masked_files;  // BLAS libraries hidden from the child
    std::string describe() const;  // one line for the report
};

// Finds bwrap and checks that it can make namespaces here; throws UsageError
// saying how to install it (or that --unsafe-no-sandbox exists) otherwise.
Sandbox make_sandbox(bool unsafe, bool allow_blas, bool gpu);

// Every BLAS/LAPACK library under `roots`, at any depth (a BLAS a package
// bundles in a folder of its own: numpy.libs, R's lib/): a file or folder
// whose name says blas, lapack, atlas or libmkl, resolved; a folder so
// named is taken whole. Into `dirs` and `files`, sorted, each once.
void find_blas(const std::vector<std::string>& roots, std::vector<std::string>& dirs, std::vector<std::string>& files);

// What one child is.
struct ChildSpec {
    std::vector<std::string> argv;  // argv[0]: an absolute path
    std::vector<std::string> env;
    std::vector<std::string> ro_binds, rw_binds;  // visible at the same path inside
    // {file, path inside}: visible read-only at another path (the kernel
    // executor's private copies of its executable and libraries).
    std::vector<std::pair<std::string, std::string>> ro_binds_at;
    bool system_files = true;  // /usr, /etc/alternatives, ld.so.cache; false: only what ro_binds* give
    SeccompRole seccomp = SeccompRole::worker;  // which filter (seccomp.hpp)
    std::vector<std::string> hidden;              // folders inside those binds shown empty
    std::string chdir = "/tmp";
    Limits limits;
    bool sandboxed = true;  // false: the trusted reference worker (memwall itself)
};

// A cgroup per child (v1: one directory per controller under ours).
class Cgroup {
public:
    static std::unique_ptr<Cgroup> make(const Limits& limits);  // nullptr when not possible
    // A handle on an existing freezer directory alone, made and removed by
    // someone else (tests of freeze()'s failure).
    static std::unique_ptr<Cgroup> freezer_at(const std::string& dir);
    ~Cgroup();
    void attach_self_async_signal_safe() const;  // in the child, before exec
    bool freeze();
    void thaw();
    // Frozen whatever freeze() and thaw() say, until as many release()s:
    // under cuda-emu the host's processes are held while a kernel runs
    // (thaw() meanwhile only records that the call wants it running).
    bool hold();
    void release();
    double cpu_seconds() const;
    bool memory_exhausted() const;  // the memory limit was hit (an OOM kill, or allocations refused)
    bool tasks_exhausted() const;   // the process/thread cap refused a fork or a thread
    long long oom_kills() const;    // processes the memory limit has killed so far
    int kill_all();                 // SIGKILL every task in it; how many there were
    int kill_all_but(pid_t keep);   // ... but `keep` and its children (running tasks only)
    bool empty() const;
    bool cpu_group() const { return cpu_group_; }  // one scheduling group (cpu controller)

private:
    bool set_frozen(bool frozen);  // under m_
    std::mutex m_;
    bool wanted_thawed_ = false;
    int holds_ = 0;
    bool cpu_group_ = false;
    std::vector<std::string> dirs_;  // pids, memory, cpuacct, freezer (, cpu)
    std::vector<std::string> procs_paths_;
    std::string pids_, memory_, cpuacct_, freezer_;
};

// How a child ended.
struct Exit {
    bool timed_out = false;
    // It answered, but its freezer could not stop it: the grader's (or the
    // machine's) failure, reported as such and graded again, not charged
    // to the submission as a timeout.
    bool unstoppable = false;
    bool cpu_exceeded = false;
    bool memory_exceeded = false;
    bool tasks_exceeded = false;
    int exit_code = -1;  // when it exited
    int signal = 0;      // when a signal killed it
    bool limits_known = false;  // a cgroup said whether a limit was hit
    std::string describe(double wall_s, const Limits& limits) const;
};

// An anonymous, size-capped log (the child's stdout and stderr).
struct Log {
    int fd = -1;
    Log();
    ~Log();
    Log(const Log&) = delete;
    Log& operator=(const Log&) = delete;
    std::string tail(std::size_t max_bytes) const;
};

// Runs a child to completion (the compiler). Its output goes to `log`.
Exit run_to_completion(const Sandbox& sb, const ChildSpec& spec, const Log& log);

// The shared mapping that carries one call's buffers (a memfd, so that it
// survives the worker's exec).
struct SharedMemory {
    int fd = -1;
    unsigned char* base = nullptr;
    std::size_t size = 0;
    SharedHeader& header() { return *reinterpret_cast<SharedHeader*>(base); }
};
SharedMemory make_shared_memory(std::size_t bytes);
void release(SharedMemory& shm);

// A running worker.
struct Worker {
    pid_t pid = -1;
    pid_t executor = -1;  // under cuda-emu: the kernel executor (start_executor)
    int command_fd = -1, reply_fd = -1;
    std::shared_ptr<Log> log, executor_log;
    std::shared_ptr<Cgroup> cgroup, executor_cgroup;
    Limits limits;
    bool sandboxed = false;
};

// device_fd: under cuda-emu, the socket to the emulated device memory, given
// to the worker as kDeviceFd (-1: none).
Worker start_worker(const Sandbox& sb, const ChildSpec& spec, const SharedMemory& shm, int device_fd = -1);

// Under cuda-emu: the kernel executor of worker `w` (harness/emu/
// remote_device.hpp), `spec` run again with MEMWALL_EMU_EXECUTOR_FD: a
// sandbox of its own (no /tmp, socket namespace or process of the worker's
// in sight; for files, private copies of the executable and the libraries
// it loads, nothing else), with `fd` (the device memory's executor end) as
// its descriptor 3, a log of its own, and where cgroups can be made a cgroup
// of its own with the worker's limits: frozen but while a kernel runs, when
// the worker's is held frozen (launch_gate), so that nothing of the host
// runs beside a kernel, nor anything of a kernel beside the host. Its CPU
// time counts with the worker's. Stopped with the worker.
void start_executor(Worker& w, const Sandbox& sb, const ChildSpec& spec, int fd);
// Private copies, in folder `into`, of the dynamic executable `exe` and of
// every shared library it loads (DT_NEEDED up to DT_NULL, as the loader reads
// them, transitively, found as the dynamic loader finds them without a
// cache: the folder of the grader's own C library, then /lib64, /usr/lib64,
// /lib, /usr/lib) and its loader (PT_INTERP): {copy, path inside the
// sandbox}, the executable first. The executable is the submission's: a
// library name must be a plain file name, and every file copied (the loader
// too) must lie in those folders and be readable by anyone along its whole
// path; at most 64 files and 512 MiB, each file copied once however it is
// spelt (red-team batch 11 had the grader, as root, copy files of its
// choosing into the kernels' sandbox through entries past DT_NULL and names
// with '/'). Anything else throws RefusedExecutable, whose message names no
// path of the machine.
struct RefusedExecutable : std::runtime_error {
    using std::runtime_error::runtime_error;
};
std::vector<std::pair<std::string, std::string>> private_copies(const std::filesystem::path& exe,
                                                                const std::filesystem::path& into);

// The switch a launch makes (DeviceServer::set_launch_gate): entering, the
// worker held frozen and the executor thawed; leaving, the reverse. Empty
// without cgroups.
std::function<bool(bool entering)> launch_gate(const Worker& w);

// One round trip: send `cmd`, wait up to `timeout_s` for the reply. The
// worker's cgroup is thawed for the call and frozen again as soon as the
// reply is in (before its outputs are read). On timeout, death or a limit
// the worker is killed and reaped, and `exit` says how it ended.
struct CallResult {
    bool ok = false;        // a reply arrived
    Reply reply;
    double wall_s = 0;      // send to reply, as the grader's clock saw it
    Exit exit;              // when !ok
};
CallResult call_worker(Worker& w, Command cmd, double timeout_s);

// Asks the worker to quit, then kills everything it started; true if nothing
// of it is left.
bool stop_worker(Worker& w);

// The guard of a grade: a process of its own, started before anything is
// made, that outlives the grader. The grader tells it every cgroup and
// folder it makes; when the grader ends, however it ends (an exception, a
// crash, SIGKILL), the guard thaws the cgroups, kills whatever is left in
// them, removes them and removes the folders. (Sandboxed processes die with
// the grader, bwrap's --die-with-parent; a frozen one only once thawed.)
void start_guard();
void guard_cgroup(const std::string& dir);  // no-ops without a guard
void guard_folder(const std::string& dir);

// `memwall grade --cleanup`: what graders and guards that were themselves
// killed left behind: cgroups memwall-grade-<pid>-* and temp folders
// memwall-grade-* (with a grader.pid file) of a grader no longer running.
// Returns one line per thing removed.
std::vector<std::string> cleanup_leftovers();

// The CPUs a grade runs its submission and its reference on.
struct CpuChoice {
    std::vector<int> cpus;                     // the chosen, ascending
    std::vector<std::pair<int, double>> busy;  // each CPU of the grader's own: fraction busy over the window
    bool measured = false;                     // false: /proc/stat unreadable, the first CPUs taken
};

// The `n` CPUs of the grader's own that were least busy over `window_s`
// (from /proc/stat; ties go to the lower number): a neighbour spinning on
// one core of two then slows neither side of a one-thread grade, where the
// first CPUs would put both sides beside it.
CpuChoice quietest_cpus(int n, double window_s = 0.2);

// `cpus` as "0,1"; empty: every CPU of the grader's own.
std::string cpu_list(const std::vector<int>& cpus);

// Makes this process non-dumpable (no /proc/<pid>/mem for same-user children).
void harden_grader();

// A private directory (0700) for the grader's own files; build/ inside it is
// where the compiler writes (owned by nobody when the grader is root).
std::filesystem::path make_temp_dir();

}  // namespace mw::grade
