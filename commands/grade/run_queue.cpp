#include "commands/grade/run_queue.hpp"

#include <filesystem>
#include <fstream>

namespace fs = std::filesystem;

namespace mw::grade {

RunQueueWait::RunQueueWait(const std::vector<pid_t>& pids) {
    std::error_code ec;
    for (pid_t p : pids) {
        if (p <= 0) continue;
        for (auto& t : fs::directory_iterator("/proc/" + std::to_string(p) + "/task", ec))
            files_.push_back((t.path() / "schedstat").string());
    }
}

RunQueueWait::Snapshot RunQueueWait::take() const {
    Snapshot s;
    s.reserve(files_.size());
    for (const auto& f : files_) {
        std::ifstream in(f);
        unsigned long long ran = 0, waited = 0;
        if (!(in >> ran >> waited)) ran = waited = 0;
        s.push_back({double(ran) * 1e-9, double(waited) * 1e-9});
    }
    return s;
}

double RunQueueWait::working_wait(const Snapshot& before, const Snapshot& after, double call_s) {
    double w = 0;
    for (std::size_t i = 0; i < before.size() && i < after.size(); ++i)
        if (after[i].ran_s - before[i].ran_s >= 0.1 * call_s) w += after[i].waited_s - before[i].waited_s;
    return w;
}

}  // namespace mw::grade
