#include "commands/grade/device_server.hpp"

#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string>

#include "harness/emu/remote_device.hpp"

namespace mw::grade {

namespace r = ::mw::emu::remote;

namespace {

// cudaError_t's values (the wire carries CUDA's numbers).
constexpr std::int32_t kInvalidValue = 1, kMemoryAllocation = 2, kInvalidDevicePointer = 17;

}  // namespace

DeviceServer::DeviceServer(std::size_t limit_bytes) : limit_(limit_bytes), next_(r::kArenaBase) {}

DeviceServer::~DeviceServer() {
    stop_serving();
    if (client_fd_ >= 0) close(client_fd_);
}

void DeviceServer::stop_serving() {
    if (server_fd_ >= 0) shutdown(server_fd_, SHUT_RDWR);  // the thread's recv returns 0
    if (thread_.joinable()) thread_.join();
    if (server_fd_ >= 0) close(server_fd_);
    server_fd_ = -1;
}

int DeviceServer::reconnect() {
    stop_serving();
    if (client_fd_ >= 0) close(client_fd_);
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
        throw std::runtime_error(std::string("socketpair: ") + std::strerror(errno));
    {
        std::lock_guard lk(m_);
        mem_.clear();
        used_ = 0;
        next_ = r::kArenaBase;
    }
    server_fd_ = sv[0], client_fd_ = sv[1];
    thread_ = std::thread([this, fd = sv[0]] { serve(fd); });
    return client_fd_;
}

std::uint64_t DeviceServer::alloc(std::size_t bytes) {
    std::lock_guard lk(m_);
    const std::size_t used = r::used_bytes(bytes), pages = r::slot_pages_bytes(bytes);
    if (bytes > limit_ || used_ + bytes > limit_ || mem_.size() >= kMaxAllocations ||
        next_ + pages + r::kPage > r::kArenaBase + r::kArenaBytes)
        return 0;
    const std::uint64_t addr = next_ + (pages - used);
    next_ += pages + r::kPage;  // and a page no allocation uses
    mem_[addr].assign(bytes, 0);
    used_ += bytes;
    return addr;
}

void DeviceServer::free(std::uint64_t addr) {
    std::lock_guard lk(m_);
    auto it = mem_.find(addr);
    if (it == mem_.end()) return;
    used_ -= it->second.size();
    mem_.erase(it);
}

unsigned char* DeviceServer::span(std::uint64_t addr, std::size_t bytes) {
    auto it = mem_.upper_bound(addr);
    if (it == mem_.begin()) return nullptr;
    --it;
    const std::uint64_t off = addr - it->first;
    if (off > it->second.size() || bytes > it->second.size() - off) return nullptr;
    return it->second.data() + off;
}

bool DeviceServer::write(std::uint64_t addr, const void* data, std::size_t bytes) {
    std::lock_guard lk(m_);
    unsigned char* p = span(addr, bytes);
    if (p) std::memcpy(p, data, bytes);
    return p != nullptr;
}

bool DeviceServer::read(std::uint64_t addr, void* out, std::size_t bytes) const {
    std::lock_guard lk(m_);
    const unsigned char* p = const_cast<DeviceServer*>(this)->span(addr, bytes);
    if (p) std::memcpy(out, p, bytes);
    return p != nullptr;
}

bool DeviceServer::fill(std::uint64_t addr, unsigned char value, std::size_t bytes) {
    std::lock_guard lk(m_);
    unsigned char* p = span(addr, bytes);
    if (p) std::memset(p, value, bytes);
    return p != nullptr;
}

void DeviceServer::serve(int fd) {
    while (handle(fd)) {
    }
}

// One request of the submission's process; false when the wire is closed or
// broken (the worker died or was stopped). Every address and length is
// checked against the allocations: nothing else of the grader is reachable.
bool DeviceServer::handle(int fd) {
    r::Request q;
    if (!r::recv_all(fd, &q, sizeof q)) return false;
    r::Response resp;
    std::vector<unsigned char> payload;
    const bool sized = q.bytes <= limit_;
    if (q.op == r::kWrite) {
        // Only a write into one allocation is read off the wire (so what the
        // grader holds for it is bounded by the allocation); any other closes
        // the wire, as a payload that cannot be skipped leaves it broken.
        {
            std::lock_guard lk(m_);
            if (!sized || !span(q.addr, q.bytes)) return false;
        }
        payload.resize(q.bytes);
        if (!r::recv_all(fd, payload.data(), payload.size())) return false;
    }
    {
        std::unique_lock lk(m_);
        switch (q.op) {
            case r::kAlloc:
                lk.unlock();
                resp.addr = sized ? alloc(q.bytes) : 0;
                resp.status = resp.addr ? 0 : kMemoryAllocation;
                break;
            case r::kFree:
                if (mem_.count(q.addr)) {
                    lk.unlock();
                    free(q.addr);
                } else {
                    resp.status = kInvalidDevicePointer;
                }
                break;
            case r::kWrite:
                if (unsigned char* p = span(q.addr, q.bytes)) std::memcpy(p, payload.data(), q.bytes);
                else resp.status = kInvalidValue;
                break;
            case r::kRead:
                if (const unsigned char* p = sized ? span(q.addr, q.bytes) : nullptr) payload.assign(p, p + q.bytes);
                else resp.status = kInvalidValue;
                break;
            case r::kSet:
                if (unsigned char* p = span(q.addr, q.bytes)) std::memset(p, static_cast<int>(q.value & 0xFF), q.bytes);
                else resp.status = kInvalidValue;
                break;
            case r::kCopy: {
                unsigned char* to = span(q.addr, q.bytes);
                const unsigned char* from = span(q.from, q.bytes);
                if (to && from) std::memmove(to, from, q.bytes);
                else resp.status = kInvalidValue;
                break;
            }
            case r::kList:
                for (auto& [addr, bytes] : mem_) {
                    const r::Extent e{addr, bytes.size()};
                    const auto* b = reinterpret_cast<const unsigned char*>(&e);
                    payload.insert(payload.end(), b, b + sizeof e);
                }
                resp.bytes = mem_.size();
                break;
            default:
                resp.status = kInvalidValue;
        }
    }
    if (!r::send_all(fd, &resp, sizeof resp)) return false;
    const bool reply_payload = resp.status == 0 && (q.op == r::kRead || q.op == r::kList);
    return !reply_payload || r::send_all(fd, payload.data(), payload.size());
}

}  // namespace mw::grade
