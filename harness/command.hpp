// How a `memwall` subcommand registers itself, and the error every command
// throws for bad input. The engine keeps the list; commands/cli.cpp only
// dispatches. Exit status: 0 ok, 1 a check failed (or a run failed), 2 a
// usage error (the message names the bad value and the valid choices).
//
// A subcommand lives in its own file (commands/, model/, or a lever's folder
// for a lever's own tool) and registers itself:
//
//   MW_REGISTER_COMMAND(grade, [](CLI::App& app) -> mw::CommandAction {
//       auto* sub = app.add_subcommand("grade", "...");
//       auto opts = std::make_shared<GradeOptions>();
//       sub->add_option("level", opts->level)->required();
//       return [opts] { return run_grade(*opts); };   // runs when chosen
//   });
//
// An action throws mw::UsageError for bad input.
#pragma once

#include <functional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace CLI {
class App;
}

namespace mw {

// A bad request: the message names the bad value and the valid choices.
// The CLI turns it into exit status 2 with no output file.
struct UsageError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

using CommandAction = std::function<int()>;
using CommandSetup = std::function<CommandAction(CLI::App&)>;

struct Command {
    std::string name;
    int order;  // position in `memwall --help` (lower first), then by name
    CommandSetup setup;
};

void register_command(std::string name, int order, CommandSetup setup);
// Every registered command, in help order.
std::vector<Command> commands();

// Checks of option values every command shares; each throws UsageError
// naming the flag, the bad value and what is valid, before any work starts.
int hardware_threads();  // this machine's (at least 1)
// A --threads value: 1 .. 4x this machine's hardware threads.
void check_threads(const char* flag, int threads);
// A number that must be finite and within [lo, hi].
void check_range(const char* flag, double value, double lo, double hi);
void check_range(const char* flag, long long value, long long lo, long long hi);
// Output paths must be writable before any work starts, so a bad path fails
// fast and no time is wasted: not a folder, and ending in `extension`.
void check_output_path(const std::string& path, const char* what, const char* extension = ".json");
// An input file that must exist (and be a file).
void check_input_file(const std::string& path, const char* what);

// The command line as typed, kept by the CLI for the commands that record it
// in their results (paths in the source tree made relative, as command_for_record).
void set_invocation(int argc, char** argv);
std::string invocation_for_record();

namespace detail {
struct CommandRegistrar {
    CommandRegistrar(std::string name, int order, CommandSetup setup) {
        register_command(std::move(name), order, std::move(setup));
    }
};
}  // namespace detail

}  // namespace mw

// The core commands (run, list, ...) come first in the help; the rest after
// them by name.
#ifdef MW_NO_REGISTRATION  // the grader's worker library (harness/registry.hpp)
#define MW_REGISTER_COMMAND_AT(id, name, order, ...) static_assert(true, "registration is off")
#else
#define MW_REGISTER_COMMAND_AT(id, name, order, ...) \
    static const ::mw::detail::CommandRegistrar mw_command_registrar_##id(name, order, __VA_ARGS__)
#endif
#define MW_REGISTER_COMMAND(id, ...) MW_REGISTER_COMMAND_AT(id, #id, 100, __VA_ARGS__)
// For subcommand names that are not identifiers ("quant-error").
#define MW_REGISTER_COMMAND_NAMED(id, name, ...) MW_REGISTER_COMMAND_AT(id, name, 100, __VA_ARGS__)
