#include "harness/registry.hpp"

#include <algorithm>
#include <cstdlib>
#include <new>
#include <set>
#include <sstream>
#include <stdexcept>

#include "harness/gpu.hpp"
#include "harness/memtrack.hpp"
#include "harness/onednn.hpp"

namespace mw {

std::string to_string(Role r) {
    switch (r) {
        case Role::reference: return "reference";
        case Role::optimized: return "optimized";
        case Role::vendor: return "vendor";
        case Role::exercise: return "exercise";
    }
    return "?";
}

std::string to_string(Backend b) {
    switch (b) {
        case Backend::cpu: return "cpu";
        case Backend::cuda: return "cuda";
        case Backend::cuda_emu: return "cuda-emu";
    }
    return "?";
}

namespace {
constexpr std::pair<DType, const char*> kDTypeNames[] = {
    {DType::f32, "f32"}, {DType::f64, "f64"}, {DType::f16, "f16"}, {DType::bf16, "bf16"},
    {DType::i8, "i8"},   {DType::i4, "i4"},   {DType::i32, "i32"}, {DType::u8, "u8"}};
}

std::string to_string(DType t) {
    for (auto [d, n] : kDTypeNames)
        if (d == t) return n;
    return "?";
}

std::optional<Backend> parse_backend(std::string_view s) {
    for (Backend b : {Backend::cpu, Backend::cuda, Backend::cuda_emu})
        if (to_string(b) == s) return b;
    return std::nullopt;
}

std::optional<DType> parse_dtype(std::string_view s) {
    for (auto [d, n] : kDTypeNames)
        if (s == n) return d;
    // common spellings
    if (s == "fp32" || s == "float32") return DType::f32;
    if (s == "fp64" || s == "float64") return DType::f64;
    if (s == "fp16" || s == "float16") return DType::f16;
    if (s == "int8") return DType::i8;
    if (s == "int4") return DType::i4;
    return std::nullopt;
}

std::vector<std::string> all_backend_names() { return {"cpu", "cuda", "cuda-emu"}; }

std::vector<std::string> all_dtype_names() {
    std::vector<std::string> v;
    for (auto [d, n] : kDTypeNames) v.push_back(n);
    return v;
}

double dtype_bytes(DType t) {
    switch (t) {
        case DType::f64: return 8;
        case DType::f32: case DType::i32: return 4;
        case DType::f16: case DType::bf16: return 2;
        case DType::i8: case DType::u8: return 1;
        case DType::i4: return 0.5;
    }
    return 4;
}

std::int64_t Shape::operator[](const std::string& axis) const {
    auto it = axes.find(axis);
    if (it == axes.end()) throw std::out_of_range("shape has no axis '" + axis + "'");
    return it->second;
}

std::string Shape::str() const {
    std::ostringstream os;
    bool first = true;
    for (auto& [k, v] : axes) {
        os << (first ? "" : ",") << k << "=" << v;
        first = false;
    }
    return os.str();
}

std::ostream& operator<<(std::ostream& os, const Shape& s) { return os << s.str(); }

Buffer Buffer::make(std::string name, DType dtype, std::size_t count, std::vector<std::int64_t> dims) {
    Buffer b;
    b.dims = std::move(dims);
    b.name = std::move(name);
    b.dtype = dtype;
    b.count = count;
    std::size_t bytes = b.size_bytes();
    std::size_t alloc = ((bytes + 63) / 64) * 64 + 64;  // never zero, 64-byte multiple
    // Through the tracker, so that peak-memory figures see every buffer
    // (problem inputs, packed copies a variant makes with Buffer::make).
    // Large buffers on huge pages where the OS grants them (memtrack.hpp).
    if (alloc >= memtrack::kPagesFrom) {
        void* p = memtrack::allocate_pages(alloc);
        b.data = std::shared_ptr<std::byte[]>(static_cast<std::byte*>(p),
                                              [alloc](std::byte* q) { memtrack::release_pages(q, alloc); });
        return b;
    }
    void* p = memtrack::allocate(alloc, 64);
    b.data = std::shared_ptr<std::byte[]>(static_cast<std::byte*>(p), [](std::byte* q) { memtrack::release(q); });
    return b;
}

std::size_t Buffer::size_bytes() const {
    if (dtype == DType::i4) return (count + 1) / 2;
    return count * static_cast<std::size_t>(dtype_bytes(dtype));
}

namespace {
template <class V>
auto& find_buffer(V& list, const std::string& name, const char* kind) {
    for (auto& b : list)
        if (b.name == name) return b;
    throw std::out_of_range(std::string("problem has no ") + kind + " buffer '" + name + "'");
}
}  // namespace

Buffer& Problem::in(const std::string& n) { return find_buffer(inputs, n, "input"); }
Buffer& Problem::out(const std::string& n) { return find_buffer(outputs, n, "output"); }
const Buffer& Problem::in(const std::string& n) const { return find_buffer(inputs, n, "input"); }
const Buffer& Problem::out(const std::string& n) const { return find_buffer(outputs, n, "output"); }

namespace {
std::vector<Op>& op_list() {
    static std::vector<Op> v;
    return v;
}
std::vector<Variant>& variant_list() {
    static std::vector<Variant> v;
    return v;
}
}  // namespace

void register_op(Op op) {
    for (auto& o : op_list())
        if (o.name == op.name) throw std::logic_error("op registered twice: " + op.name);
    op_list().push_back(std::move(op));
}

void register_variant(Variant v) {
    for (auto& o : variant_list())
        if (o.op == v.op && o.backend == v.backend && o.name == v.name)
            throw std::logic_error("variant registered twice: " + v.op + "/" + v.name + " (" + to_string(v.backend) +
                                   ") in " + v.source + " and " + o.source);
    variant_list().push_back(std::move(v));
}

detail::VariantRegistrar::VariantRegistrar(Variant v, const char* file) {
    if (v.source.empty()) {
        std::string f = file;
        // Keep the path relative to the repository root for readable listings.
        for (const char* root : {"/reference/", "/optimized/", "/levels/", "/tests/", "/harness/"}) {
            auto pos = f.rfind(root);
            if (pos != std::string::npos) {
                f = f.substr(pos + 1);
                break;
            }
        }
        v.source = f;
    }
    register_variant(std::move(v));
}

const std::vector<Op>& ops() { return op_list(); }

const std::vector<Variant>& variants() {
    // Stable order: lever, op, backend, rung, name.
    static bool sorted = false;
    if (!sorted) {
        std::stable_sort(variant_list().begin(), variant_list().end(), [](const Variant& a, const Variant& b) {
            return std::tie(a.lever, a.op, a.backend, a.rung, a.name) <
                   std::tie(b.lever, b.op, b.backend, b.rung, b.name);
        });
        sorted = true;
    }
    return variant_list();
}

const Op* find_op(std::string_view name) {
    for (auto& o : op_list())
        if (o.name == name) return &o;
    return nullptr;
}

std::vector<std::string> lever_names() {
    std::set<std::string> s;
    for (auto& o : op_list()) s.insert(o.lever);
    return {s.begin(), s.end()};
}

std::vector<const Variant*> variants_of(std::string_view op, std::optional<Backend> backend) {
    std::vector<const Variant*> out;
    for (auto& v : variants())
        if (v.op == op && (!backend || v.backend == *backend)) out.push_back(&v);
    return out;
}

namespace {
bool cpu_feature(const std::string& f) {
    __builtin_cpu_init();
    if (f == "avx2") return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    if (f == "avx512f") return __builtin_cpu_supports("avx512f");
    if (f == "avx512bw") return __builtin_cpu_supports("avx512bw");
    if (f == "avx512vnni") return __builtin_cpu_supports("avx512vnni");
    if (f == "avx512bf16") return __builtin_cpu_supports("avx512bf16");
    if (f == "f16c") return __builtin_cpu_supports("f16c");
    return false;
}
}  // namespace

namespace {
int env_int(std::initializer_list<const char*> names, int fallback) {
    for (const char* n : names)
        if (const char* v = std::getenv(n); v && *v) return std::atoi(v);
    return fallback;
}
}  // namespace

int launch_rank() { return env_int({"OMPI_COMM_WORLD_RANK", "PMI_RANK"}, 0); }
int launch_size() { return env_int({"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"}, 1); }

bool runnable_here(const Variant& v, std::string* why) {
    auto fail = [&](std::string s) {
        if (why) *why = std::move(s);
        return false;
    };
    if (v.backend == Backend::cuda && gpu_count() == 0) return fail("needs a GPU: " + gpu_absent_reason());
    for (auto& r : v.needs) {
        if (r == "gpu") {
            if (v.backend == Backend::cuda_emu) continue;  // emulated
            if (gpu_count() == 0) return fail("needs a GPU: " + gpu_absent_reason());
        } else if (r == "tensor_cores" || r == "ptx" || r == "cp.async" || r == "tma") {
            if (v.backend == Backend::cuda_emu) return fail("WAIVED on cuda-emu: needs " + r);
        } else if (r == "mpi") {
            if (launch_size() < 2)
                return fail("needs MPI processes: start it as `mpirun -n P memwall run ...` with P >= 2");
        } else if (r == "gpu_per_rank") {
            if (gpu_count() < launch_size())
                return fail("needs one GPU per MPI rank: " + std::to_string(launch_size()) + " ranks, " +
                            std::to_string(gpu_count()) + " GPU(s) here");
        } else if (r == "onednn") {
            std::string w;
            if (!onednn::available(&w)) return fail("needs oneDNN: " + w);
        } else if (r.rfind("sm_", 0) == 0) {
            // checked by the CUDA glue at prepare time (compute capability)
        } else if (!cpu_feature(r)) {
            return fail("needs CPU feature " + r);
        }
    }
    return true;
}

}  // namespace mw
