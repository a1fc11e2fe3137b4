// Attack on cuda-emu's grading of a CUDA exercise, after red-team batch 8's
// probe: a new inode (a shared anonymous mapping, a memory file, a pipe, a
// socket, a file in a tmpfs, a lookup in /proc) takes its number from a
// counter the machine keeps per CPU. A kernel that makes v of them on the
// CPU it shares with the host moves the number the host's next one gets by
// v: the host reads it off its own shared mapping in /proc/self/maps before
// and after a launch, and knows v. Now the kernel executor runs under an
// allowlist that makes no inode at all (no shared anonymous memory, no file
// created, no pipe, socket, memory file or event descriptor) in a sandbox
// with no /proc, /dev or /tmp.
//
// This control reports what it can reach. Its first call, on the host:
// "HOST_INODES shared=<inode>|refused" (the host may still make one: the
// probe works). Its second: one kernel tries every way and fails with
// "KERNEL_INODES shared=... devzero=... memfd=... pipe=... socket=...
// tmpfile=... created=... mkdir=... proc=... eventfd=... shmget=..." (each
// "ok" when it worked).
#include <fcntl.h>
#include <sys/eventfd.h>
#include <sys/ipc.h>
#include <sys/mman.h>
#include <sys/shm.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>

#include "harness/cuda/launch.hpp"

namespace {

const char* verdict(bool worked) { return worked ? "ok" : "refused"; }

// The inode number of a new shared anonymous mapping, as /proc/self/maps
// shows it; "refused" when none can be made or read.
std::string shared_mapping_inode() {
    void* p = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return "refused";
    std::ifstream maps("/proc/self/maps");
    const std::string start = [&] {
        char b[32];
        std::snprintf(b, sizeof b, "%lx-", reinterpret_cast<unsigned long>(p));
        return std::string(b);
    }();
    std::string inode = "refused";
    for (std::string line; std::getline(maps, line);)
        if (line.rfind(start, 0) == 0) {
            // address perms offset dev inode path
            std::istringstream f(line);
            std::string field;
            for (int i = 0; i < 5 && f >> field; ++i) {
            }
            inode = field;
        }
    munmap(p, 4096);
    return inode;
}

__global__ void make_inodes() {
    void* shared = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    const int zero = open("/dev/zero", O_RDWR);
    const bool devzero =
        zero >= 0 && mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, zero, 0) != MAP_FAILED;
    int p[2];
    const char* tmpdir = std::getenv("TMPDIR");  // else the C library's temporary folder
    const std::string in_tmp = std::string(tmpdir && *tmpdir ? tmpdir : P_tmpdir) + "/memwall-attack";
    const int tmp = open(in_tmp.c_str(), O_CREAT | O_WRONLY, 0600);
    const int unnamed = open(".", O_TMPFILE | O_RDWR, 0600);
    const int created = open("memwall-attack", O_CREAT | O_WRONLY, 0600);
    struct stat st {};
    throw std::runtime_error(
        std::string("KERNEL_INODES shared=") + verdict(shared != MAP_FAILED) + " devzero=" + verdict(devzero) +
        " memfd=" + verdict(memfd_create("x", 0) >= 0) + " pipe=" + verdict(pipe(p) == 0) +
        " socket=" + verdict(socket(AF_UNIX, SOCK_STREAM, 0) >= 0) + " tmpfile=" + verdict(tmp >= 0 || unnamed >= 0) +
        " created=" + verdict(created >= 0) + " mkdir=" + verdict(mkdir("memwall-attack-dir", 0700) == 0) +
        " proc=" + verdict(stat("/proc/self/status", &st) == 0) + " eventfd=" + verdict(eventfd(0, 0) >= 0) +
        " shmget=" + verdict(shmget(IPC_PRIVATE, 4096, IPC_CREAT | 0600) >= 0));
}

}  // namespace

void student_gemm_cuda(const float*, const float*, float*, int, int, int, cudaStream_t stream) {
    static int calls = 0;
    if (calls++ == 0) throw std::runtime_error("HOST_INODES shared=" + shared_mapping_inode());
    mw::launch(make_inodes, dim3(1), dim3(1), 0, stream);
    cudaStreamSynchronize(stream);
}
