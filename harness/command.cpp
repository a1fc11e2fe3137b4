#include "harness/command.hpp"

#include <algorithm>

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
