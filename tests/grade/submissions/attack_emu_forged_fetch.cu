// Attack on cuda-emu's grading of a CUDA exercise: host reads of device
// memory passed off as a launch's fetch. When a launch's own process fetched
// every allocation through the device socket (a list request, then a read of
// each in order), the grader did not count those reads as the host's. The
// submission wrote the requests on the socket itself: a list, then reads of
// A and B in the order a fetch makes them, multiplied on the host and copied
// C back, with one empty kernel launched. It scored 60/60. Now no launch
// reads through the host's socket (the executor gets device memory from the
// grader), the list request is gone, and every read on it is the host's.
#include <sys/socket.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "harness/cuda/launch.hpp"

namespace {

__global__ void nothing() {}

// The wire, as the grader's source has it (harness/emu/remote_device.hpp).
struct Request {
    std::uint32_t op = 0, value = 0;
    std::uint64_t addr = 0, from = 0, bytes = 0;
};
struct Response {
    std::int32_t status = 0;
    std::uint32_t pad = 0;
    std::uint64_t addr = 0, bytes = 0;
};
struct Extent {
    std::uint64_t addr = 0, bytes = 0;
};

bool exchange(int fd, const Request& q, void* in, std::size_t in_bytes, Response& r) {
    if (send(fd, &q, sizeof q, 0) != sizeof q || recv(fd, &r, sizeof r, MSG_WAITALL) != sizeof r) return false;
    return r.status != 0 || !in_bytes || recv(fd, in, in_bytes, MSG_WAITALL) == static_cast<ssize_t>(in_bytes);
}

}  // namespace

void student_gemm_cuda(const float* dA, const float* dB, float* dC, int M, int N, int K, cudaStream_t stream) {
    mw::launch(nothing, dim3(1), dim3(1), 0, stream);
    const char* e = std::getenv("MEMWALL_EMU_DEVICE_FD");
    const int fd = e ? std::atoi(e) : -1;
    std::vector<float> A(std::size_t(M) * K), B(std::size_t(K) * N), C(std::size_t(M) * N);
    Request list;
    list.op = 7;  // kList
    Response r;
    if (fd < 0 || !exchange(fd, list, nullptr, 0, r)) return;
    std::vector<Extent> all(r.status == 0 ? r.bytes : 0);
    if (!all.empty() && recv(fd, all.data(), all.size() * sizeof(Extent), MSG_WAITALL) < 0) return;
    if (all.empty()) {  // no list: read A and B anyway
        all.push_back({reinterpret_cast<std::uintptr_t>(dA), A.size() * 4});
        all.push_back({reinterpret_cast<std::uintptr_t>(dB), B.size() * 4});
    }
    for (auto& x : all) {  // read every allocation, as a fetch does, keeping A and B
        std::vector<unsigned char> bytes(x.bytes);
        Request rd;
        rd.op = 4, rd.addr = x.addr, rd.bytes = x.bytes;  // kRead
        if (!exchange(fd, rd, bytes.data(), bytes.size(), r)) return;
        if (x.addr == reinterpret_cast<std::uintptr_t>(dA)) std::memcpy(A.data(), bytes.data(), A.size() * 4);
        if (x.addr == reinterpret_cast<std::uintptr_t>(dB)) std::memcpy(B.data(), bytes.data(), B.size() * 4);
    }
    for (int i = 0; i < M; ++i)
        for (int j = 0; j < N; ++j) {
            float acc = 0.0f;
            for (int k = 0; k < K; ++k) acc += A[std::size_t(i) * K + k] * B[std::size_t(k) * N + j];
            C[std::size_t(i) * N + j] = acc;
        }
    cudaMemcpy(dC, C.data(), C.size() * sizeof(float), cudaMemcpyHostToDevice);
}
