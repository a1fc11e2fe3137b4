#include "commands/grade/device_server.hpp"

#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>

namespace mw::grade {

namespace r = ::mw::emu::remote;

namespace {

// cudaError_t's values (the wire carries CUDA's numbers).
constexpr std::int32_t kInvalidValue = 1, kMemoryAllocation = 2, kInvalidDevicePointer = 17;

constexpr const char* kExecutorGone = "cuda-emu: the kernel executor is gone (it died, or was killed for a limit)";
// What span() gives for an empty range inside an allocation (never dereferenced).
unsigned char empty_range;

}  // namespace

DeviceServer::DeviceServer(std::size_t limit_bytes) : limit_(limit_bytes), next_(r::kArenaBase) {}

DeviceServer::~DeviceServer() {
    stop_serving();
    close_client();
    for (auto& [addr, b] : mem_) std::free(b.data);
}

void DeviceServer::stop_serving() {
    if (server_fd_ >= 0) shutdown(server_fd_, SHUT_RDWR);  // the thread's recv or send returns
    if (executor_fd_ >= 0) shutdown(executor_fd_, SHUT_RDWR);  // or its wait for the executor
    if (thread_.joinable()) thread_.join();
    if (server_fd_ >= 0) close(server_fd_);
    if (executor_fd_ >= 0) close(executor_fd_);
    server_fd_ = executor_fd_ = -1;
}

void DeviceServer::close_client() {
    if (client_fd_ >= 0) close(client_fd_);
    if (executor_client_fd_ >= 0) close(executor_client_fd_);
    client_fd_ = executor_client_fd_ = -1;
}

int DeviceServer::reconnect() {
    stop_serving();
    close_client();
    set_launch_gate({});
    {
        std::lock_guard lk(m_);
        for (auto& [addr, b] : mem_) std::free(b.data);
        mem_.clear();
        free_slots_.clear();
        used_ = 0;
        next_ = r::kArenaBase;
        traffic_ = {};
        launch_failed_ = false;
        pending_.clear();
        pending_bytes_ = 0;
    }
    int sv[2], ex[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
        throw std::runtime_error(std::string("socketpair: ") + std::strerror(errno));
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, ex) != 0) {
        close(sv[0]), close(sv[1]);
        throw std::runtime_error(std::string("socketpair: ") + std::strerror(errno));
    }
    server_fd_ = sv[0], client_fd_ = sv[1];
    executor_fd_ = ex[0], executor_client_fd_ = ex[1];
    thread_ = std::thread([this, fd = sv[0]] { serve(fd); });
    return client_fd_;
}

std::uint64_t DeviceServer::alloc(std::size_t bytes) {
    std::lock_guard lk(m_);
    const std::size_t used = r::used_bytes(bytes), slot_bytes = r::slot_pages_bytes(bytes) + r::kPage;
    if (bytes > limit_ || used_ + bytes > limit_ || mem_.size() >= kMaxAllocations) return 0;
    std::uint64_t slot = 0;
    if (auto it = free_slots_.find(slot_bytes); it != free_slots_.end()) {
        slot = it->second;  // a freed slot of this size: honest code that allocates per call never runs out
        free_slots_.erase(it);
    } else {
        if (next_ + slot_bytes > r::kArenaBase + r::kArenaBytes) return 0;
        slot = next_;
        next_ += slot_bytes;  // the slot's last page no allocation uses
    }
    Block b{static_cast<unsigned char*>(std::calloc(std::max<std::size_t>(bytes, 1), 1)), bytes, slot, slot_bytes};
    if (!b.data) {
        free_slots_.emplace(slot_bytes, slot);
        return 0;
    }
    const std::uint64_t addr = slot + (slot_bytes - r::kPage - used);
    mem_[addr] = b;
    used_ += bytes;
    return addr;
}

void DeviceServer::drop(std::map<std::uint64_t, Block>::iterator it) {
    used_ -= it->second.bytes;
    std::free(it->second.data);
    free_slots_.emplace(it->second.slot_bytes, it->second.slot);
    mem_.erase(it);
}

