// Runs this build's memwall binary (MEMWALL_BIN, a compile definition of the
// test) the way a person does from a shell: stdout and stderr together, and
// the exit status. `env` goes in front of the command ("NAME=value ...").
#pragma once

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <string>

namespace mw::test {

struct Result {
    int status;
    std::string output;  // stdout + stderr
};

inline Result run_memwall(const std::string& args, const std::string& env = "") {
    const std::string cmd = (env.empty() ? "" : env + " ") + MEMWALL_BIN + " " + args + " 2>&1";
    std::array<char, 512> buf{};
    std::string out;
    FILE* p = popen(cmd.c_str(), "r");
    while (fgets(buf.data(), buf.size(), p)) out += buf.data();
    const int st = pclose(p);
    return {WIFEXITED(st) ? WEXITSTATUS(st) : -1, out};
}

}  // namespace mw::test
