// The `memwall` command line: parses argv and hands it to the subcommand
// that registered under that name (harness/command.hpp). Every subcommand,
// the core ones included, registers itself from its own file.
#pragma once

namespace mw {
int cli_main(int argc, char** argv);
}

#include <string>

namespace mw {
// Output paths must be writable before any work starts, so a bad path fails
// fast and no time is wasted: not a folder, and ending in .json.
void check_output_path(const std::string& path, const char* what);
// A --threads value: 1 .. 4x this machine's hardware threads.
void check_threads(const char* flag, int threads);
// This machine's hardware threads (at least 1).
int hardware_threads();
}  // namespace mw