void DeviceServer::free(std::uint64_t addr) {
    finish(kDrainSeconds);
    std::lock_guard lk(m_);
    if (auto it = mem_.find(addr); it != mem_.end()) drop(it);
}

unsigned char* DeviceServer::span(std::uint64_t addr, std::size_t bytes) {
    auto it = mem_.upper_bound(addr);
    if (it == mem_.begin()) return nullptr;
    --it;
    const std::uint64_t off = addr - it->first;
    if (off > it->second.bytes || bytes > it->second.bytes - off) return nullptr;
    return bytes == 0 ? &empty_range : it->second.data + off;
}

bool DeviceServer::write(std::uint64_t addr, const void* data, std::size_t bytes) {
    finish(kDrainSeconds);
    std::lock_guard lk(m_);
    unsigned char* p = span(addr, bytes);
    if (p && bytes) std::memcpy(p, data, bytes);
    return p != nullptr;
}

bool DeviceServer::read(std::uint64_t addr, void* out, std::size_t bytes) {
    finish(kDrainSeconds);
    std::lock_guard lk(m_);
    const unsigned char* p = const_cast<DeviceServer*>(this)->span(addr, bytes);
    if (p && bytes) std::memcpy(out, p, bytes);
    return p != nullptr;
}

bool DeviceServer::fill(std::uint64_t addr, unsigned char value, std::size_t bytes) {
    finish(kDrainSeconds);
    std::lock_guard lk(m_);
    unsigned char* p = span(addr, bytes);
    if (p && bytes) std::memset(p, value, bytes);
    return p != nullptr;
}

// A broken or hostile client ends its connection, never the grader: the
// worker then sees a dead wire (a launch failure), the grader a failed call.
void DeviceServer::serve(int fd) {
    try {
        while (handle(fd)) {
        }
    } catch (...) {
    }
    shutdown(fd, SHUT_RDWR);
}

// A write's payload, a chunk at a time, each chunk into the allocation as it
// is then (the grader holds no more than a chunk of it besides); a write that
// is not inside one allocation is read and dropped, and answered with an
// error, as CUDA answers a bad copy. False when the wire breaks.
bool DeviceServer::receive_write(int fd, const r::Request& q, std::int32_t& status) {
    std::vector<unsigned char> chunk(std::min<std::size_t>(q.bytes, kChunk));
    for (std::size_t done = 0; done < q.bytes;) {
        const std::size_t n = std::min<std::size_t>(q.bytes - done, kChunk);
        if (!r::recv_all(fd, chunk.data(), n)) return false;
        std::lock_guard lk(m_);
        if (unsigned char* p = status == 0 ? span(q.addr + done, n) : nullptr) std::memcpy(p, chunk.data(), n);
        else status = kInvalidValue;
        done += n;
    }
    std::lock_guard lk(m_);
    if (!span(q.addr, q.bytes)) status = kInvalidValue;
    return true;
}

std::int32_t DeviceServer::fail_launch(const std::string& why) {
    std::lock_guard lk(m_);
    launch_failed_ = true;
    if (traffic_.launch_errors.size() < 2 * r::kMaxMessageBytes)
        traffic_.launch_errors += (traffic_.launch_errors.empty() ? "" : "\n") + why;
    return r::kLaunchFailure;
}

// The executor gets the launch and every allocation, and gives back every
// allocation after the kernel (a chunk at a time, each into the allocation
// under the lock). Allocations cannot change meanwhile: this thread alone
// serves the host, and the grader touches device memory only between calls.
void DeviceServer::set_launch_gate(std::function<bool(bool)> gate) {
    std::lock_guard lk(gate_m_);
    gate_ = std::move(gate);
}

