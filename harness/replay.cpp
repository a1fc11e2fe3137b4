#include "harness/replay.hpp"

#include <map>

namespace mw {

namespace {
std::map<std::string, Replay>& table() {
    static std::map<std::string, Replay> t;
    return t;
}
}  // namespace

const Replay* find_replay(const std::string& op) {
    const auto it = table().find(op);
    return it == table().end() ? nullptr : &it->second;
}

namespace detail {
bool register_replay(const std::string& op, Replay r) {
    table()[op] = std::move(r);
    return true;
}
}  // namespace detail

}  // namespace mw
