// Every axpy variant against its oracle, odd shapes first; CPU, CUDA
// (SKIPPED without a GPU) and cuda-emu.
#include <gtest/gtest.h>

#include "tests/oracle_cases.hpp"

namespace {

std::vector<mw::Shape> shapes(const std::string&, bool emu) {
    std::vector<mw::Shape> s;
    for (int n : {1, 7, 33, 127, 129}) s.push_back({{{"n", n}}});
    if (!emu) s.push_back({{{"n", 100003}}});
    return s;
}
std::vector<mw::test::Case> cases(mw::Backend b) { return mw::test::cases({"axpy"}, b, shapes); }
MW_ORACLE_SUITES(Axpy, MatchesOracle, cases, mw::test::check_case);

}  // namespace