std::int32_t DeviceServer::launch(const std::vector<unsigned char>& message) {
    if (launch_failed_) return r::kLaunchFailure;
    std::function<bool(bool)> gate;
    {
        std::lock_guard lk(gate_m_);
        gate = gate_;
    }
    if (gate && !gate(true)) {
        gate(false);
        return fail_launch("cuda-emu: the grader could not stop the host's processes for the kernel");
    }
    const std::int32_t status = relay(message);
    if (gate && !gate(false) && status == 0)
        return fail_launch("cuda-emu: the grader could not stop the kernel's processes after it");
    return status;
}

std::int32_t DeviceServer::relay(const std::vector<unsigned char>& message) {
    const int fd = executor_fd_;
    std::vector<r::Extent> all;
    {
        std::lock_guard lk(m_);
        for (auto& [addr, b] : mem_) all.push_back({addr, b.bytes});
    }
    const std::uint64_t launch_bytes = message.size(), count = all.size();
    if (!r::send_all(fd, &launch_bytes, sizeof launch_bytes) || !r::send_all(fd, message.data(), message.size()) ||
        !r::send_all(fd, &count, sizeof count) || !r::send_all(fd, all.data(), all.size() * sizeof(r::Extent)))
        return fail_launch(kExecutorGone);
    std::vector<unsigned char> chunk(kChunk);
    const auto move = [&](bool out) {
        for (auto& e : all)
            for (std::uint64_t done = 0; done < e.bytes;) {
                const std::size_t n = std::min<std::size_t>(e.bytes - done, kChunk);
                if (out) {
                    {
                        std::lock_guard lk(m_);
                        const unsigned char* p = span(e.addr + done, n);
                        if (p) std::memcpy(chunk.data(), p, n);
                    }
                    if (!r::send_all(fd, chunk.data(), n)) return false;
                } else {
                    if (!r::recv_all(fd, chunk.data(), n)) return false;
                    std::lock_guard lk(m_);
                    if (unsigned char* p = span(e.addr + done, n)) std::memcpy(p, chunk.data(), n);
                }
                done += n;
            }
        return true;
    };
    r::LaunchReply reply;
    if (!move(true) || !r::recv_all(fd, &reply, sizeof reply) || reply.message_bytes > r::kMaxMessageBytes)
        return fail_launch(kExecutorGone);
    std::string why(reply.message_bytes, '\0');
    if (!why.empty() && !r::recv_all(fd, why.data(), why.size()))
        return fail_launch(kExecutorGone);
    if (reply.status != 0) return fail_launch(why.empty() ? "cuda-emu: the kernel failed" : why);
    if (!move(false)) return fail_launch(kExecutorGone);
    return 0;
}

DeviceServer::Traffic DeviceServer::take_traffic() {
    std::lock_guard lk(m_);
    const Traffic t = traffic_;
    traffic_ = {};
    return t;
}

// After a launch in the queue, a write, set, copy or free waits there too
// (checked now against the allocations as they are, and answered): true
// when it was queued (or refused), with `resp` to send; false when it runs
// now (nothing queued, or an allocation). A write's payload is read here
// either way; wire_ok false when the wire broke.
bool DeviceServer::enqueue_if_pending(int fd, const r::Request& q, r::Response& resp, bool& wire_ok) {
    if (q.op != r::kWrite && q.op != r::kSet && q.op != r::kCopy && q.op != r::kFree) return false;
    {
        std::lock_guard lk(m_);
        if (pending_.empty() || launch_failed_) return false;
    }
    Pending p{q.op, q.value, q.addr, q.from, q.bytes, {}};
    const std::size_t charge = std::max<std::size_t>(q.op == r::kWrite ? q.bytes : 0, kPendingEntryBytes);
    const bool fits = pending_bytes_ + charge <= kMaxPendingBytes;
    if (q.op == r::kWrite) {
        if (fits) p.payload.resize(q.bytes);
        std::vector<unsigned char> sink(fits ? 0 : std::min<std::size_t>(q.bytes, kChunk));
        for (std::size_t done = 0; done < q.bytes;) {
            const std::size_t n = std::min<std::size_t>(q.bytes - done, kChunk);
            if (!r::recv_all(fd, fits ? p.payload.data() + done : sink.data(), n)) return wire_ok = false, true;
            done += n;
        }
    }
    if (!fits) return resp.status = kMemoryAllocation, true;
    pending_bytes_ += charge;
    std::lock_guard lk(m_);
    resp.status = apply(p, /*check_only=*/true);
    if (resp.status == 0) pending_.push_back(std::move(p));
    return true;
}

