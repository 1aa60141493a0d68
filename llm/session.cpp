// Session: KV caches and the positions of a batch of sequences (model.hpp).
#include <algorithm>
#include <cmath>

#include "model_impl.hpp"

namespace tinyfin::llm {

struct Session::State {
    int64_t batch = 0, context = 0, length = 0;
    std::vector<int64_t> pad;  // left padding of each sequence (cache slots it never attends)
    KVCache cache;
    Tensor cos, sin;
};

Session::Session(const Model &model, int64_t batch, int64_t context)
    : model_(&model), state_(std::make_unique<State>()) {
    const Model::Impl &m = model.impl();
    if (batch < 1 || batch > 4096)
        throw ValueError("ValueError: Session: batch " + std::to_string(batch) + " must be in [1, 4096]");
    if (context < 1 || context > (int64_t{1} << 24))
        throw ValueError("ValueError: Session: context " + std::to_string(context) + " must be in [1, 2^24]");
    state_->batch = batch;
    state_->context = context;
    state_->pad.assign(static_cast<std::size_t>(batch), 0);
    const ModelConfig &c = m.config;
    const DType kv = m.options.kv_cache_dtype;
    for (int64_t l = 0; l < c.num_layers; ++l) {
        state_->cache.k.push_back(zeros({batch, c.num_kv_heads, context, c.head_dim}, kv, m.device));
        state_->cache.v.push_back(zeros({batch, c.num_kv_heads, context, c.head_dim}, kv, m.device));
    }
    std::tie(state_->cos, state_->sin) = m.rope_tables(context);
}

Session::~Session() = default;
Session::Session(Session &&) noexcept = default;
Session &Session::operator=(Session &&) noexcept = default;

int64_t Session::batch() const { return state_->batch; }
int64_t Session::context() const { return state_->context; }
int64_t Session::length() const { return state_->length; }

void Session::reset() {
    state_->length = 0;
    std::fill(state_->pad.begin(), state_->pad.end(), 0);
}

namespace {

// Runs ids [B, T] (row-major host ids) at cache slots start..start+T-1 and returns hidden [B, T, H].
Tensor run(const Model::Impl &m, Session::State &s, const std::vector<int64_t> &ids, int64_t t) {
    const int64_t b = s.batch, start = s.length, total = start + t;
    if (total > s.context)
        throw ValueError("ValueError: the session's context of " + std::to_string(s.context) + " tokens is full (" +
                         std::to_string(start) + " used, " + std::to_string(t) +
                         " more asked); load with a larger context");
    std::vector<int64_t> rope_index(static_cast<std::size_t>(b * t));
    bool padded = false;
    for (int64_t i = 0; i < b; ++i) {
        padded = padded || s.pad[static_cast<std::size_t>(i)] > 0;
        for (int64_t j = 0; j < t; ++j)
            rope_index[static_cast<std::size_t>(i * t + j)] =
                std::max<int64_t>(0, start + j - s.pad[static_cast<std::size_t>(i)]);
    }
    const int64_t window = m.config.sliding_window;
    const bool windowed = window > 0 && total > window;
    Tensor mask;
    if (padded || windowed) {
        // Query slot q sees key slot k when pad <= k <= q and, with a sliding window, q - k < window.
        // A padding slot sees itself, so that its (unused) values stay finite: a NaN value in
        // the cache would poison every query, as 0 * NaN is NaN.
        std::vector<float> mv(static_cast<std::size_t>(b * t * total));
        for (int64_t i = 0; i < b; ++i)
            for (int64_t j = 0; j < t; ++j) {
                const int64_t q = start + j;
                for (int64_t k = 0; k < total; ++k) {
                    const bool visible =
                        k <= q && k >= s.pad[static_cast<std::size_t>(i)] && (window == 0 || q - k < window);
                    const bool own_pad = q < s.pad[static_cast<std::size_t>(i)] && k == q;
                    mv[static_cast<std::size_t>((i * t + j) * total + k)] = visible || own_pad ? 0.0f : -INFINITY;
                }
            }
        mask = from_vector(mv, {b, 1, 1, t, total}, m.device);
    }
    const Tensor ids_t = from_vector(ids, {b, t}, m.device);
    const Tensor rope_t = from_vector(rope_index, {b, t}, m.device);
    Tensor hidden = m.forward(ids_t, rope_t, mask, s.cache, start, s.cos, s.sin);
    s.length = total;
    return hidden;
}

}  // namespace

Tensor Session::prefill(const std::vector<std::vector<int32_t>> &prompts) {
    const Model::Impl &m = model_->impl();
    State &s = *state_;
    if (static_cast<int64_t>(prompts.size()) != s.batch)
        throw ValueError("ValueError: prefill: " + std::to_string(prompts.size()) + " prompts for a session of batch " +
                         std::to_string(s.batch));
    std::size_t longest = 0;
    for (const auto &p : prompts) longest = std::max(longest, p.size());
    if (longest == 0) throw ValueError("ValueError: prefill: every prompt is empty");
    for (const auto &p : prompts) {
        if (p.empty())
            throw ValueError("ValueError: prefill: a prompt is empty (each sequence needs at least one token)");
        if (s.length > 0 && p.size() != longest)
            throw ValueError(
                "ValueError: prefill: after the first prefill, every sequence must append the same number of tokens");
        for (int32_t id : p)
            if (id < 0 || id >= m.config.vocab_size)
                throw ValueError("ValueError: prefill: token id " + std::to_string(id) +
                                 " is outside the vocabulary [0, " + std::to_string(m.config.vocab_size) + ")");
    }
    if (s.length == 0)
        for (std::size_t i = 0; i < prompts.size(); ++i) s.pad[i] = static_cast<int64_t>(longest - prompts[i].size());
    if (s.length + static_cast<int64_t>(longest) > s.context)
        throw ValueError("ValueError: prefill: " + std::to_string(longest) +
                         " prompt tokens do not fit the context of " + std::to_string(s.context) + " (" +
                         std::to_string(s.length) + " used)");
    const auto chunk = static_cast<std::size_t>(std::max<int64_t>(1, m.options.prefill_chunk));
    Tensor last;
    for (std::size_t c0 = 0; c0 < longest; c0 += chunk) {
        const std::size_t t = std::min(chunk, longest - c0);
        std::vector<int64_t> ids(static_cast<std::size_t>(s.batch) * t);
        for (std::size_t i = 0; i < prompts.size(); ++i) {
            const std::size_t pad = longest - prompts[i].size();
            for (std::size_t j = 0; j < t; ++j) {
                const std::size_t at = c0 + j;
                ids[i * t + j] = at < pad ? 0 : prompts[i][at - pad];
            }
        }
        Tensor hidden = run(m, s, ids, static_cast<int64_t>(t));
        if (c0 + t >= longest) last = narrow(hidden, 1, static_cast<int64_t>(t) - 1, 1);
    }
    return m.head(last).reshape({s.batch, m.config.vocab_size});
}

Tensor Session::decode(const std::vector<int32_t> &tokens) {
    const Model::Impl &m = model_->impl();
    State &s = *state_;
    if (static_cast<int64_t>(tokens.size()) != s.batch)
        throw ValueError("ValueError: decode: " + std::to_string(tokens.size()) + " tokens for a session of batch " +
                         std::to_string(s.batch));
    std::vector<int64_t> ids(tokens.size());
    for (std::size_t i = 0; i < tokens.size(); ++i) {
        if (tokens[i] < 0 || tokens[i] >= m.config.vocab_size)
            throw ValueError("ValueError: decode: token id " + std::to_string(tokens[i]) +
                             " is outside the vocabulary");
        ids[i] = tokens[i];
    }
    return m.head(run(m, s, ids, 1)).reshape({s.batch, m.config.vocab_size});
}

}  // namespace tinyfin::llm
