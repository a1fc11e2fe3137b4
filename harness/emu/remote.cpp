// cuda-emu's client of device memory held by another process, and the
// kernel executor that runs its launches (remote_device.hpp says why and
// how): allocations, copies, sets and launches are requests on the socket;
// the executor maps every allocation at its address in a forked child, runs
// the kernel there and sends every allocation back.
#include <dlfcn.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
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

bool in_arena(const void* p, std::size_t bytes) { return r::in_arena(reinterpret_cast<std::uintptr_t>(p), bytes); }

// Where this executable is loaded: code addresses cross the wire as offsets
// from it (the host and the executor run the same file, each at its own base).
std::uintptr_t module_base() {
    static const std::uintptr_t base = [] {
        Dl_info info{};
        if (!dladdr(reinterpret_cast<void*>(&mw::emu::serve_launches), &info) || !info.dli_fbase)
            throw LaunchError("cuda-emu: cannot find where the executable is loaded");
        return reinterpret_cast<std::uintptr_t>(info.dli_fbase);
    }();
    return base;
}

// The host's cudaMemcpyToSymbol ranges (address -> bytes): each launch takes
// their current bytes along.
std::mutex symbols_m;
std::map<std::uintptr_t, std::size_t> symbols;

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

void note_symbol_write(const void* at, std::size_t bytes) {
    if (!remote_device() || bytes == 0) return;
    std::lock_guard lk(symbols_m);
    std::size_t& b = symbols[reinterpret_cast<std::uintptr_t>(at)];
    b = std::max(b, bytes);
}

void remote_launch(const LaunchSpec& spec) {
    if (!spec.data_copyable)
        throw LaunchError("cuda-emu: a kernel argument that is not trivially copyable cannot be sent to the device");
    const std::uintptr_t base = module_base();
    r::LaunchHeader h;
    h.thunk = reinterpret_cast<std::uintptr_t>(spec.thunk) - base;
    h.kernel = reinterpret_cast<std::uintptr_t>(spec.kernel) - base;
    h.data_bytes = spec.data_bytes;
    h.smem_bytes = spec.smem_bytes;
    const unsigned g[3] = {spec.grid.x, spec.grid.y, spec.grid.z}, b[3] = {spec.block.x, spec.block.y, spec.block.z};
    std::copy(g, g + 3, h.grid), std::copy(b, b + 3, h.block);
    std::vector<unsigned char> msg(sizeof h + spec.data_bytes);
    std::memcpy(msg.data() + sizeof h, spec.data, spec.data_bytes);
    {
        std::lock_guard lk(symbols_m);
        for (auto& [at, bytes] : symbols) {
            const r::SymbolWrite w{at - base, bytes};
            const auto* p = reinterpret_cast<const unsigned char*>(&w);
            msg.insert(msg.end(), p, p + sizeof w);
            const auto* v = reinterpret_cast<const unsigned char*>(at);
            msg.insert(msg.end(), v, v + bytes);
        }
        h.n_symbols = static_cast<std::uint32_t>(symbols.size());
    }
    std::memcpy(msg.data(), &h, sizeof h);
    if (msg.size() > r::kMaxLaunchBytes)
        throw LaunchError("cuda-emu: a launch's arguments and __constant__ symbols come to " +
                          std::to_string(msg.size()) + " bytes, more than the " +
                          std::to_string(r::kMaxLaunchBytes) + " the device takes");
    r::Request q;
    q.op = r::kLaunch, q.bytes = msg.size();
    const cudaError_t e = exchange(q, msg.data(), nullptr);
    if (e != cudaSuccess)
        throw LaunchError(std::string("cuda-emu: the kernel failed on the device (") + cudaGetErrorString(e) +
                          "); the device's own report says why");
}

}  // namespace mw::emu::detail

// --- the kernel executor -----------------------------------------------------------

