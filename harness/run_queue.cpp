#include "harness/run_queue.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

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

// What each thread that ran between the snapshots did over them.
std::vector<RunQueueWait::Task> deltas(const RunQueueWait::Snapshot& before, const RunQueueWait::Snapshot& after) {
    std::vector<RunQueueWait::Task> d;
    for (const auto& [tid, a] : after) {
        const auto b = before.find(tid);
        RunQueueWait::Task from = b == before.end() ? RunQueueWait::Task{} : b->second;
        // A thread id reused by a new thread between the snapshots: its
        // counters start again from zero.
        if (a.ran_s < from.ran_s || a.waited_s < from.waited_s) from = {};
        d.push_back({a.ran_s - from.ran_s, a.waited_s - from.waited_s});
    }
    return d;
}

// The working threads' deltas (run_queue.hpp says which threads work).
std::vector<RunQueueWait::Task> working(const RunQueueWait::Snapshot& before, const RunQueueWait::Snapshot& after) {
    std::vector<RunQueueWait::Task> d = deltas(before, after);
    double top = 0;
    for (const auto& t : d) top = std::max(top, t.ran_s);
    const double bar = std::max(0.1 * top, 100e-6);
    std::erase_if(d, [bar](const RunQueueWait::Task& t) { return t.ran_s < bar; });
    return d;
}

}  // namespace

double RunQueueWait::working_wait(const Snapshot& before, const Snapshot& after) {
    double sum = 0;
    for (const auto& t : working(before, after)) sum += t.waited_s;
    return sum;
}

double RunQueueWait::working_ran(const Snapshot& before, const Snapshot& after) {
    double sum = 0;
    for (const auto& t : working(before, after)) sum += t.ran_s;
    return sum;
}

int RunQueueWait::working_threads(const Snapshot& before, const Snapshot& after) {
    return static_cast<int>(working(before, after).size());
}

}  // namespace mw
