// The `memwall` command line. Exit status: 0 ok, 1 a check failed (or a run
// failed), 2 a usage error (the message names the bad value and the choices).
//
// Subcommands beyond the core ones (list, run, calibrate, plot, report,
// compare) live in their own files and register themselves:
//
//   MW_REGISTER_COMMAND(grade, [](CLI::App& app) -> mw::CommandAction {
//       auto* sub = app.add_subcommand("grade", "...");
//       auto opts = std::make_shared<GradeOptions>();
//       sub->add_option("level", opts->level)->required();
//       return [opts] { return run_grade(*opts); };   // runs when chosen
//   });
//
// An action throws mw::UsageError (harness/runner.hpp) for bad input.
#pragma once

#include <functional>
#include <string>

namespace CLI {
class App;
}

namespace mw {

using CommandAction = std::function<int()>;
using CommandSetup = std::function<CommandAction(CLI::App&)>;

void register_command(std::string name, CommandSetup setup);
int cli_main(int argc, char** argv);

namespace detail {
struct CommandRegistrar {
    CommandRegistrar(std::string name, CommandSetup setup) { register_command(std::move(name), std::move(setup)); }
};
}  // namespace detail

}  // namespace mw

#define MW_REGISTER_COMMAND(id, ...) \
    static const ::mw::detail::CommandRegistrar mw_command_registrar_##id(#id, __VA_ARGS__)
// For subcommand names that are not identifiers ("quant-error").
#define MW_REGISTER_COMMAND_NAMED(id, name, ...) \
    static const ::mw::detail::CommandRegistrar mw_command_registrar_##id(name, __VA_ARGS__)
