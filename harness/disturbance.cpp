#include "harness/disturbance.hpp"

#include <omp.h>
#include <sched.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <thread>

namespace mw {

namespace {

double own_cpu_seconds() {
    timespec ts{};
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return double(ts.tv_sec) + double(ts.tv_nsec) * 1e-9;
}

// The cores any thread of this process may run on: the union of every
// thread's mask (OMP_PROC_BIND can bind the main thread to one place).
std::vector<int> allowed_cores() {
    cpu_set_t all;
    CPU_ZERO(&all);
    for (const auto& [tid, task] : RunQueueWait({getpid()}).take()) {
        cpu_set_t one;
        if (sched_getaffinity(tid, sizeof one, &one) == 0) CPU_OR(&all, &all, &one);
    }
    if (CPU_COUNT(&all) == 0) sched_getaffinity(0, sizeof all, &all);
    std::vector<int> cores;
    for (int c = 0; c < CPU_SETSIZE; ++c)
        if (CPU_ISSET(c, &all)) cores.push_back(c);
    return cores;
}

std::string percent(double share) {
    char s[32];
    std::snprintf(s, sizeof s, "%.0f%%", share * 100);
    return s;
}

}  // namespace

CoreLoad::CoreLoad() : cores_(allowed_cores()) { restart(); }

void CoreLoad::restart() {
    ticks_before_ = read_ticks();
    own_cpu_before_ = own_cpu_seconds();
    t0_ = std::chrono::steady_clock::now();
}

double CoreLoad::elapsed_s() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
}

// The busy and steal ticks of this process's cores, from /proc/stat's
// per-CPU lines: user nice system idle iowait irq softirq steal (guest time
// is inside user).
std::map<int, CoreLoad::CpuTicks> CoreLoad::read_ticks() const {
    std::map<int, CpuTicks> t;
    std::ifstream in("/proc/stat");
    std::string line;
    while (std::getline(in, line)) {
        if (line.rfind("cpu", 0) != 0 || line.size() < 4 || line[3] < '0' || line[3] > '9') continue;
        std::istringstream f(line.substr(3));
        int cpu = -1;
        long long user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0;
        if (!(f >> cpu >> user >> nice >> system >> idle >> iowait >> irq >> softirq)) continue;
        f >> steal;
        if (std::find(cores_.begin(), cores_.end(), cpu) == cores_.end()) continue;
        t[cpu] = {user + nice + system + irq + softirq, steal};
    }
    return t;
}

CoreLoad::Shares CoreLoad::shares(double min_window_s, bool others_measurable) const {
    Shares s;
    const double window_s = elapsed_s();
    const double own = own_cpu_seconds() - own_cpu_before_;
    const auto ticks = read_ticks();
    if (window_s < min_window_s || ticks.empty()) return s;
    const double hz = double(sysconf(_SC_CLK_TCK) > 0 ? sysconf(_SC_CLK_TCK) : 100);
    // Per CPU, over the CPUs in both reads (one taken offline drops out),
    // each delta within [0, the window]: a counter that went back (a
    // migrated guest's steal) or jumped counts as nothing or all.
    const double most = window_s * hz;
    double busy = 0, steal = 0;
    int cpus = 0;
    for (const auto& [cpu, a] : ticks) {
        const auto b = ticks_before_.find(cpu);
        if (b == ticks_before_.end()) continue;
        busy += std::clamp(double(a.busy - b->second.busy), 0.0, most);
        steal += std::clamp(double(a.steal - b->second.steal), 0.0, most);
        ++cpus;
    }
    if (cpus == 0) return s;
    const double core_s = window_s * cpus;
    s.steal = std::min(1.0, steal / hz / core_s);
    if (others_measurable) s.others = std::clamp((busy / hz - own) / core_s, 0.0, 1.0);
    return s;
}

// load_ is made after the thread scan (members in declaration order): the
// window starts when the scan is done.
DisturbanceWindow::DisturbanceWindow(bool others_measurable)
    : others_measurable_(others_measurable), threads_({getpid()}), threads_before_(threads_.take()) {}

