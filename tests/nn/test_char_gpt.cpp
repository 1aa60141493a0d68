// The char_gpt example's pieces: the corpus loader, the model's gradients against finite
// differences, training on a fixed batch, KV-cached decoding against recomputing the prefix,
// seeded sampling and the memory estimate against the measured peak.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <unistd.h>

#include "corpus.hpp"
#include "model.hpp"

using namespace tinyfin;
namespace fs = std::filesystem;

namespace {

// A fresh directory under the build tree's temporary space, removed at the end.
struct TempDir {
    fs::path path;
    TempDir() {
        path = fs::temp_directory_path() /
               ("tinyfin-chargpt-" + std::to_string(getpid()) + "-" + std::to_string(counter()++));
        fs::create_directories(path);
    }
    ~TempDir() {
        std::error_code ec;
        fs::remove_all(path, ec);
    }
    void write(const std::string &name, const std::string &text) const {
        std::ofstream(path / name, std::ios::binary) << text;
    }
    static int &counter() {
        static int n = 0;
        return n;
    }
};

chargpt::Config micro_config() {
    chargpt::Config c;
    c.vocab = 7;
    c.context = 5;
    c.dim = 8;
    c.layers = 2;
    c.heads = 2;
    return c;
}

Tensor tokens(const std::vector<int32_t> &values, int64_t b, int64_t t) { return from_vector(values, {b, t}); }

}  // namespace

TEST_CASE("corpus: text files only, byte vocabulary, 90/10 split") {
    TempDir d;
    d.write("b", "hello world\n%\n");
    d.write("a", "abc\n");
    d.write("a.dat", std::string("\x01\x02\xff", 3));
    fs::create_symlink(d.path / "a", d.path / "a.u8");
    chargpt::Corpus c = chargpt::load_corpus(d.path.string(), 8);
    REQUIRE(c.files.size() == 2);
    CHECK(fs::path(c.files[0]).filename() == "a");
    CHECK(c.size() == 18);
    CHECK(c.vocab == std::string("\n %abcdehlorw"));
    // " " (32) sorts before "%" (37): the vocabulary is in byte order.
    std::string sorted = c.vocab;
    std::sort(sorted.begin(), sorted.end());
    CHECK(c.vocab == sorted);
    CHECK(c.train.size() == 16);  // floor(0.9 * 18)
    CHECK(c.val.size() == 2);
    std::vector<int32_t> all = c.train;
    all.insert(all.end(), c.val.begin(), c.val.end());
    CHECK(chargpt::decode(c.vocab, all) == "abc\nhello world\n%\n");
    CHECK_THROWS_AS(chargpt::encode(c.vocab, "xyz"), chargpt::CorpusError);
}

TEST_CASE("corpus: missing, index-only and empty directories are clear errors") {
    TempDir d;
    auto message = [](const std::string &dir, int64_t min_chars) {
        try {
            chargpt::load_corpus(dir, min_chars);
        } catch (const chargpt::CorpusError &e) {
            return std::string(e.what());
        }
        return std::string("no error");
    };
    std::string missing = message((d.path / "nope").string(), 1);
    CHECK(missing.find("not found") != std::string::npos);
    CHECK(missing.find("fortunes") != std::string::npos);
    d.write("x.dat", "index");
    CHECK(message(d.path.string(), 1).find("no fortune text files") != std::string::npos);
    d.write("empty", "");
    d.write("empty2", "");
    std::string empty = message(d.path.string(), 1);
    CHECK(empty.find("hold 0 bytes") != std::string::npos);
    d.write("short", "ab");
    CHECK(message(d.path.string(), 100).find("fewer than the 100") != std::string::npos);
}

TEST_CASE("char_gpt: gradients of a micro GPT match central finite differences") {
    chargpt::GPT model(micro_config(), 3);
    Tensor x = tokens({1, 2, 3, 4, 5, 6, 0, 1}, 2, 4);
    Tensor y = from_vector(std::vector<int32_t>{2, 3, 4, 5, 0, 1, 2, 3}, {8});
    auto loss_of = [&] { return cross_entropy(model(x), y); };
    model.zero_grad();
    loss_of().backward();
    // A few elements of every parameter; f32 central differences with h = 1e-2.
    int checked = 0;
    for (auto &[name, p] : model.named_parameters()) {
        std::vector<float> values = p.to_vector<float>();
        std::vector<float> grad = p.grad().to_vector<float>();
        for (std::size_t i = 0; i < values.size(); i += std::max<std::size_t>(1, values.size() / 3)) {
            const float h = 1e-2f;
            auto loss_at = [&](float v) {
                std::vector<float> moved = values;
                moved[i] = v;
                NoGradGuard no_grad;
                Tensor target = p;
                target.assign_(from_vector(moved, p.shape()));
                return static_cast<double>(loss_of().item<float>());
            };
            double numeric = (loss_at(values[i] + h) - loss_at(values[i] - h)) / (2 * h);
            {
                NoGradGuard no_grad;
                Tensor target = p;
                target.assign_(from_vector(values, p.shape()));
            }
            INFO(name << "[" << i << "]: analytic " << grad[i] << ", numeric " << numeric);
            CHECK(std::abs(grad[i] - numeric) <= 2e-3 + 2e-2 * std::abs(numeric));
            ++checked;
        }
    }
    CHECK(checked > 40);
}