namespace mw::emu {

namespace {

namespace r = ::mw::emu::remote;

// Bounded reads out of a launch message.
struct Reader {
    const unsigned char* p;
    std::size_t left;
    template <class T> bool get(T& v) { return take(&v, sizeof v); }
    bool take(void* to, std::size_t n) {
        if (n > left) return false;
        std::memcpy(to, p, n), p += n, left -= n;
        return true;
    }
    const unsigned char* skip(std::size_t n) {
        if (n > left) return nullptr;
        const unsigned char* at = p;
        p += n, left -= n;
        return at;
    }
};

// In the launch's child: the host's __constant__ bytes into this process's
// copies of the symbols, then the kernel. "" on success, else why not.
std::string run_child(const std::vector<unsigned char>& launch) {
    const std::uintptr_t base = detail::module_base();
    Reader in{launch.data(), launch.size()};
    r::LaunchHeader h;
    const unsigned char* data = nullptr;
    if (!in.get(h) || !(data = in.skip(h.data_bytes))) return "cuda-emu: a malformed launch";
    for (std::uint32_t i = 0; i < h.n_symbols; ++i) {
        r::SymbolWrite w;
        const unsigned char* bytes = nullptr;
        if (!in.get(w) || !(bytes = in.skip(w.bytes))) return "cuda-emu: a malformed launch";
        std::memcpy(reinterpret_cast<void*>(base + w.offset), bytes, w.bytes);
    }
    // A copy aligned for any argument type.
    std::vector<std::max_align_t> args(h.data_bytes / sizeof(std::max_align_t) + 1);
    std::memcpy(args.data(), data, h.data_bytes);
    detail::LaunchSpec spec{reinterpret_cast<const void*>(base + h.kernel),
                            reinterpret_cast<void (*)(const void*, const void*)>(base + h.thunk),
                            args.data(),
                            h.data_bytes,
                            true,
                            dim3(h.grid[0], h.grid[1], h.grid[2]),
                            dim3(h.block[0], h.block[1], h.block[2]),
                            h.smem_bytes};
    try {
        detail::run_launch_here(spec);
    } catch (const std::exception& e) {
        return e.what();
    }
    return {};
}

// Runs one launch in a forked child over allocations mapped shared at their
// addresses; returns the reply (and leaves the allocations holding the
// kernel's writes on success).
r::LaunchReply run_launch_in_child(const std::vector<unsigned char>& launch, int memory_fd, std::string& message) {
    std::fflush(nullptr);
    // The child's message comes back in the memory file's last pages (no
    // pipe: under grading the executor may make no new pipe or shared
    // memory, whose inode numbers would come from counters the whole
    // machine shares).
    struct Box {
        std::uint32_t bytes;
        char text[r::kMaxMessageBytes];
    };
    static_assert(sizeof(Box) <= r::kMessagePages * r::kPage);
    r::LaunchReply reply;
    reply.status = r::kLaunchFailure;
    void* page = mmap(nullptr, sizeof(Box), PROT_READ | PROT_WRITE, MAP_SHARED, memory_fd,
                      static_cast<off_t>(r::kArenaBytes));
    if (page == MAP_FAILED) return message = "cuda-emu: cannot start the kernel's process (mmap)", reply;
    auto* box = static_cast<Box*>(page);
    box->bytes = 0;
    const pid_t child = fork();
    if (child < 0) {
        munmap(page, sizeof(Box));
        return message = "cuda-emu: cannot start the kernel's process (fork)", reply;
    }
    if (child == 0) {
        const std::string m = run_child(launch);
        std::fflush(nullptr);
        box->bytes = static_cast<std::uint32_t>(std::min(m.size(), r::kMaxMessageBytes));
        std::memcpy(box->text, m.data(), box->bytes);
        _exit(m.empty() ? 0 : 1);
    }
    int status = 0;
    while (waitpid(child, &status, 0) < 0 && errno == EINTR) {
    }
    message.assign(box->text, std::min<std::size_t>(box->bytes, r::kMaxMessageBytes));
    munmap(page, sizeof(Box));
    if (WIFSIGNALED(status)) {
        const int sig = WTERMSIG(status);
        message = std::string("cuda-emu: the kernel's process died of ") + strsignal(sig) +
                  (sig == SIGSEGV || sig == SIGBUS ? " (an access outside device memory, as a GPU's illegal address)"
                   : sig == SIGKILL              ? " (killed: a memory or process limit?)"
                                                 : "");
    } else if (message.empty() && (!WIFEXITED(status) || WEXITSTATUS(status) != 0)) {
        message = "cuda-emu: the kernel's process failed";
    }
    if (message.empty()) reply.status = 0;
    message.resize(std::min(message.size(), r::kMaxMessageBytes));
    reply.message_bytes = static_cast<std::uint32_t>(message.size());
    return reply;
}

}  // namespace

[[noreturn]] void serve_launches(int fd, int memory_fd) {
    struct stat st {};
    if (memory_fd < 0 || fstat(memory_fd, &st) != 0 || static_cast<std::size_t>(st.st_size) < r::kMemoryFileBytes) {
        std::fprintf(stderr, "cuda-emu executor: no device memory file (%s)\n", r::kExecutorMemoryVariable);
        _exit(1);
    }
    for (;;) {
        std::uint64_t launch_bytes = 0, count = 0;
        if (!r::recv_all(fd, &launch_bytes, sizeof launch_bytes) || launch_bytes > r::kMaxLaunchBytes) _exit(0);
        std::vector<unsigned char> launch(launch_bytes);
        if (!r::recv_all(fd, launch.data(), launch.size()) || !r::recv_all(fd, &count, sizeof count) ||
            count > (std::size_t(1) << 16))
            _exit(0);
        std::vector<r::Extent> all(count);
        if (count && !r::recv_all(fd, all.data(), count * sizeof(r::Extent))) _exit(0);
        // Every allocation at its address, shared with the launch's child
        // (the page after each stays unmapped: an access past the end faults).
        std::vector<std::pair<void*, std::size_t>> maps;
        std::string message;
        for (auto& e : all) {
            if (e.bytes == 0) continue;
            if (!r::in_arena(e.addr, e.bytes)) _exit(1);
            const std::uintptr_t page = e.addr / r::kPage * r::kPage;
            const std::size_t len = (e.addr + e.bytes + r::kPage - 1) / r::kPage * r::kPage - page;
            void* at = reinterpret_cast<void*>(page);
            const auto offset = static_cast<off_t>(page - r::kArenaBase);
            if (mmap(at, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED_NOREPLACE, memory_fd, offset) != at)
                _exit(1);  // something of this process's own at a device address
            maps.emplace_back(at, len);
            if (!r::recv_all(fd, reinterpret_cast<void*>(e.addr), e.bytes)) _exit(0);
        }
        const r::LaunchReply reply = run_launch_in_child(launch, memory_fd, message);
        bool sent = r::send_all(fd, &reply, sizeof reply) && r::send_all(fd, message.data(), message.size());
        for (auto& e : all)
            if (sent && reply.status == 0 && e.bytes) sent = r::send_all(fd, reinterpret_cast<void*>(e.addr), e.bytes);
        // Unmapped, and its pages given back (the server sends every
        // allocation again with the next launch).
        for (auto& [at, len] : maps) {
            munmap(at, len);
            fallocate(memory_fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
                      static_cast<off_t>(reinterpret_cast<std::uintptr_t>(at) - r::kArenaBase),
                      static_cast<off_t>(len));
        }
        if (!sent) _exit(0);
    }
}

}  // namespace mw::emu
