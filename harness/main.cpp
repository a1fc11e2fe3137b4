#include "harness/cli.hpp"

int main(int argc, char** argv) { return mw::cli_main(argc, argv); }