TEST_CASE("char_gpt: loss falls on a fixed batch") {
    chargpt::GPT model(micro_config(), 5);
    Tensor x = tokens({1, 2, 3, 4, 5, 6, 0, 1}, 2, 4);
    Tensor y = from_vector(std::vector<int32_t>{2, 3, 4, 5, 0, 1, 2, 3}, {8});
    optim::AdamW opt(optim::decay_matrices_only(model.parameters(), 0.1), 1e-2);
    double first = 0, last = 0;
    for (int step = 0; step < 30; ++step) {
        opt.zero_grad();
        Tensor loss = cross_entropy(model(x), y);
        loss.backward();
        nn::clip_grad_norm(opt.params(), 1.0);
        opt.step();
        (step == 0 ? first : last) = loss.item<float>();
    }
    INFO("first " << first << ", last " << last);
    CHECK(first > 1.5);  // about log(7) = 1.95 at the start
    CHECK(last < 0.5 * first);
}

TEST_CASE("char_gpt: KV-cached decoding gives the logits of recomputing the prefix") {
    chargpt::Config c = micro_config();
    chargpt::GPT model(c, 11);
    model.eval();
    std::vector<int32_t> seq{3, 1, 4, 1, 5};
    NoGradGuard no_grad;
    std::vector<float> full = model(tokens(seq, 1, 5)).to_vector<float>();  // [5, V]
    SUBCASE("one token at a time") {
        chargpt::KVCache cache = model.make_cache(1);
        for (std::size_t t = 0; t < seq.size(); ++t) {
            std::vector<float> step = model.forward_cached(tokens({seq[t]}, 1, 1), cache).to_vector<float>();
            for (int64_t v = 0; v < c.vocab; ++v) {
                INFO("position " << t << ", token " << v);
                CHECK(step[v] == doctest::Approx(full[t * c.vocab + v]).epsilon(1e-5).scale(1));
            }
        }
        CHECK(cache.length == 5);
        CHECK_THROWS_AS(model.forward_cached(tokens({1}, 1, 1), cache), ValueError);
    }
    SUBCASE("a prefill of three, then two single tokens") {
        chargpt::KVCache cache = model.make_cache(1);
        std::vector<float> pre = model.forward_cached(tokens({3, 1, 4}, 1, 3), cache).to_vector<float>();
        std::vector<float> a = model.forward_cached(tokens({1}, 1, 1), cache).to_vector<float>();
        std::vector<float> b = model.forward_cached(tokens({5}, 1, 1), cache).to_vector<float>();
        pre.insert(pre.end(), a.begin(), a.end());
        pre.insert(pre.end(), b.begin(), b.end());
        REQUIRE(pre.size() == full.size());
        for (std::size_t i = 0; i < full.size(); ++i) CHECK(pre[i] == doctest::Approx(full[i]).epsilon(1e-5).scale(1));
    }
}

TEST_CASE("char_gpt: sampling is deterministic under a seed") {
    chargpt::GPT model(micro_config(), 2);
    chargpt::SampleOptions o;
    o.tokens = 12;  // longer than the context of 5: the cache is refilled
    o.temperature = 1.0;
    o.seed = 42;
    auto a = chargpt::sample(model, {1, 2}, o).tokens;
    auto b = chargpt::sample(model, {1, 2}, o).tokens;
    CHECK(a == b);
    CHECK(a.size() == 12);
    o.seed = 43;
    std::vector<std::vector<int32_t>> others;
    bool differs = false;
    for (uint64_t s = 43; s < 48 && !differs; ++s) {
        o.seed = s;
        differs = chargpt::sample(model, {1, 2}, o).tokens != a;
    }
    CHECK(differs);
    CHECK(model.is_training());  // sample() restores the mode
    // Greedy and top-k 1 pick the argmax.
    std::vector<float> logits{0.1f, 2.0f, -1.0f, 1.9f};
    CHECK(chargpt::pick_token(logits, 0, 0, 0.7) == 1);
    CHECK(chargpt::pick_token(logits, 1.0, 1, 0.99) == 1);
    // Top-k 2 at temperature 1: p(1) = e^2 / (e^2 + e^1.9) = 0.525; u below picks 1, above 3.
    CHECK(chargpt::pick_token(logits, 1.0, 2, 0.5) == 1);
    CHECK(chargpt::pick_token(logits, 1.0, 2, 0.6) == 3);
}

TEST_CASE("char_gpt: the memory estimate is within 20% of the measured peak") {
    for (const char *name : {"tiny", "small", "default"}) {
        chargpt::Config c = chargpt::config_named(name, 96);
        const int64_t batch = 8;
        synchronize();
        reset_stats();
        uint64_t before = 0;
        for (const Stats::Backend &b : stats().backends) before += b.bytes_in_use;
        {
            chargpt::GPT model(c, 1);
            optim::AdamW opt(optim::decay_matrices_only(model.parameters(), 0.1), 1e-3);
            std::vector<int32_t> x(static_cast<std::size_t>(batch * c.context));
            for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<int32_t>(i * 7 % 96);
            Tensor xt = from_vector(x, {batch, c.context});
            Tensor yt = from_vector(x, {batch * c.context});
            for (int step = 0; step < 2; ++step) {
                opt.zero_grad();
                Tensor loss = cross_entropy(model(xt), yt);
                loss.backward();
                nn::clip_grad_norm(opt.params(), 1.0);
                opt.step();
            }
        }
        uint64_t peak = 0;
        for (const Stats::Backend &b : stats().backends) peak = std::max(peak, b.peak_bytes_in_use);
        const double measured = static_cast<double>(peak - before);
        const double estimate = static_cast<double>(chargpt::training_bytes(c, batch));
        INFO(std::string(name) << ": estimate " << estimate << " bytes, measured peak " << measured);
        CHECK(estimate >= 0.8 * measured);
        CHECK(estimate <= 1.2 * measured);
    }
}
