// The `memwall` command line: parses argv and hands it to the subcommand
// that registered under that name (harness/command.hpp). Every subcommand,
// the core ones included, registers itself from its own file.
#pragma once

namespace mw {
int cli_main(int argc, char** argv);
}

// The option checks every command shares (check_threads, check_range, ...)
// are the engine's: harness/command.hpp.
