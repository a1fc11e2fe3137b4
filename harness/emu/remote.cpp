// cuda-emu's client of device memory held by another process
// (remote_device.hpp says why and how): allocations, copies and sets are
// requests on the socket; a launch runs in a forked child that maps every
// allocation into the arena, fetches it, runs the kernel and writes it back.
#include <sys/mman.h>
#include <sys/wait.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "harness/emu/cuda_emu.hpp"
#include "harness/emu/emu_internal.hpp"
#include "harness/emu/remote_device.hpp"

namespace mw::emu::detail {

namespace {

namespace r = ::mw::emu::remote;

int device_fd() {
    static const int fd = [] {
        const char* e = std::getenv(r::kFdVariable);
        return e && *e ? std::atoi(e) : -1;
    }();
    return fd;
}

std::mutex wire_m;  // one request at a time on the socket
// Once a message is cut short (a bad host pointer, a kernel's process killed
// mid-copy), what is left on the wire would be read as the next answer: from
// then on every call fails, as a GPU context does after an illegal address.
bool wire_broken = false;

// One request and its response; payload out after the request, payload in
// after the response. A broken wire is an unspecified launch failure.
cudaError_t exchange(const r::Request& q, const void* out, void* in, r::Response* resp = nullptr) {
    std::lock_guard lk(wire_m);
    const int fd = device_fd();
    r::Response got;
    if (wire_broken) return cudaErrorLaunchFailure;
    if (!r::send_all(fd, &q, sizeof q) || (out && !r::send_all(fd, out, q.bytes)) ||
        !r::recv_all(fd, &got, sizeof got))
        return wire_broken = true, cudaErrorLaunchFailure;
    if (got.status == 0 && in && !r::recv_all(fd, in, q.bytes)) return wire_broken = true, cudaErrorLaunchFailure;
    if (resp) *resp = got;
    return static_cast<cudaError_t>(got.status);
}

std::vector<r::Extent> list_allocations() {
    std::lock_guard lk(wire_m);
    const int fd = device_fd();
    r::Request q;
    q.op = r::kList;
    r::Response got;
    if (wire_broken || !r::send_all(fd, &q, sizeof q) || !r::recv_all(fd, &got, sizeof got) || got.status != 0 ||
        got.bytes > (std::size_t(1) << 20))
        throw LaunchError("cuda-emu: the device memory's process did not list its allocations");
    std::vector<r::Extent> all(got.bytes);
    if (!all.empty() && !r::recv_all(fd, all.data(), all.size() * sizeof(r::Extent)))
        throw LaunchError("cuda-emu: the device memory's process did not list its allocations");
    return all;
}

bool in_arena(const void* p, std::size_t bytes) { return r::in_arena(reinterpret_cast<std::uintptr_t>(p), bytes); }

// In the kernel's process: every allocation mapped at its address (its
// slot's pages; the page after stays unmapped) and filled from the server.
void fetch_all(const std::vector<r::Extent>& all) {
    for (auto& e : all) {
        if (e.bytes == 0) continue;  // nothing to map: an access faults, as past the end of any allocation
        if (!r::in_arena(e.addr, e.bytes)) throw LaunchError("cuda-emu: an allocation outside the device arena");
        const std::uintptr_t page = e.addr / r::kPage * r::kPage;
        const std::size_t len = (e.addr + (e.bytes ? e.bytes : 1) + r::kPage - 1) / r::kPage * r::kPage - page;
        void* at = reinterpret_cast<void*>(page);
        if (mmap(at, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0) != at)
            throw LaunchError("cuda-emu: cannot map device memory in the kernel's process (something of the "
                              "program's own is mapped at a device address)");
        r::Request q;
        q.op = r::kRead, q.addr = e.addr, q.bytes = e.bytes;
        if (exchange(q, nullptr, reinterpret_cast<void*>(e.addr)) != cudaSuccess)
            throw LaunchError("cuda-emu: cannot read device memory from its process");
    }
}

void store_all(const std::vector<r::Extent>& all) {
    for (auto& e : all) {
        if (e.bytes == 0) continue;
        r::Request q;
        q.op = r::kWrite, q.addr = e.addr, q.bytes = e.bytes;
        if (exchange(q, reinterpret_cast<const void*>(e.addr), nullptr) != cudaSuccess)
            throw LaunchError("cuda-emu: cannot write device memory back to its process");
    }
}

}  // namespace

bool remote_device() { return device_fd() >= 0; }

cudaError_t remote_malloc(void** ptr, std::size_t bytes) {
    r::Request q;
    q.op = r::kAlloc, q.bytes = bytes;
    r::Response resp;
    const cudaError_t e = exchange(q, nullptr, nullptr, &resp);
    if (e != cudaSuccess) return e;
    *ptr = reinterpret_cast<void*>(resp.addr);
    return cudaSuccess;
}

cudaError_t remote_free(void* ptr) {
    r::Request q;
    q.op = r::kFree, q.addr = reinterpret_cast<std::uintptr_t>(ptr);
    return exchange(q, nullptr, nullptr);
}

cudaError_t remote_copy(void* dst, const void* src, std::size_t bytes, cudaMemcpyKind kind) {
    const bool to_device = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice ||
                           (kind == cudaMemcpyDefault && in_arena(dst, bytes));
    const bool from_device = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice ||
                             (kind == cudaMemcpyDefault && in_arena(src, bytes));
    r::Request q;
    q.addr = reinterpret_cast<std::uintptr_t>(dst), q.from = reinterpret_cast<std::uintptr_t>(src), q.bytes = bytes;
    if (to_device && from_device) return q.op = r::kCopy, exchange(q, nullptr, nullptr);
    if (to_device) return q.op = r::kWrite, exchange(q, src, nullptr);
    if (from_device) return q.op = r::kRead, q.addr = q.from, exchange(q, nullptr, dst);
    std::memmove(dst, src, bytes);
    return cudaSuccess;
}

cudaError_t remote_set(void* dst, int value, std::size_t bytes) {
    r::Request q;
    q.op = r::kSet, q.addr = reinterpret_cast<std::uintptr_t>(dst), q.bytes = bytes;
    q.value = static_cast<std::uint32_t>(value & 0xFF);
    return exchange(q, nullptr, nullptr);
}

void remote_launch(const std::function<void()>& run) {
    std::fflush(nullptr);  // nothing buffered now is written twice
    int err[2];
    if (pipe(err) != 0) throw LaunchError("cuda-emu: cannot start the kernel's process (pipe)");
    const pid_t child = fork();
    if (child < 0) {
        close(err[0]), close(err[1]);
        throw LaunchError("cuda-emu: cannot start the kernel's process (fork)");
    }
    if (child == 0) {
        close(err[0]);
        std::string message;
        try {
            const auto all = list_allocations();
            fetch_all(all);
            run();
            store_all(all);
        } catch (const std::exception& e) {
            message = e.what();
        }
        std::fflush(nullptr);
        if (!message.empty()) (void)!::write(err[1], message.data(), std::min<std::size_t>(message.size(), 4000));
        _exit(message.empty() ? 0 : 1);
    }
    close(err[1]);
    std::string message;
    char buf[512];
    for (ssize_t k; (k = ::read(err[0], buf, sizeof buf)) != 0;) {
        if (k < 0 && errno == EINTR) continue;
        if (k < 0) break;
        message.append(buf, static_cast<std::size_t>(k));
    }
    close(err[0]);
    int status = 0;
    while (waitpid(child, &status, 0) < 0 && errno == EINTR) {
    }
    if (WIFSIGNALED(status)) {
        // The child may have died mid-message: the wire cannot be trusted again.
        std::lock_guard lk(wire_m);
        wire_broken = true;
        const int sig = WTERMSIG(status);
        throw LaunchError(std::string("cuda-emu: the kernel's process died of ") + strsignal(sig) +
                          (sig == SIGSEGV || sig == SIGBUS
                               ? " (an access outside device memory, as a GPU's illegal address)"
                               : sig == SIGKILL ? " (killed: a memory or process limit?)" : ""));
    }
    if (!message.empty()) throw LaunchError(message);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) throw LaunchError("cuda-emu: the kernel's process failed");
}

}  // namespace mw::emu::detail
