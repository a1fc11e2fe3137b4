#include "harness/command.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <sstream>
#include <thread>

#include "harness/results.hpp"

namespace mw {

namespace {
std::vector<Command>& registered() {
    static std::vector<Command> v;
    return v;
}
struct Invocation {
    int argc = 0;
    char** argv = nullptr;
} invocation;
}  // namespace

int hardware_threads() { return static_cast<int>(std::max(1u, std::thread::hardware_concurrency())); }

void check_threads(const char* flag, int threads) {
    const int hw = hardware_threads();
    if (threads < 1 || threads > 4 * hw)
        throw UsageError(std::string(flag) + " " + std::to_string(threads) + " is out of range; valid: 1.." +
                         std::to_string(4 * hw) + " (this machine has " + std::to_string(hw) + ")");
}

namespace {
std::string number(double v) {
    std::ostringstream s;
    s << v;
    return s.str();
}
}  // namespace

void check_range(const char* flag, double value, double lo, double hi) {
    if (!std::isfinite(value) || value < lo || value > hi)
        throw UsageError(std::string(flag) + " " + number(value) + " is out of range; valid: a finite number in " +
                         number(lo) + ".." + number(hi));
}

void check_range(const char* flag, long long value, long long lo, long long hi) {
    if (value < lo || value > hi)
        throw UsageError(std::string(flag) + " " + std::to_string(value) + " is out of range; valid: " +
                         std::to_string(lo) + ".." + std::to_string(hi));
}

void check_output_path(const std::string& path, const char* what, const char* extension) {
    if (path.empty()) return;
    const std::filesystem::path p(path);
    if (std::filesystem::is_directory(p))
        throw UsageError(std::string(what) + " '" + path + "' is a directory; give a file name");
    if (p.extension() != extension)
        throw UsageError(std::string(what) + " '" + path + "' must end in " + extension);
}

void check_input_file(const std::string& path, const char* what) {
    std::error_code ec;
    if (!std::filesystem::is_regular_file(path, ec))
        throw UsageError(std::string(what) + " '" + path + "': " +
                         (std::filesystem::exists(path, ec) ? "not a file" : "no such file"));
}

void set_invocation(int argc, char** argv) { invocation = {argc, argv}; }
std::string invocation_for_record() { return command_for_record(invocation.argc, invocation.argv); }

void register_command(std::string name, int order, CommandSetup setup) {
    registered().push_back({std::move(name), order, std::move(setup)});
}

std::vector<Command> commands() {
    std::vector<Command> v = registered();
    std::stable_sort(v.begin(), v.end(), [](const Command& a, const Command& b) {
        return a.order != b.order ? a.order < b.order : a.name < b.name;
    });
    return v;
}

}  // namespace mw
