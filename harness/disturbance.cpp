#include "harness/disturbance.hpp"

#include <sched.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>

namespace mw {

namespace {

double own_cpu_seconds() {
    timespec ts{};
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return double(ts.tv_sec) + double(ts.tv_nsec) * 1e-9;
}

std::vector<int> allowed_cores() {
    cpu_set_t set;
    std::vector<int> cores;
    if (sched_getaffinity(0, sizeof set, &set) != 0) return cores;
    for (int c = 0; c < CPU_SETSIZE; ++c)
        if (CPU_ISSET(c, &set)) cores.push_back(c);
    return cores;
}

std::string percent(double share) {
    char s[32];
    std::snprintf(s, sizeof s, "%.0f%%", share * 100);
    return s;
}

}  // namespace

DisturbanceWindow::DisturbanceWindow(bool others_measurable)
    : cores_(allowed_cores()), others_measurable_(others_measurable), threads_({getpid()}) {
    threads_before_ = threads_.take();
    ticks_before_ = read_ticks();
    own_cpu_before_ = own_cpu_seconds();
    t0_ = std::chrono::steady_clock::now();
}

// The busy and steal ticks of this process's cores, from /proc/stat's
// per-CPU lines: user nice system idle iowait irq softirq steal (guest time
// is inside user).
DisturbanceWindow::CpuTicks DisturbanceWindow::read_ticks() const {
    CpuTicks t;
    std::ifstream in("/proc/stat");
    std::string line;
    while (std::getline(in, line)) {
        if (line.rfind("cpu", 0) != 0 || line.size() < 4 || line[3] < '0' || line[3] > '9') continue;
        std::istringstream f(line.substr(3));
        int cpu = -1;
        unsigned long long user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0;
        if (!(f >> cpu >> user >> nice >> system >> idle >> iowait >> irq >> softirq)) continue;
        f >> steal;
        if (std::find(cores_.begin(), cores_.end(), cpu) == cores_.end()) continue;
        t.busy += user + nice + system + irq + softirq;
        t.steal += steal;
    }
    return t;
}

Disturbance DisturbanceWindow::close() const {
    Disturbance d;
    d.window_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
    const double own = own_cpu_seconds() - own_cpu_before_;
    const CpuTicks ticks = read_ticks();
    const auto after = threads_.take();
    d.measured = true;
    d.cores = static_cast<int>(cores_.size());
    const double hz = double(sysconf(_SC_CLK_TCK) > 0 ? sysconf(_SC_CLK_TCK) : 100);
    const double core_s = d.window_s * std::max(1, d.cores);
    if (d.window_s >= kMinOthersWindowS && !cores_.empty()) {
        d.steal_share = double(ticks.steal - ticks_before_.steal) / hz / core_s;
        if (others_measurable_)
            d.others_share = std::max(0.0, double(ticks.busy - ticks_before_.busy) / hz - own) / core_s;
    }
    const double ran = RunQueueWait::working_ran(threads_before_, after, d.window_s);
    d.run_queue_share = ran > 0 ? RunQueueWait::working_wait(threads_before_, after, d.window_s) / ran : 0;
    return d;
}

std::string Disturbance::why() const {
    std::string s;
    auto add = [&](const std::string& part) { s += (s.empty() ? "" : "; ") + part; };
    if (others_share > kDisturbedShare)
        add("other processes used " + percent(others_share) + " of its " + std::to_string(cores) + " core" +
            (cores == 1 ? "" : "s"));
    if (steal_share > kDisturbedShare) add("the hypervisor took " + percent(steal_share) + " of them (steal)");
    if (run_queue_share > kDisturbedShare)
        add("its threads waited for a core " + percent(run_queue_share) + " as long as they ran");
    return s;
}

nlohmann::json Disturbance::to_json() const {
    nlohmann::json j = {{"disturbed", disturbed()}, {"window_s", window_s}, {"cores", cores},
                        {"run_queue_share", run_queue_share}};
    j["others_share"] = others_share >= 0 ? nlohmann::json(others_share) : nlohmann::json();
    j["steal_share"] = steal_share >= 0 ? nlohmann::json(steal_share) : nlohmann::json();
    if (disturbed()) j["why"] = why();
    return j;
}

Disturbance worse(const Disturbance& a, const Disturbance& b) {
    if (!a.measured) return b;
    if (!b.measured) return a;
    Disturbance d = a;
    d.window_s = a.window_s + b.window_s;
    d.others_share = std::max(a.others_share, b.others_share);
    d.steal_share = std::max(a.steal_share, b.steal_share);
    d.run_queue_share = std::max(a.run_queue_share, b.run_queue_share);
    d.cores = std::max(a.cores, b.cores);
    return d;
}

}  // namespace mw
