#include "commands/grade/timing_lock.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>

namespace mw::grade {

TimingLock::TimingLock(double max_wait_s, Mode mode) : mode_(mode) {
    const char* env = std::getenv("MEMWALL_GRADE_LOCK");
    path_ = env && *env ? env : (std::filesystem::temp_directory_path() / "memwall-grade-timing.lock").string();
    // Not through a link another user planted, not blocked on a FIFO: the
    // folder is shared with everyone on the host. Opened without O_CREAT
    // first (fs.protected_regular refuses O_CREAT on another user's file in
    // a sticky folder, even to root), made with O_EXCL only where missing.
    constexpr int kFlags = O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC;
    bool made = false;
    int fd = -1;
    for (int attempt = 0; attempt < 3 && fd < 0; ++attempt) {
        fd = ::open(path_.c_str(), kFlags);
        if (fd < 0 && errno == ENOENT) {
            fd = ::open(path_.c_str(), kFlags | O_CREAT | O_EXCL, 0644);
            made = fd >= 0;
            if (fd < 0 && errno == EEXIST) continue;  // another grader made it meanwhile
        }
        if (fd < 0) break;
    }
    if (fd < 0) {
        why_not_ = "cannot open " + path_ + ": " + std::strerror(errno);
        return;
    }
    auto refuse = [&](std::string why) {  // times without the lock, and says why
        ::close(fd);
        why_not_ = std::move(why);
    };
    struct stat st{};
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_nlink != 1) {
        refuse(path_ + " is not a plain file");
        return;
    }
    // A file another user (not root) made could be held by that user to
    // stall every grade: only root's and the grader's own are trusted.
    if (st.st_uid != 0 && st.st_uid != ::geteuid()) {
        refuse(path_ + " belongs to another user (uid " + std::to_string(st.st_uid) + ")");
        return;
    }
    // A file this grader made is opened to every user's graders (root's and
    // a course account's share one host), whatever the umask.
    if (made && ::fchmod(fd, 0644) != 0) {
        // not fatal: other users' graders then time without it, and say so
    }
    const auto t0 = std::chrono::steady_clock::now();
    auto since = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };
    const int how = mode == Mode::times ? LOCK_EX : LOCK_SH;
    while (::flock(fd, how | LOCK_NB) != 0) {
        if (errno != EWOULDBLOCK && errno != EINTR) {
            refuse("cannot lock " + path_ + ": " + std::strerror(errno));
            return;
        }
        if (since() >= max_wait_s) {
            waited_s_ = since();
            refuse("another grade held " + path_ + " for longer than " + std::to_string(int(max_wait_s + 0.5)) + " s");
            return;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    waited_s_ = since();
    fd_ = fd;
}

double timing_lock_wait_s(double fallback) {
    const char* w = std::getenv("MEMWALL_GRADE_LOCK_WAIT_S");
    if (!w || !*w) return fallback;
    char* end = nullptr;
    errno = 0;
    const double v = std::strtod(w, &end);
    if (end == w || *end || errno || !(v >= 0 && v <= 86400))
        throw std::invalid_argument(std::string("MEMWALL_GRADE_LOCK_WAIT_S '") + w +
                                    "' is not a number of seconds from 0 to 86400");
    return v;
}

TimingLock::~TimingLock() {
    if (fd_ >= 0) ::close(fd_);  // closing the last descriptor releases the lock
}

}  // namespace mw::grade
