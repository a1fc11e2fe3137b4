#include "kernels/moe/expert_parallel.hpp"

#ifdef MEMWALL_HAVE_MPI
#include <algorithm>
#include <cstdlib>

namespace mw::moe::ep {

const World& world() {
    static const World w = [] {
        int started = 0;
        MPI_Initialized(&started);
        if (!started) {
            int provided = 0;
            MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided);
            std::atexit([] {
                int done = 0;
                MPI_Finalized(&done);
                if (!done) MPI_Finalize();
            });
        }
        World r;
        MPI_Comm_rank(MPI_COMM_WORLD, &r.rank);
        MPI_Comm_size(MPI_COMM_WORLD, &r.size);
        return r;
    }();
    return w;
}

// 8 bytes for alpha, 4 MiB for beta, best of many round trips each.
std::pair<double, double> measure_alpha_beta() {
    const World& w = world();
    auto pingpong = [&](std::size_t bytes, int reps) {
        std::vector<char> buf(bytes);
        MPI_Barrier(MPI_COMM_WORLD);
        double best = 1e30;
        for (int i = 0; i < reps; ++i) {
            const auto t0 = Clock::now();
            if (w.rank == 0) {
                MPI_Send(buf.data(), int(bytes), MPI_CHAR, 1, 0, MPI_COMM_WORLD);
                MPI_Recv(buf.data(), int(bytes), MPI_CHAR, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            } else if (w.rank == 1) {
                MPI_Recv(buf.data(), int(bytes), MPI_CHAR, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                MPI_Send(buf.data(), int(bytes), MPI_CHAR, 0, 0, MPI_COMM_WORLD);
            }
            best = std::min(best, since(t0) / 2);
        }
        return best;
    };
    const double small = pingpong(8, 200), big = pingpong(std::size_t(4) << 20, 20);
    double ab[2] = {small, double(std::size_t(4) << 20) / std::max(1e-12, big - small)};
    MPI_Bcast(ab, 2, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    return {ab[0], ab[1]};
}

void allgather_tokens(float* y, long d, const Split& s) {
    std::vector<int> yc(static_cast<std::size_t>(s.P)), yd(static_cast<std::size_t>(s.P));
    for (int q = 0; q < s.P; ++q)
        yc[std::size_t(q)] = int((s.first_token(q + 1) - s.first_token(q)) * d), yd[std::size_t(q)] = int(s.first_token(q) * d);
    MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_FLOAT, y, yc.data(), yd.data(), MPI_FLOAT, MPI_COMM_WORLD);
}

double offrank_rows(const std::vector<std::int64_t>& counts, const Split& s, int groups) {
    double off = 0;
    const std::size_t per_rank = std::size_t(groups) * std::size_t(s.E);
    for (int q = 0; q < s.P; ++q)
        for (std::size_t i = 0; i < per_rank; ++i) {
            const int e = int(i % std::size_t(s.E));
            if (e < s.first_expert(q) || e >= s.first_expert(q + 1)) off += double(counts[std::size_t(q) * per_rank + i]);
        }
    return off;
}

}  // namespace mw::moe::ep
#endif  // MEMWALL_HAVE_MPI
