// The `memwall` command line. Exit status: 0 ok, 1 a check failed (or a run
// failed), 2 a usage error (the message names the bad value and the choices).
#pragma once

namespace mw {
int cli_main(int argc, char** argv);
}
