// serve on the committed trained model: the trace's distribution and
// determinism; both rungs against the fp64 oracle on small traces; the
// counters of a trace small enough to follow by hand; continuous batching
// admitting more than static; every block back in the pool at the end; the
// shared prefix's blocks really shared, with the same tokens; too-long
// requests rejected with the numbers named, impossible shapes refused.
#include <gtest/gtest.h>

#include <numeric>

#include "harness/runner.hpp"
#include "reference/kv_cache/serve.hpp"
#include "model/model.hpp"

namespace {

namespace kv = mw::kv_cache;

mw::Shape shape(std::int64_t requests, std::int64_t mean_len, std::int64_t max_len, std::int64_t budget_mib,
                std::int64_t shared, std::int64_t gap, std::int64_t seed = 1) {
    return {{{"requests", requests}, {"mean_len", mean_len}, {"max_len", max_len}, {"budget_mib", budget_mib},
             {"shared", shared}, {"gap", gap}, {"seed", seed}}};
}

// A request whose prompt is `shared` common tokens then bytes of the prompt text.
kv::Request request(int arrival, int prompt, int output, int offset = 0) {
    const std::string text = kv::kPromptText;
    kv::Request r;
    r.arrival = arrival;
    r.output = output;
    for (int i = 0; i < prompt; ++i) r.prompt.push_back((unsigned char)text[std::size_t(offset + i) % text.size()]);
    return r;
}

// A store and a decoder over it for hand-made traces, max_len positions.
struct Rig {
    const kv::DecodeModel& m;
    kv::KvGeometry g;
    explicit Rig(int max_len) : m(kv::serve_model(max_len)), g{m.config.layers, m.config.kv_heads, m.config.head_dim()} {}
    mw::model::cpu::Decoder decoder(kv::KvStore& s, int max_len) const {
        return mw::model::cpu::Decoder(m.config, m.params.data(), {}, s, max_len);
    }
};

std::vector<int> oracle_tokens(const kv::Request& r, int max_len) {
    const auto& m = kv::serve_model(max_len);
    const std::vector<double> w(m.params.begin(), m.params.end());
    return mw::model::ref_greedy(m.config, w.data(), r.prompt, r.output);
}

TEST(ServeTrace, LengthsFollowTheStatedDistribution) {
    const kv::TraceSpec spec{.requests = 20000, .mean_len = 500, .max_len = 4096, .shared = 64, .gap = 4, .seed = 7};
    const auto t = kv::make_trace(spec);
    ASSERT_EQ(t.requests.size(), 20000u);
    double sum = 0;
    int capped = 0, prev = 0;
    for (const auto& r : t.requests) {
        sum += r.length();
        ASSERT_GE(r.length(), spec.shared + 2);
        ASSERT_LE(r.length(), spec.max_len);
        ASSERT_GE(int(r.prompt.size()), spec.shared + 1);
        ASSERT_GE(r.output, 1);
        ASSERT_GE(r.arrival, prev);
        prev = r.arrival;
        capped += r.length() == spec.max_len;
        const double f = double(r.prompt.size()) / r.length();
        if (int(r.prompt.size()) > spec.shared + 1 && r.output > 1) {
            ASSERT_TRUE(f > 0.19 && f < 0.81) << f;
        }
    }
    EXPECT_NEAR(sum / 20000, 500, 500 * 0.03);
    EXPECT_NEAR(double(t.requests.back().arrival) / 20000, 4.0, 4.0 * 0.05) << "mean gap";
    EXPECT_LT(capped, 20) << "a geometric length of mean 500 rarely reaches 4096";
    // Every prompt starts with the same shared tokens.
    for (const auto& r : t.requests)
        ASSERT_TRUE(std::equal(r.prompt.begin(), r.prompt.begin() + 64, t.requests[0].prompt.begin()));

    // A mean close to max_len: q is solved for the capped mean, so the sample still hits it.
    const auto near = kv::make_trace({.requests = 20000, .mean_len = 900, .max_len = 1024, .shared = 0, .gap = 0, .seed = 3});
    double s2 = 0;
    int at_max = 0;
    for (const auto& r : near.requests) {
        s2 += r.length();
        at_max += r.length() == 1024;
        ASSERT_EQ(r.arrival, 0);
    }
    EXPECT_NEAR(s2 / 20000, 900, 900 * 0.03);
    EXPECT_GT(at_max, 1000);
    const double q = kv::trace_length_q(900, 2, 1024);
    double mean = 2;
    for (int k = 1; k <= 1022; ++k) mean += std::pow(q, k);
    EXPECT_NEAR(mean, 900, 1e-6);
}

TEST(ServeTrace, DeterministicFromTheShape) {
    const kv::TraceSpec spec{.requests = 50, .mean_len = 100, .max_len = 512, .shared = 8, .gap = 2, .seed = 5};
    const auto a = kv::make_trace(spec), b = kv::make_trace(spec);
    auto other = spec;
    other.seed = 6;
    const auto c = kv::make_trace(other);
    int differ = 0;
    for (std::size_t i = 0; i < 50; ++i) {
        EXPECT_EQ(a.requests[i].prompt, b.requests[i].prompt);
        EXPECT_EQ(a.requests[i].output, b.requests[i].output);
        EXPECT_EQ(a.requests[i].arrival, b.requests[i].arrival);
        differ += a.requests[i].length() != c.requests[i].length();
    }
    EXPECT_GT(differ, 25) << "another seed, another trace";
    // The problem's inputs carry the trace back unchanged.
    const auto s = shape(50, 100, 512, 4, 8, 2, 5);
    const mw::Problem p = mw::find_op("serve")->make_problem(s, mw::DType::f32, 42);
    const auto back = kv::trace_of(p);
    ASSERT_EQ(back.requests.size(), 50u);
    for (std::size_t i = 0; i < 50; ++i) EXPECT_EQ(back.requests[i].prompt, a.requests[i].prompt);
}

class Serve : public ::testing::TestWithParam<mw::Shape> {};

TEST_P(Serve, BothRungsMatchTheOracle) {
    const auto s = GetParam();
    const mw::Op* op = mw::find_op("serve");
    ASSERT_NE(op, nullptr);
    ASSERT_EQ(op->validate(s), "");
    mw::Problem p = op->make_problem(s, mw::DType::f32, 42);
    const auto oracle = op->oracle(p);
    const auto variants = mw::variants_of("serve", mw::Backend::cpu);
    ASSERT_EQ(variants.size(), 2u);
    for (const auto* v : variants) {
        const auto r = mw::check_variant(*op, *v, p, oracle);
        EXPECT_TRUE(r.correct) << v->name << " at " << s.str() << ": " << r.message;
    }
}

// budget_mib = 1 is 256 positions: static gets 256 / max_len slots, paged 16 blocks.
INSTANTIATE_TEST_SUITE_P(SmallTraces, Serve,
                         ::testing::Values(shape(3, 9, 64, 1, 0, 0), shape(5, 21, 64, 1, 5, 2, 3),
                                           shape(6, 33, 127, 1, 17, 1, 4)));

// Three requests a reader can follow iteration by iteration.
//   A: arrives 0, prompt 3, output 4     B: arrives 0, prompt 2, output 2     C: arrives 1, prompt 4, output 3
kv::Trace three_requests() {
    kv::Trace t;
    t.requests = {request(0, 3, 4, 0), request(0, 2, 2, 40), request(1, 4, 3, 80)};
    return t;
}

TEST(ServeCounters, StaticByHand) {
    Rig rig(16);
    kv::ContiguousStore store(rig.g, 2, 16);
    auto dec = rig.decoder(store, 16);
    const auto t = three_requests();
    const auto res = kv::serve_static(t, store, dec);
    // it 0: batch {A, B} (C has not arrived), both prefilled: A 1 token, B 1
    // it 1: A 2, B 2 (done: B keeps its slot)   it 2: A 3   it 3: A 4 (done: the batch ends)
    // it 4: batch {C}, prefilled: C 1           it 5: C 2   it 6: C 3 (done)
    const auto& k = res.counters;
    EXPECT_EQ(k.at("iterations"), 7);
    EXPECT_EQ(k.at("admitted_max"), 2);
    EXPECT_DOUBLE_EQ(k.at("admitted_mean"), 11.0 / 7);
    EXPECT_DOUBLE_EQ(k.at("running_mean"), 9.0 / 7);
    EXPECT_EQ(res.series.at("admitted_from_iteration"), (std::vector<double>{0, 4}));
    EXPECT_EQ(res.series.at("admitted"), (std::vector<double>{2, 1}));
    // Written positions after each step: 5, 7, 8, 9 of 2 slots x 16; then 4, 5, 6 of one.
    const double bpp = kv::serve_bytes_per_position(), wasted = 27 + 25 + 24 + 23 + 12 + 11 + 10;
    EXPECT_DOUBLE_EQ(k.at("kv_reserved_mean"), 16.0 * 11 / 7 * bpp);
    EXPECT_DOUBLE_EQ(k.at("kv_wasted_bytes_mean"), wasted / 7 * bpp);
    EXPECT_DOUBLE_EQ(k.at("kv_wasted_per_seq_blocks"), wasted / 11 / 16);
    EXPECT_EQ(k.at("rejected"), 0);
    EXPECT_GT(k.at("tokens_per_s"), 0);
    EXPECT_GE(k.at("ttft_p99_ms"), k.at("ttft_p50_ms"));
    for (int r = 0; r < 3; ++r) {
        EXPECT_EQ(res.tokens[std::size_t(r)], oracle_tokens(t.requests[std::size_t(r)], 16)) << "request " << r;
        EXPECT_FALSE(store.is_open(r == 2 ? 0 : r)) << "every slot closed at the end";
    }
}

TEST(ServeCounters, ContinuousByHand) {
    Rig rig(16);
    kv::PagedStore store(rig.g, 4, 3);  // 3 blocks of 16; a reserve of 1 block while any request runs
    auto dec = rig.decoder(store, 16);
    const auto t = three_requests();
    const auto res = kv::serve_continuous(t, store, dec, 16);
    // it 0: A admitted (1 block), B admitted (1 block + the reserve of 1 free)
    // it 1: C arrives, needs 1 + the reserve: 1 free, waits; A 2, B 2 (done: its block returns)
    // it 2: C admitted, prefilled: C 1, A 3    it 3: A 4 (done), C 2    it 4: C 3 (done)
    const auto& k = res.counters;
    EXPECT_EQ(k.at("iterations"), 5);
    EXPECT_EQ(res.series.at("admitted_from_iteration"), (std::vector<double>{0, 4}));
    EXPECT_EQ(res.series.at("admitted"), (std::vector<double>{2, 1}));
    EXPECT_DOUBLE_EQ(k.at("admitted_mean"), 9.0 / 5);
    // Blocks held: 2, 2, 2, 2, 1; rows written in them: 5, 7, 9, 11, 6.
    const double bpp = kv::serve_bytes_per_position(), wasted = 27 + 25 + 23 + 21 + 10;
    EXPECT_DOUBLE_EQ(k.at("kv_reserved_mean"), 16.0 * 9 / 5 * bpp);
    EXPECT_DOUBLE_EQ(k.at("kv_wasted_bytes_mean"), wasted / 5 * bpp);
    EXPECT_EQ(k.at("preemptions"), 0);
    EXPECT_EQ(store.allocator().free_count(), 3) << "every block back in the pool";
    for (int r = 0; r < 3; ++r)
        EXPECT_EQ(res.tokens[std::size_t(r)], oracle_tokens(t.requests[std::size_t(r)], 16)) << "request " << r;
}

TEST(ServeCounters, PagedAdmitsMoreThanStaticOnTheSameBudget) {
    // 128 positions: 2 static slots of 64, or 8 blocks of 16; each of the 7
    // requests (11 to 16 positions) fits one block.
    Rig rig(64);
    kv::Trace t;
    for (int i = 0; i < 7; ++i) t.requests.push_back(request(0, 3 + i % 4, 8 + i % 3, 17 * i));
    kv::ContiguousStore slots(rig.g, 2, 64);
    auto d0 = rig.decoder(slots, 64);
    const auto s = kv::serve_static(t, slots, d0);
    kv::PagedStore pool(rig.g, 9, 8);
    auto d1 = rig.decoder(pool, 64);
    const auto c = kv::serve_continuous(t, pool, d1, 64);
    EXPECT_EQ(s.counters.at("admitted_max"), 2) << "never more than the slots";
    EXPECT_EQ(c.counters.at("admitted_max"), 7) << "all at once: 7 blocks, 1 left in reserve";
    EXPECT_GT(c.counters.at("admitted_mean"), 2 * s.counters.at("admitted_mean"));
    EXPECT_LT(c.counters.at("iterations"), s.counters.at("iterations"));
    EXPECT_LT(c.counters.at("kv_wasted_per_seq_blocks"), 1);
    EXPECT_GT(s.counters.at("kv_wasted_per_seq_blocks"), 2);
    EXPECT_EQ(pool.allocator().free_count(), 8);
    EXPECT_EQ(s.tokens, c.tokens);
}

TEST(ServeCounters, PreemptionFreesTheNewestAndRecomputes) {
    // 4 blocks: three requests of 20-token prompts (2 blocks each once
    // decoding) cannot all grow: the newest is preempted, recomputed later,
    // and its tokens are the same.
    Rig rig(64);
    kv::Trace t;
    for (int i = 0; i < 3; ++i) t.requests.push_back(request(0, 14, 12, 31 * i));
    kv::PagedStore pool(rig.g, 4, 4);
    auto dec = rig.decoder(pool, 64);
    const auto c = kv::serve_continuous(t, pool, dec, 64);
    EXPECT_GT(c.counters.at("preemptions"), 0);
    EXPECT_GT(c.counters.at("recomputed_tokens"), 0);
    EXPECT_EQ(pool.allocator().free_count(), 4);
    for (int r = 0; r < 3; ++r)
        EXPECT_EQ(c.tokens[std::size_t(r)], oracle_tokens(t.requests[std::size_t(r)], 64)) << "request " << r;
}

TEST(ServeCounters, SharedPrefixBlocksAreSharedAndChangeNoToken) {
    // Three prompts of 32 shared tokens + 8 of their own, 2 new tokens each.
    Rig rig(64);
    kv::Trace shared;
    shared.shared = 32;
    for (int i = 0; i < 3; ++i) {
        auto r = request(0, 40, 2, 0);
        const auto own = request(0, 8, 2, 50 + 13 * i).prompt;
        std::copy(own.begin(), own.end(), r.prompt.begin() + 32);
        shared.requests.push_back(r);
    }
    kv::Trace alone = shared;
    alone.shared = 0;
    kv::PagedStore a(rig.g, 4, 20), b(rig.g, 4, 20);
    auto da = rig.decoder(a, 64);
    auto db = rig.decoder(b, 64);
    const auto with = kv::serve_continuous(shared, a, da, 64);
    const auto without = kv::serve_continuous(alone, b, db, 64);
    // With: the holder's 2 blocks + one block of its own per request; without: 3 per request.
    const double block = 16 * kv::serve_bytes_per_position();
    EXPECT_DOUBLE_EQ(with.counters.at("kv_reserved_mean"), 5 * block);
    EXPECT_DOUBLE_EQ(without.counters.at("kv_reserved_mean"), 9 * block);
    // The third blocks hold 8, then 9 rows: 8 + 7 rows wasted per request, either way.
    EXPECT_DOUBLE_EQ(with.counters.at("kv_wasted_per_seq_blocks"), (3 * 8 + 3 * 7) / 6.0 / 16);
    EXPECT_DOUBLE_EQ(without.counters.at("kv_wasted_per_seq_blocks"), (3 * 8 + 3 * 7) / 6.0 / 16);
    EXPECT_EQ(with.tokens, without.tokens);
    for (int r = 0; r < 3; ++r) EXPECT_EQ(with.tokens[std::size_t(r)], oracle_tokens(shared.requests[std::size_t(r)], 64));
    EXPECT_EQ(a.allocator().free_count(), 20) << "the holder's blocks too";
}

TEST(ServeRejects, TooLongRequestsAreNamedAndTheRestServed) {
    Rig rig(64);
    kv::Trace t;
    t.requests = {request(0, 5, 4), request(0, 50, 30, 7), request(1, 6, 3, 20)};  // the second: 80 positions
    kv::ContiguousStore slots(rig.g, 1, 64);
    auto d0 = rig.decoder(slots, 64);
    const auto s = kv::serve_static(t, slots, d0);
    ASSERT_EQ(s.rejections.size(), 1u);
    EXPECT_NE(s.rejections[0].find("request 1: 80 positions"), std::string::npos) << s.rejections[0];
    EXPECT_NE(s.rejections[0].find("max_len = 64"), std::string::npos) << s.rejections[0];
    EXPECT_EQ(s.counters.at("rejected"), 1);
    EXPECT_EQ(s.series.at("rejected_requests"), std::vector<double>{1});
    EXPECT_TRUE(s.tokens[1].empty());
    EXPECT_EQ(s.tokens[2].size(), 3u);

    kv::PagedStore pool(rig.g, 4, 4);  // 64 positions
    auto d1 = rig.decoder(pool, 128);
    const auto c = kv::serve_continuous(t, pool, d1, 128);
    ASSERT_EQ(c.rejections.size(), 1u);
    EXPECT_NE(c.rejections[0].find("80 positions exceed the pool of 4 blocks of 16"), std::string::npos) << c.rejections[0];
    EXPECT_EQ(c.tokens[0], s.tokens[0]);
    EXPECT_EQ(c.tokens[2], s.tokens[2]);

    // Through the op: the oracle rejects it too, so both rungs pass.
    const mw::Op* op = mw::find_op("serve");
    mw::Problem p = kv::serve_problem(shape(3, 9, 64, 1, 0, 0), t);
    const auto oracle = op->oracle(p);
    for (const auto* v : mw::variants_of("serve", mw::Backend::cpu)) {
        const auto r = mw::check_variant(*op, *v, p, oracle);
        EXPECT_TRUE(r.correct) << v->name << ": " << r.message;
        EXPECT_EQ(p.out("tokens").as<std::int32_t>()[30], -1) << "the rejected request's row stays -1";
    }
}

TEST(ServeRejects, ImpossibleShapesAreRefused) {
    const mw::Op* op = mw::find_op("serve");
    EXPECT_EQ(op->validate(op->default_shape), "");
    EXPECT_EQ(op->validate(op->quick_shape), "");
    // 8 MiB = 2048 positions: not one request of 4096.
    const std::string e = op->validate(shape(64, 500, 4096, 8, 64, 1));
    EXPECT_NE(e.find("budget_mib = 8"), std::string::npos) << e;
    EXPECT_NE(e.find("2048 positions"), std::string::npos) << e;
    EXPECT_NE(e.find("max_len = 4096"), std::string::npos) << e;
    EXPECT_NE(op->validate(shape(64, 4096, 4096, 64, 0, 1)).find("mean_len = 4096"), std::string::npos);
    EXPECT_NE(op->validate(shape(64, 50, 4096, 64, 48, 1)).find("shared = 48"), std::string::npos);
    EXPECT_NE(op->validate(shape(0, 50, 4096, 64, 0, 1)).find("requests = 0"), std::string::npos);
}

TEST(ServeOp, UnitFlopsCountersAndSeries) {
    const mw::Op* op = mw::find_op("serve");
    const auto s = shape(4, 20, 64, 1, 4, 3);
    const auto t = kv::make_trace(kv::trace_spec(s));
    double tokens = 0, flops = 0;
    for (const auto& r : t.requests) tokens += r.output, flops += kv::forward_flops(r.length() - 1);
    EXPECT_EQ(op->unit.name, "tokens");
    EXPECT_EQ(op->unit.per_call(s), tokens);
    EXPECT_DOUBLE_EQ(op->flops(s), flops);
    mw::Problem p = op->make_problem(s, mw::DType::f32, 42);
    for (const auto* v : mw::variants_of("serve", mw::Backend::cpu)) {
        auto inst = v->prepare(p);
        inst.run();
        inst.run();  // re-runnable: the store is left as it was found
        const auto k = inst.counters();
        for (const char* name : {"admitted_max", "admitted_mean", "kv_wasted_bytes_mean", "kv_wasted_per_seq_blocks",
                                 "kv_reserved_mean", "tokens_per_s", "ttft_p50_ms", "ttft_p99_ms", "itl_p50_ms",
                                 "itl_p99_ms", "iterations", "rejected"})
            EXPECT_TRUE(k.count(name)) << v->name << " " << name;
        ASSERT_TRUE(inst.series) << v->name;
        EXPECT_FALSE(inst.series().at("admitted").empty()) << v->name;
    }
}

}  // namespace
