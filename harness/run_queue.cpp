#include "harness/run_queue.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>

namespace fs = std::filesystem;

namespace mw {

RunQueueWait::Snapshot RunQueueWait::take() const {
    Snapshot s;
    for (pid_t p : pids_) {
        if (p <= 0) continue;
        // A process that ends while it is listed ends the listing, never the caller.
        std::error_code ec;
        fs::directory_iterator it("/proc/" + std::to_string(p) + "/task", ec), end;
        for (; !ec && it != end; it.increment(ec)) {
            const std::string name = it->path().filename().string();
            if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
            std::ifstream in(it->path() / "schedstat");
            unsigned long long ran = 0, waited = 0;
            if (in >> ran >> waited) s[static_cast<pid_t>(std::stol(name))] = {double(ran) * 1e-9, double(waited) * 1e-9};
        }
    }
    return s;
}

namespace {

// Sums, over the threads that worked between the snapshots, of what `part` picks.
template <class Part>
double over_working(const RunQueueWait::Snapshot& before, const RunQueueWait::Snapshot& after, double call_s,
                    Part part) {
    double sum = 0;
    for (const auto& [tid, a] : after) {
        const auto b = before.find(tid);
        const RunQueueWait::Task from = b == before.end() ? RunQueueWait::Task{} : b->second;
        if (a.ran_s - from.ran_s < std::max(0.1 * call_s, 100e-6)) continue;
        sum += part(a, from);
    }
    return sum;
}

}  // namespace

double RunQueueWait::working_wait(const Snapshot& before, const Snapshot& after, double call_s) {
    return over_working(before, after, call_s, [](const Task& a, const Task& b) { return a.waited_s - b.waited_s; });
}

double RunQueueWait::working_ran(const Snapshot& before, const Snapshot& after, double call_s) {
    return over_working(before, after, call_s, [](const Task& a, const Task& b) { return a.ran_s - b.ran_s; });
}

}  // namespace mw
