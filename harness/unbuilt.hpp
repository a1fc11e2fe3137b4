// Variants whose source is in the tree but not in this build, because CMake
// did not find what they need (MPI, NCCL): each such rung registers its name
// and the reason in the #else of its build switch, so that asking for it
// (`memwall run moe_ffn --variant expert_parallel`) is a usage error that
// says what to install, not "unknown variant".
#pragma once

#include <string>
#include <vector>

namespace mw {

struct Unbuilt {
    std::string op, name;
    std::string why;  // what the build lacks and how to get it
};

const std::vector<Unbuilt>& unbuilt_variants();
// The reason `name` of `op` is not built here, or "" (built, or unknown).
std::string why_unbuilt(const std::string& op, const std::string& name);

namespace detail {
bool register_unbuilt(Unbuilt u);
}  // namespace detail

}  // namespace mw

#ifdef MW_NO_REGISTRATION
#define MW_REGISTER_UNBUILT(id, ...) static_assert(true, "registration is off in the worker library")
#else
#define MW_REGISTER_UNBUILT(id, ...) \
    [[maybe_unused]] static const bool mw_unbuilt_##id = ::mw::detail::register_unbuilt(::mw::Unbuilt __VA_ARGS__)
#endif
