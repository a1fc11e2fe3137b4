// harness/strings.hpp: fmt formats as printf does, at any length.
#include <gtest/gtest.h>

#include <string>

#include "harness/strings.hpp"

namespace {

TEST(Strings, FmtFormatsAsPrintf) {
    EXPECT_EQ(mw::fmt("%.2f", 3.14159), "3.14");
    EXPECT_EQ(mw::fmt("%dm%02ds", 3, 5), "3m05s");
    EXPECT_EQ(mw::fmt("0x%08x", 255u), "0x000000ff");
    EXPECT_EQ(mw::fmt("%s", ""), "");
}

TEST(Strings, FmtOfANumberKeepsItsSignificantDigits) {
    EXPECT_EQ(mw::fmt(1234.5678), "1.23e+03");  // 3 by default
    EXPECT_EQ(mw::fmt(0.0123456, 2), "0.012");
    EXPECT_EQ(mw::fmt(128001.0, 17), "128001");
    EXPECT_EQ(mw::fmt(0.1, 17), "0.10000000000000001");
}

TEST(Strings, FmtIsNotCutShort) {
    const std::string s = mw::fmt("[%s|%300d]", "x", 7);
    ASSERT_EQ(s.size(), 304u);
    EXPECT_EQ(s.substr(0, 3), "[x|");
    EXPECT_EQ(s.substr(s.size() - 2), "7]");
}

}  // namespace
