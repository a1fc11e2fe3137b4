// `memwall grade-worker --op OP --variant V --backend B` (hidden): the
// reference side of `memwall grade`'s timing. It speaks the same protocol as
// the submission's worker (grade_protocol.hpp) and runs a registered variant
// on the buffers in the shared mapping, so that the reference and the
// submission are timed through the same round trip. With --time-call it also
// times the variant's run() alone (prepare(), e.g. quantizing weights, is not
// the variant's cost) and reports it, for exercises graded that way: this
// process runs no submission code and outside the sandbox, so the grader may
// trust that number. It ignores the extra buffers the grader prepares for
// submissions (they follow the outputs in the mapping).
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>

#include <chrono>
#include <cstdio>
#include <map>
#include <vector>

#include "harness/command.hpp"
#include "commands/grade/grade_protocol.hpp"
#include "harness/memtrack.hpp"
#include "harness/registry.hpp"
#include "harness/run_queue.hpp"
#include "harness/timing.hpp"

namespace mw::grade {

namespace {

bool read_full(int fd, void* p, std::size_t n) {
    for (auto* c = static_cast<char*>(p); n > 0;) {
        const ssize_t r = ::read(fd, c, n);
        if (r <= 0) return false;
        c += r, n -= static_cast<std::size_t>(r);
    }
    return true;
}

bool write_full(int fd, const void* p, std::size_t n) {
    for (auto* c = static_cast<const char*>(p); n > 0;) {
        const ssize_t r = ::write(fd, c, n);
        if (r <= 0) return false;
        c += r, n -= static_cast<std::size_t>(r);
    }
    return true;
}

// The problem of the current call, its buffers pointing into the mapping.
// Names, dtypes and dims come from a template problem made once per shape.
Problem view(const Op& op, const SharedHeader& h, unsigned char* base, std::map<std::string, Problem>& templates) {
    Shape shape;
    for (unsigned a = 0; a < h.n_axes && a < kMaxAxes; ++a) shape.axes[std::string(h.axis_names[a])] = h.axes[a];
    auto it = templates.find(shape.str());
    if (it == templates.end()) it = templates.emplace(shape.str(), op.make_problem(shape, op.dtypes.at(0), 0)).first;
    Problem p = it->second;  // copies the Buffer descriptions; data is replaced below
    std::size_t i = 0;
    for (auto* list : {&p.inputs, &p.outputs})
        for (auto& b : *list) {
            if (h.bytes[i] != b.size_bytes()) throw std::runtime_error("buffer " + b.name + " has the wrong size");
            b.data = std::shared_ptr<std::byte[]>(std::shared_ptr<void>(), reinterpret_cast<std::byte*>(base + h.offset[i]));
            ++i;
        }
    return p;
}

int run_reference_worker(const std::string& op_name, const std::string& variant, const std::string& backend,
                         bool time_call) {
    const Op* op = find_op(op_name);
    const auto b = parse_backend(backend);
    const Variant* v = nullptr;
    for (auto* c : variants_of(op_name, b))
        if (op && b && c->name == variant) v = c;
    if (!v) throw UsageError("grade-worker: no variant '" + variant + "' of op '" + op_name + "' on " + backend);
    struct stat st {};
    if (fstat(kShmFd, &st) != 0) throw UsageError("grade-worker runs under memwall grade only");
    auto* base = static_cast<unsigned char*>(
        mmap(nullptr, static_cast<std::size_t>(st.st_size), PROT_READ | PROT_WRITE, MAP_SHARED, kShmFd, 0));
    if (base == MAP_FAILED) return 3;
    std::map<std::string, Problem> templates;
    // Timing "call": the variant's preparing (say, quantizing W afresh) is
    // not timed, and its buffers' pages are reused from call to call
    // (memtrack.hpp) instead of faulted in anew. Otherwise the reference's
    // whole call is timed, as the submission's is, and allocates as it does.
    if (time_call) memtrack::keep_released_pages(std::size_t(1) << 30);
    for (char cmd = 0; read_full(kCommandFd, &cmd, 1) && cmd != kQuit;) {
        Reply reply;
        if (cmd == kRun) {
            try {
                const SharedHeader& h = *reinterpret_cast<const SharedHeader*>(base);
                if (h.mapped_bytes > static_cast<std::size_t>(st.st_size) || !protect_guards(base, h))
                    throw std::runtime_error("the reference worker could not set up its guard pages");
                Problem p = view(*op, h, base, templates);
                Instance inst = v->prepare(p);
                if (inst.device_time) {
                    reply.device_seconds = inst.device_time(false);
                } else {
                    // Its threads (OpenMP's included, started by the warm-up call), for their waits.
                    const RunQueueWait wait(time_call ? std::vector<pid_t>{getpid()} : std::vector<pid_t>{});
                    const auto before = wait.take();
                    const auto t0 = std::chrono::steady_clock::now();
                    inst.run();
                    inst.sync();
                    if (time_call) {
                        reply.device_seconds =
                            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
                        reply.waited_seconds = RunQueueWait::working_wait(before, wait.take());
                    }
                }
                inst.fetch();
            } catch (const std::exception& e) {
                reply.status = 1;
                std::snprintf(reply.message, sizeof reply.message, "%s", e.what());
            }
        }
        if (!write_full(kReplyFd, &reply, sizeof reply)) break;
    }
    return 0;
}

}  // namespace

}  // namespace mw::grade

MW_REGISTER_COMMAND_NAMED(grade_worker, "grade-worker", [](CLI::App& app) -> mw::CommandAction {
    auto* sub = app.add_subcommand("grade-worker", "The reference side of memwall grade's timing (internal)");
    sub->group("");  // hidden from --help
    auto op = std::make_shared<std::string>(), variant = std::make_shared<std::string>(),
         backend = std::make_shared<std::string>("cpu");
    auto time_call = std::make_shared<bool>(false);
    sub->add_option("--op", *op)->required();
    sub->add_option("--variant", *variant)->required();
    sub->add_option("--backend", *backend);
    sub->add_flag("--time-call", *time_call);
    return [=] { return mw::grade::run_reference_worker(*op, *variant, *backend, *time_call); };
});
