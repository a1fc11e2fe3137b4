#include "harness/unbuilt.hpp"

namespace mw {

namespace {
std::vector<Unbuilt>& table() {
    static std::vector<Unbuilt> t;
    return t;
}
}  // namespace

const std::vector<Unbuilt>& unbuilt_variants() { return table(); }

std::string why_unbuilt(const std::string& op, const std::string& name) {
    for (const Unbuilt& u : table())
        if (u.name == name && (op.empty() || u.op == op)) return u.why;
    return {};
}

namespace detail {
bool register_unbuilt(Unbuilt u) {
    table().push_back(std::move(u));
    return true;
}
}  // namespace detail

}  // namespace mw