// A free, set, copy or write (its payload in p) on the allocations as they
// are now (m_ held): its status, and with check_only nothing done.
std::int32_t DeviceServer::apply(const Pending& p, bool check_only) {
    if (p.op == r::kFree) {
        auto it = mem_.find(p.addr);
        if (it == mem_.end()) return kInvalidDevicePointer;
        if (!check_only) drop(it);
        return 0;
    }
    unsigned char* at = span(p.addr, p.bytes);
    const unsigned char* from = p.op == r::kCopy ? span(p.from, p.bytes) : nullptr;
    if (!at || (p.op == r::kCopy && !from)) return kInvalidValue;
    if (check_only || p.bytes == 0) return 0;
    if (p.op == r::kCopy) std::memmove(at, from, p.bytes);
    else if (p.op == r::kWrite) std::memcpy(at, p.payload.data(), p.bytes);
    else std::memset(at, static_cast<int>(p.value & 0xFF), p.bytes);
    return 0;
}

// The queue, in order (flush_m_ held). A launch that fails fails every one
// after it, as on a GPU; the memory requests after it still apply if they
// still fit (an allocation may have been freed meanwhile by the host itself).
void DeviceServer::run_pending() {
    for (;;) {
        Pending p;
        {
            std::lock_guard lk(m_);
            if (pending_.empty() || cut_) {  // cut: the call's time is up, the rest is not done
                pending_.clear();
                pending_bytes_ = 0;
                return;
            }
            p = std::move(pending_.front());
            pending_.pop_front();
        }
        if (p.op == r::kLaunch) {
            if (!launch_failed_) launch(p.payload);
            continue;
        }
        std::lock_guard lk(m_);
        apply(p);
    }
}

bool DeviceServer::finish(double seconds) {
    seconds = std::max(seconds, 0.0);
    bool cut = false;
    struct Afresh {  // however this ends, the queue is empty and the next call starts uncut
        std::atomic<bool>& cut;
        ~Afresh() { cut = false; }
    } afresh{cut_};
    const auto cut_wires = [&] {
        cut = true;
        cut_ = true;  // run_pending stops at the next request (thousands of queued 768 MiB memsets ran on for
                      // 7 minutes past a 300 s limit, in the grader's own thread: red-team batch 12)
        if (server_fd_ >= 0) shutdown(server_fd_, SHUT_RDWR);      // a request the host left half sent
        if (executor_fd_ >= 0) shutdown(executor_fd_, SHUT_RDWR);  // a kernel that does not end
    };
    // The serving thread holds the queue's lock through a request: one the
    // host (frozen, or hostile) never finishes sending must not hold the
    // grader too (a write sent a byte short hung it: red-team batch 9).
    std::unique_lock queue(flush_m_, std::defer_lock);
    if (!queue.try_lock_for(std::chrono::duration<double>(seconds + 1.0))) {
        cut_wires();
        queue.lock();
    }
    {
        std::lock_guard lk(m_);
        if (pending_.empty()) return !cut;  // the grader's own accesses, most calls: no watchdog to start
    }
    std::mutex m;
    std::condition_variable cv;
    bool done = false;
    std::thread watchdog([&] {
        std::unique_lock lk(m);
        if (!cv.wait_for(lk, std::chrono::duration<double>(seconds), [&] { return done; })) cut_wires();
    });
    run_pending();
    {
        std::lock_guard lk(m);
        done = true;
    }
    cv.notify_all();
    watchdog.join();
    return !cut;
}