Disturbance DisturbanceWindow::close() const {
    Disturbance d;
    d.window_s = load_.elapsed_s();
    const CoreLoad::Shares s = load_.shares(kMinOthersWindowS, others_measurable_);
    const auto after = threads_.take();
    d.measured = true;
    d.cores = load_.cores();
    d.others_share = s.others;
    d.steal_share = s.steal;
    const double ran = RunQueueWait::working_ran(threads_before_, after);
    d.run_queue_share = ran > 0 ? RunQueueWait::working_wait(threads_before_, after) / ran : 0;
    d.working_threads = RunQueueWait::working_threads(threads_before_, after);
    return d;
}

std::string Disturbance::why() const {
    std::string s;
    auto add = [&](const std::string& part) { s += (s.empty() ? "" : "; ") + part; };
    if (others_share > kDisturbedShare)
        add("other processes used " + percent(others_share) + " of its " + std::to_string(cores) + " core" +
            (cores == 1 ? "" : "s"));
    if (steal_share > kDisturbedShare) add("the hypervisor took " + percent(steal_share) + " of them (steal)");
    if (!s.empty() && run_queue_share > kDisturbedShare)
        add("its threads waited for a core " + percent(run_queue_share) + " as long as they ran");
    return s;
}

nlohmann::json Disturbance::to_json() const {
    nlohmann::json j = {{"disturbed", disturbed()}, {"window_s", window_s}, {"cores", cores},
                        {"run_queue_share", run_queue_share}, {"working_threads", working_threads}};
    j["others_share"] = others_share >= 0 ? nlohmann::json(others_share) : nlohmann::json();
    j["steal_share"] = steal_share >= 0 ? nlohmann::json(steal_share) : nlohmann::json();
    if (disturbed()) j["why"] = why();
    return j;
}

QuietWait wait_for_quiet(double max_s) {
    return wait_for_quiet(max_s, [] {
        DisturbanceWindow window;
        std::this_thread::sleep_for(std::chrono::duration<double>(kQuietProbeS));
        return window.close();
    });
}

QuietWait wait_for_quiet(double max_s, const std::function<Disturbance()>& probe) {
    QuietWait q;
    q.asked_s = max_s;
    if (max_s <= 0) return q;
    const auto t0 = std::chrono::steady_clock::now();
    for (;;) {
        q.last = probe();
        ++q.probes;
        q.waited_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        q.quiet = !q.last.disturbed();
        if (q.quiet || q.waited_s >= max_s) return q;
    }
}

QuietWait merge(const QuietWait& a, const QuietWait& b) {
    if (!a.asked()) return b;
    if (!b.asked()) return a;
    QuietWait q = a.quiet ? b : a;  // the last of a wait that failed says why
    q.asked_s = std::max(a.asked_s, b.asked_s);
    q.waited_s = a.waited_s + b.waited_s;
    q.probes = a.probes + b.probes;
    q.quiet = a.quiet && b.quiet;
    return q;
}

int FreeCores::threads(int want) {
    if (load_.elapsed_s() >= kFreeCoresWindowS) {
        const CoreLoad::Shares s = load_.shares(kFreeCoresWindowS);
        if (s.others >= 0) {
            const double busy = (s.others + std::max(0.0, s.steal)) * load_.cores();
            busy_cores_ = std::max(busy_cores_, busy);
            // A core counts as taken once 0.4 of one is busy: a barrier
            // stall costs far more than the thread given up.
            taken_ = std::max(0, int(std::floor(busy + 0.6)));
        }
        load_.restart();
    }
    ++calls_;
    // Asking for more threads than the cores is the caller's choice: only
    // the cores others took come off, and only from what they left.
    const int threads = std::min(want, std::max(1, load_.cores() - taken_));
    if (taken_ == 0 || threads >= want) return want;
    ++reduced_;
    return threads;
}

FreeThreadsScope::FreeThreadsScope(FreeCores& free) : saved_(omp_get_max_threads()) {
    omp_set_num_threads(free.threads(saved_));
}
FreeThreadsScope::~FreeThreadsScope() { omp_set_num_threads(saved_); }

nlohmann::json QuietWait::to_json() const {
    nlohmann::json j = {{"asked_s", asked_s}, {"waited_s", waited_s}, {"probes", probes}, {"quiet", quiet}};
    if (!quiet) j["why"] = last.why();
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
    d.working_threads = std::max(a.working_threads, b.working_threads);
    d.cores = std::max(a.cores, b.cores);
    return d;
}

}  // namespace mw
