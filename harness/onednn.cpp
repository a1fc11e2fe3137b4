// Loading oneDNN at run time (harness/onednn.hpp says why) and the helpers of
// harness/onednn_api.hpp.
#include "harness/onednn.hpp"

#if MEMWALL_HAVE_ONEDNN

#include <dlfcn.h>

#include <stdexcept>

#include "harness/onednn_api.hpp"

namespace mw::onednn {
namespace {

struct Loaded {
    Api api;
    std::string error;  // empty: loaded
    std::string version;
};

// Opened once, on first use, and never closed (the primitives made from it
// live as long as the process may run them).
const Loaded& loaded() {
    static const Loaded l = [] {
        Loaded r;
        void* h = dlopen(kSoname, RTLD_NOW | RTLD_LOCAL);
        if (!h) {
            const char* e = dlerror();
            r.error = std::string("cannot load ") + kSoname + " (" + (e ? e : "dlopen failed") +
                      "; Debian's libdnnl2 package holds it)";
            return r;
        }
#define MW_ONEDNN_RESOLVE(name)                                                                   \
    r.api.name = reinterpret_cast<decltype(&::name)>(dlsym(h, #name));                            \
    if (!r.api.name) {                                                                            \
        r.error = std::string(kSoname) + " has no " #name " (a 2.x API is needed)"; \
        return r;                                                                                 \
    }
        MW_ONEDNN_FUNCTIONS(MW_ONEDNN_RESOLVE)
#undef MW_ONEDNN_RESOLVE
        if (r.api.dnnl_engine_create(&r.api.engine, dnnl_cpu, 0) != dnnl_success) {
            r.error = std::string(kSoname) + " loaded, but made no CPU engine";
            return r;
        }
        const dnnl_version_t* v = r.api.dnnl_version();
        r.version = "oneDNN " + std::to_string(v->major) + "." + std::to_string(v->minor) + "." +
                    std::to_string(v->patch) + " (" + kSoname + ")";
        return r;
    }();
    return l;
}

}  // namespace

bool available(std::string* why) {
    const Loaded& l = loaded();
    if (why && !l.error.empty()) *why = l.error;
    return l.error.empty();
}

std::string version() { return loaded().version; }

const Api& api() {
    const Loaded& l = loaded();
    if (!l.error.empty()) throw std::runtime_error(l.error);
    return l.api;
}

void check(dnnl_status_t status, const char* what) {
    if (status != dnnl_success)
        throw std::runtime_error(std::string("oneDNN: ") + what + " failed (status " + std::to_string(int(status)) + ")");
}

dnnl_memory_desc_t f32_desc(std::initializer_list<dnnl_dim_t> dims, dnnl_format_tag_t tag) {
    dnnl_memory_desc_t md;
    dnnl_dims_t d{};
    int n = 0;
    for (dnnl_dim_t x : dims) d[n++] = x;
    check(api().dnnl_memory_desc_init_by_tag(&md, n, d, dnnl_f32, tag), "dnnl_memory_desc_init_by_tag");
    return md;
}

Bound::Bound(const void* op_desc, const_dnnl_post_ops_t post_ops) {
    // A destructor does not run after its constructor threw: what was made
    // so far is released here (inside the body, while the members live).
    try {
        make(op_desc, post_ops);
    } catch (...) {
        release();
        throw;
    }
}

void Bound::make(const void* op_desc, const_dnnl_post_ops_t post_ops) {
    const Api& a = api();
    dnnl_primitive_attr_t attr = nullptr;
    check(a.dnnl_primitive_attr_create(&attr), "dnnl_primitive_attr_create");
    std::unique_ptr<dnnl_primitive_attr, decltype(a.dnnl_primitive_attr_destroy)> attr_owner(
        attr, a.dnnl_primitive_attr_destroy);
    check(a.dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user), "set_scratchpad_mode");
    if (post_ops) check(a.dnnl_primitive_attr_set_post_ops(attr, post_ops), "dnnl_primitive_attr_set_post_ops");
    check(a.dnnl_primitive_desc_create(&pd_, static_cast<const_dnnl_op_desc_t>(op_desc), attr, a.engine, nullptr),
          "dnnl_primitive_desc_create");
    check(a.dnnl_primitive_create(&prim_, pd_), "dnnl_primitive_create");
    check(a.dnnl_stream_create(&stream_, a.engine, dnnl_stream_default_flags), "dnnl_stream_create");
    const dnnl_memory_desc_t* scratch = a.dnnl_primitive_desc_query_md(pd_, dnnl_query_scratchpad_md, 0);
    const std::size_t bytes = scratch ? a.dnnl_memory_desc_get_size(scratch) : 0;
    if (bytes > 0) {
        scratch_ = Buffer::make("onednn_scratchpad", DType::u8, bytes);
        arg(DNNL_ARG_SCRATCHPAD, *scratch, scratch_.data.get());
    }
}

Bound::~Bound() { release(); }

void Bound::release() noexcept {
    const Api& a = loaded().api;
    for (auto& [which, m] : args_) a.dnnl_memory_destroy(m);
    args_.clear();
    exec_.clear();
    if (stream_) a.dnnl_stream_destroy(stream_);
    if (prim_) a.dnnl_primitive_destroy(prim_);
    if (pd_) a.dnnl_primitive_desc_destroy(pd_);
    stream_ = nullptr;
    prim_ = nullptr;
    pd_ = nullptr;
}

void Bound::arg(int which, const dnnl_memory_desc_t& md, const void* data) {
    const Api& a = api();
    dnnl_memory_t m = nullptr;
    // oneDNN's handle is void* for inputs too; it does not write them.
    check(a.dnnl_memory_create(&m, &md, a.engine, const_cast<void*>(data)), "dnnl_memory_create");
    auto [it, fresh] = args_.try_emplace(which, m);  // may throw: m is released with the map's other entries
    if (!fresh) {
        a.dnnl_memory_destroy(it->second);
        it->second = m;
    }
    exec_.clear();
    for (auto& [w, mem] : args_) exec_.push_back({w, mem});
}

void Bound::run() const {
    const Api& a = api();
    check(a.dnnl_primitive_execute(prim_, stream_, int(exec_.size()), exec_.data()), "dnnl_primitive_execute");
    check(a.dnnl_stream_wait(stream_), "dnnl_stream_wait");
}

std::string Bound::implementation() const {
    const char* s = nullptr;
    if (api().dnnl_primitive_desc_query(pd_, dnnl_query_impl_info_str, 0, &s) != dnnl_success || !s) return "";
    return s;
}

std::shared_ptr<Bound> matmul_f32(const float* A, const float* B, float* C, long M, long N, long K) {
    const auto a = f32_desc({M, K}, dnnl_ab), b = f32_desc({K, N}, dnnl_ab), c = f32_desc({M, N}, dnnl_ab);
    dnnl_matmul_desc_t d;
    check(api().dnnl_matmul_desc_init(&d, &a, &b, nullptr, &c), "dnnl_matmul_desc_init");
    auto bound = std::make_shared<Bound>(&d);
    bound->arg(DNNL_ARG_SRC, a, A);
    bound->arg(DNNL_ARG_WEIGHTS, b, B);
    bound->arg(DNNL_ARG_DST, c, C);
    return bound;
}

Instance instance_of(std::vector<std::shared_ptr<Bound>> chain, std::shared_ptr<const void> keep) {
    Instance inst;
    for (const auto& b : chain) inst.path += (inst.path.empty() ? "" : " + ") + b->implementation();
    inst.run = [chain = std::move(chain), keep = std::move(keep)] {
        for (const auto& b : chain) b->run();
    };
    return inst;
}

}  // namespace mw::onednn

#else  // built without oneDNN's headers

namespace mw::onednn {
bool available(std::string* why) {
    if (why) *why = "built without oneDNN's headers (apt-get install libdnnl-dev, then configure again)";
    return false;
}
std::string version() { return ""; }
}  // namespace mw::onednn

#endif