// One request of the submission's process; false when the wire is closed or
// broken (the worker died or was stopped). Every address and length is
// checked against the allocations: nothing else of the grader is reachable.
bool DeviceServer::handle(int fd) {
    r::Request q;
    if (!r::recv_all(fd, &q, sizeof q)) return false;
    r::Response resp;
    if (q.bytes > limit_ && (q.op == r::kWrite || q.op == r::kRead)) return false;  // no allocation is that large
    if (q.op == r::kLaunch) {  // answered now, run when the call returns
        if (q.bytes < sizeof(r::LaunchHeader) || q.bytes > r::kMaxLaunchBytes) return false;
        Pending launch{r::kLaunch, 0, 0, 0, q.bytes, std::vector<unsigned char>(q.bytes)};
        if (!r::recv_all(fd, launch.payload.data(), launch.payload.size())) return false;
        bool too_many = false;
        {
            std::lock_guard lk(m_);
            too_many = ++traffic_.launches > kMaxLaunchesPerCall;
            if (launch_failed_) resp.status = r::kLaunchFailure;
            else if (!too_many) pending_.push_back(std::move(launch));
        }
        if (too_many && !launch_failed_)
            resp.status = fail_launch("cuda-emu: more than " + std::to_string(kMaxLaunchesPerCall) +
                                      " kernel launches in one call (an exercise needs a few)");
        return r::send_all(fd, &resp, sizeof resp);
    }
    // Everything else keeps its place after the launches before it.
    std::lock_guard<std::timed_mutex> order(flush_m_);
    if (q.op == r::kCopy) {
        std::lock_guard lk(m_);
        ++traffic_.device_copies;
    }
    if (q.op == r::kRead) run_pending();  // the call has forfeited its points; the answer is the truth
    bool wire_ok = true;
    if (enqueue_if_pending(fd, q, resp, wire_ok)) return wire_ok && r::send_all(fd, &resp, sizeof resp);
    if (launch_failed_) {  // every request after a failed launch fails, as on a GPU (payloads still read)
        if (q.op == r::kWrite) {
            std::int32_t ignored = r::kLaunchFailure;
            if (!receive_write(fd, q, ignored)) return false;
        }
        resp.status = r::kLaunchFailure;
        return r::send_all(fd, &resp, sizeof resp);
    }
    if (q.op == r::kWrite) {
        if (!receive_write(fd, q, resp.status)) return false;
        return r::send_all(fd, &resp, sizeof resp);
    }
    if (q.op == r::kRead) {
        {
            std::lock_guard lk(m_);
            ++traffic_.host_reads;  // any read, of any size, even of nothing: it ran the queue
            traffic_.host_read_bytes += q.bytes;
        }
        // Answered a chunk at a time, each copied out under the lock; an
        // allocation freed meanwhile can only be the reader's own doing.
        {
            std::lock_guard lk(m_);
            if (!span(q.addr, q.bytes)) resp.status = kInvalidValue;
        }
        if (!r::send_all(fd, &resp, sizeof resp) || resp.status != 0) return resp.status != 0;
        std::vector<unsigned char> chunk(std::min<std::size_t>(q.bytes, kChunk));
        for (std::size_t done = 0; done < q.bytes;) {
            const std::size_t n = std::min<std::size_t>(q.bytes - done, kChunk);
            {
                std::lock_guard lk(m_);
                const unsigned char* p = span(q.addr + done, n);
                if (p) std::memcpy(chunk.data(), p, n);
                else std::memset(chunk.data(), 0, n);
            }
            if (!r::send_all(fd, chunk.data(), n)) return false;
            done += n;
        }
        return true;
    }
    switch (q.op) {
        case r::kAlloc:
            resp.addr = q.bytes <= limit_ ? alloc(q.bytes) : 0;
            resp.status = resp.addr ? 0 : kMemoryAllocation;
            break;
        case r::kFree:
        case r::kSet:
        case r::kCopy: {
            std::lock_guard lk(m_);
            resp.status = apply(Pending{q.op, q.value, q.addr, q.from, q.bytes, {}});
            break;
        }
        default:
            resp.status = kInvalidValue;
    }
    return r::send_all(fd, &resp, sizeof resp);
}

}  // namespace mw::grade
