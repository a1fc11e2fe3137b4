// The model stack's training loop and model files: a short run's loss falls;
// a run stopped, saved with its optimizer state, loaded and resumed ends
// bit-identical to the run that never stopped; model files round-trip, and
// a truncated file, a wrong shape or dtype, a missing or unknown tensor and a
// bad configuration are refused with the tensor or field named.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "model/safetensors.hpp"
#include "model/trainer.hpp"
#include "model/checkpoint.hpp"
#include "model/model.hpp"

namespace {

namespace fs = std::filesystem;
using mw::model::Config;

Config small() {
    Config c;
    c.d_model = 32, c.layers = 2, c.heads = 4, c.kv_heads = 2, c.d_ff = 48, c.vocab = 256, c.max_seq = 32;
    return c;
}

// A learnable stream: a short English sentence repeated, with a varying digit.
std::vector<int> stream(int n, int salt) {
    std::vector<int> t;
    for (int i = 0; t.size() < std::size_t(n); ++i) {
        const std::string s = "the quick brown fox " + std::to_string((i * 7 + salt) % 10) + " jumps. ";
        for (unsigned char ch : s) t.push_back(ch);
    }
    t.resize(std::size_t(n));
    return t;
}

class ModelFiles : public ::testing::Test {
protected:
    void SetUp() override {
        dir_ = fs::temp_directory_path() /
               ("memwall-model-" + std::to_string(::getpid()) + "-" +
                ::testing::UnitTest::GetInstance()->current_test_info()->name());
        fs::create_directories(dir_);
    }
    void TearDown() override { fs::remove_all(dir_); }
    fs::path dir_;
};

mw::model::TrainOptions options() {
    mw::model::TrainOptions o;
    o.batch = 4, o.seq = 32, o.steps = 40, o.warmup = 5, o.lr = 3e-3f, o.min_lr = 3e-4f, o.eval_every = 0;
    o.eval_windows = 4;
    return o;
}

TEST(ModelTraining, LossFalls) {
    const auto tr = stream(20000, 0), va = stream(4000, 3);
    mw::model::Trainer t(options(), tr, va);
    mw::model::TrainState s(small(), 1);
    std::vector<double> loss;
    double val = 0;
    t.run(s, 40, [&](const mw::model::StepRecord& r) { loss.push_back(r.loss); return true; },
          [&](const mw::model::EvalRecord& e) { val = e.val_loss; });
    ASSERT_EQ(loss.size(), 40u);
    EXPECT_GT(loss.front(), 5.0);              // ~ln 256 at initialization
    EXPECT_LT(loss.back(), loss.front() - 2);  // the repeated text is learned fast
    EXPECT_LT(val, 3.6);                       // and carries over to held-out text (5.5 at the start)
}

TEST(ModelTraining, LearningRateScheduleWarmsUpThenDecays) {
    auto o = options();
    EXPECT_FLOAT_EQ(mw::model::lr_at(o, 0), o.lr / 5);
    EXPECT_FLOAT_EQ(mw::model::lr_at(o, 4), o.lr);
    EXPECT_NEAR(mw::model::lr_at(o, o.steps), o.min_lr, 1e-9);
    EXPECT_GT(mw::model::lr_at(o, 10), mw::model::lr_at(o, 20));
}

TEST_F(ModelFiles, ResumedRunIsBitIdentical) {
    const auto tr = stream(20000, 0), va = stream(4000, 3);
    auto nop_step = [](const mw::model::StepRecord&) { return true; };
    auto nop_eval = [](const mw::model::EvalRecord&) {};
    mw::model::TrainState straight(small(), 2);
    mw::model::Trainer(options(), tr, va).run(straight, 12, nop_step, nop_eval);

    mw::model::TrainState first(small(), 2);
    mw::model::Trainer(options(), tr, va).run(first, 7, nop_step, nop_eval);
    mw::model::ModelFile f;
    f.config = first.config, f.params = first.params, f.optimizer = first.opt;
    mw::model::save_model(dir_ / "state.safetensors", f);

    const auto back = mw::model::load_model(dir_ / "state.safetensors");
    ASSERT_TRUE(back.optimizer.has_value());
    mw::model::TrainState resumed(small(), 99);  // a different init, overwritten by the file
    resumed.params = back.params;
    resumed.opt = *back.optimizer;
    EXPECT_EQ(resumed.opt.step, 7);
    mw::model::Trainer(options(), tr, va).run(resumed, 12, nop_step, nop_eval);
    ASSERT_EQ(resumed.params.size(), straight.params.size());
    EXPECT_EQ(0, std::memcmp(resumed.params.data(), straight.params.data(), straight.params.size() * sizeof(float)))
        << "the resumed run's weights differ from the uninterrupted run's";
    EXPECT_EQ(resumed.opt.m, straight.opt.m);
    EXPECT_EQ(resumed.opt.v, straight.opt.v);
}

TEST_F(ModelFiles, RoundTripKeepsConfigAndWeights) {
    Config c = small();
    c.kv_heads = 1, c.rope_base = 5000, c.norm_eps = 1e-6;
    mw::model::ModelFile f;
    f.config = c, f.params = mw::model::init_params(c, 3), f.info = {{"note", "hello"}};
    mw::model::save_model(dir_ / "m.safetensors", f);
    const auto back = mw::model::load_model(dir_ / "m.safetensors");
    EXPECT_EQ(back.config, c);
    EXPECT_EQ(back.params, f.params);
    EXPECT_FALSE(back.optimizer.has_value());
    EXPECT_EQ(back.info.at("note"), "hello");
    // Other tools see the weights under their names and shapes.
    const auto st = mw::st::load(dir_ / "m.safetensors");
    const auto* wq = st.find("layers.1.wq");
    ASSERT_NE(wq, nullptr);
    EXPECT_EQ(wq->shape, (std::vector<std::int64_t>{32, 32}));
}

// Every refusal names what is wrong, and is a UsageError (exit status 2).
void expect_refused(const fs::path& p, const std::string& needle) {
    try {
        mw::model::load_model(p);
        ADD_FAILURE() << "loaded " << p << " (expected an error naming " << needle << ")";
    } catch (const mw::UsageError& e) {
        EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
}

TEST_F(ModelFiles, BadFilesAreRefusedNamingTheTensor) {
    const Config c = small();
    mw::model::ModelFile f;
    f.config = c, f.params = mw::model::init_params(c, 3);
    mw::model::save_model(dir_ / "good.safetensors", f);
    const auto good = mw::st::load(dir_ / "good.safetensors");

    expect_refused(dir_ / "absent.safetensors", "absent.safetensors");
    {  // truncated: the last bytes of the last tensor are gone
        std::ifstream in(dir_ / "good.safetensors", std::ios::binary);
        std::string bytes((std::istreambuf_iterator<char>(in)), {});
        std::ofstream(dir_ / "short.safetensors", std::ios::binary) << bytes.substr(0, bytes.size() - 10);
        expect_refused(dir_ / "short.safetensors", "short.safetensors");
    }
    auto edited = [&](const std::string& name, auto edit) {
        mw::st::File g = good;
        edit(g);
        mw::st::save(dir_ / name, g);
        return dir_ / name;
    };
    auto tensor = [](mw::st::File& g, const std::string& n) -> mw::st::Tensor& {
        for (auto& t : g.tensors)
            if (t.name == n) return t;
        throw std::logic_error("no tensor " + n);
    };
    expect_refused(edited("shape.safetensors", [&](mw::st::File& g) {
                       auto& t = tensor(g, "layers.0.wk");
                       t.shape = {16, 32};  // same bytes, transposed shape
                   }),
                   "layers.0.wk");
    expect_refused(edited("dtype.safetensors", [&](mw::st::File& g) {
                       auto& t = tensor(g, "layers.1.w2");
                       t.dtype = mw::st::DType::I32;  // same size, wrong type
                   }),
                   "layers.1.w2");
    expect_refused(edited("missing.safetensors", [&](mw::st::File& g) {
                       std::erase_if(g.tensors, [](const auto& t) { return t.name == "final_norm"; });
                   }),
                   "final_norm");
    expect_refused(edited("extra.safetensors", [&](mw::st::File& g) {
                       const float one = 1;
                       g.tensors.push_back(mw::st::make_f32("layers.7.wq", {1}, {&one, 1}));
                   }),
                   "layers.7.wq");
    expect_refused(edited("config.safetensors", [&](mw::st::File& g) { g.metadata["kv_heads"] = "3"; }), "kv_heads");
    expect_refused(edited("format.safetensors", [&](mw::st::File& g) { g.metadata.erase("format"); }), "format");
}

}  // namespace
