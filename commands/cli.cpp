#include "commands/cli.hpp"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <thread>
#include <utility>
#include <vector>

#include "harness/command.hpp"

namespace mw {

int cli_main(int argc, char** argv) {
    CLI::App app{"memwall: naive vs optimized transformer kernels, checked, timed and placed on a measured roofline"};
    set_invocation(argc, argv);
    app.require_subcommand(1);
    app.set_help_all_flag("--help-all", "Show help for every subcommand");

    std::vector<std::pair<CLI::App*, CommandAction>> chosen;
    std::string names;
    for (auto& c : commands()) {
        CommandAction action = c.setup(app);
        chosen.emplace_back(app.get_subcommand(c.name), std::move(action));
        names += (names.empty() ? "" : ", ") + c.name;
    }

    try {
        app.parse(argc, argv);
    } catch (const CLI::CallForHelp& e) {
        return app.exit(e);
    } catch (const CLI::CallForAllHelp& e) {
        return app.exit(e);
    } catch (const CLI::ParseError& e) {
        std::cerr << "memwall: " << e.what() << "\n";
        if (app.get_subcommands().empty()) std::cerr << "valid commands: " << names << " (memwall --help)\n";
        return 2;
    }

    try {
        for (auto& [sub, action] : chosen)
            if (sub && sub->parsed()) return action();
    } catch (const UsageError& e) {
        std::cerr << "memwall: " << e.what() << "\n";
        return 2;
    } catch (const std::exception& e) {
        std::cerr << "memwall: " << e.what() << "\n";
        return 1;
    }
    return 2;
}

}  // namespace mw
