// tinyfin — neural-network layer: modules, initialisers, optimizers, serialization.
//
// Everything here is built from the ops of tinyfin.hpp, so it runs on whatever device the
// parameters live on (default_device() unless moved with Module::to). Parameters are leaf
// tensors with requires_grad; initialisers and optimizers update them in place with assign_
// under NoGradGuard, so every handle to a parameter (the module's, the optimizer's) sees the
// new values. Randomness is seeded explicitly: the same seeds give the same model and the same
// dropout masks on every backend.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "tinyfin/tinyfin.hpp"

namespace tinyfin::nn {

using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

// What Module::load_state_dict found besides the tensors it loaded (torch's
// _IncompatibleKeys): parameters the dict lacks, and dict names that are no parameter.
struct LoadStateDictResult {
    std::vector<std::string> missing_keys;
    std::vector<std::string> unexpected_keys;
};

// ---- Module -----------------------------------------------------------------------------

// A layer or a composition of layers. A module owns its parameters (registered with
// register_parameter) and its children (register_module); parameters() and
// named_parameters() walk both in registration order, so the order and the dotted names
// ("0.weight", "encoder.2.bias") are stable for a given model definition. Modules are not
// copyable: the registry points at the subclass's members.
class Module {
public:
    Module() = default;
    Module(const Module &) = delete;
    Module &operator=(const Module &) = delete;
    virtual ~Module() = default;

    virtual Tensor forward(const Tensor &x) = 0;
    Tensor operator()(const Tensor &x) { return forward(x); }

    // A short description ("Linear(784, 128, bias=true)").
    virtual std::string describe() const = 0;

    // Own parameters first, then each child's, recursively.
    std::vector<Tensor> parameters() const;
    NamedTensors named_parameters() const;
    // Direct children with their names.
    const std::vector<std::pair<std::string, std::shared_ptr<Module>>> &children() const { return children_; }
    // Total element count of parameters().
    int64_t parameter_count() const;

    // Training mode (dropout active) or evaluation mode; applies to every child.
    void train(bool on = true);
    void eval() { train(false); }
    bool is_training() const { return training_; }

    // Moves every parameter (and its grad) to device in place (Tensor::set_data): the same
    // tensors, so an optimizer built before the move keeps updating them, as in PyTorch.
    void to(const Device &device);

    // Sets every parameter's gradient to undefined.
    void zero_grad();

    // Every parameter by its dotted name, detached (same storage: the values are live, no copy),
    // in named_parameters() order; save(path, module.state_dict()) writes it.
    NamedTensors state_dict() const;
    // Copies the dict's tensors into the parameters of the same name in place (assign_ under
    // NoGradGuard, on each parameter's device; the dict may live on any device and a float dict
    // is cast to the parameter's dtype only when both are float). Every name that matches must
    // have the parameter's shape. Throws ValueError listing every missing key, unexpected key and
    // shape or dtype mismatch together; without strict, missing and unexpected keys are returned
    // instead, and mismatches still throw. Nothing is loaded when it throws.
    LoadStateDictResult load_state_dict(const NamedTensors &dict, bool strict = true);

protected:
    // Registers a member tensor as a parameter (marked requires_grad). The member must outlive
    // the registration (it is a member of this module); an undefined tensor is skipped.
    void register_parameter(std::string name, Tensor &member);
    // Registers a child; returns it for chaining.
    std::shared_ptr<Module> register_module(std::string name, std::shared_ptr<Module> child);

private:
    void collect(const std::string &prefix, NamedTensors &out) const;

    std::vector<std::pair<std::string, Tensor *>> params_;
    std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
    bool training_ = true;
};

// y = x weight^T + bias; x [..., in] -> [..., out]. weight [out, in], bias [out].
// Initialised like torch.nn.Linear: weight and bias ~ U(-1/sqrt(in), 1/sqrt(in)).
class Linear : public Module {
public:
    Linear(int64_t in_features, int64_t out_features, bool bias = true, uint64_t seed = 0);
    Tensor forward(const Tensor &x) override;
    std::string describe() const override;

    Tensor weight;
    Tensor bias;  // undefined without bias

private:
    int64_t in_, out_;
};

// 2-D convolution over [N, in, H, W]; weight [out, in/groups, kh, kw], bias [out]. Initialised
// like torch.nn.Conv2d: U(-1/sqrt(fan_in), 1/sqrt(fan_in)) with fan_in = in/groups * kh * kw.
class Conv2d : public Module {
public:
    // A square kernel (kernel_size x kernel_size).
    Conv2d(int64_t in_channels, int64_t out_channels, int kernel_size, const Conv2dOptions &options = {},
           bool bias = true, uint64_t seed = 0);
    // A rectangular kernel {kh, kw}.
    Conv2d(int64_t in_channels, int64_t out_channels, std::pair<int, int> kernel_size,
           const Conv2dOptions &options = {}, bool bias = true, uint64_t seed = 0);
    Tensor forward(const Tensor &x) override;
    std::string describe() const override;

    Tensor weight;
    Tensor bias;
    Conv2dOptions options;

private:
    int64_t in_, out_;
    int kernel_h_, kernel_w_;
};

// Max pooling with a square window; stride 0 means the kernel size. The options form takes
// everything max_pool2d does (dilation, ceil_mode): MaxPool2d(Pool2dOptions{}.kernel(3).stride(2)).
class MaxPool2d : public Module {
public:
    explicit MaxPool2d(int kernel_size, int stride = 0, int padding = 0);
    explicit MaxPool2d(const Pool2dOptions &options) : options(options) {}
    Tensor forward(const Tensor &x) override;
    std::string describe() const override;

    Pool2dOptions options;
};

class ReLU : public Module {
public:
    Tensor forward(const Tensor &x) override { return relu(x); }
    std::string describe() const override { return "ReLU()"; }
};

// approximate = false: exact (erf); true: tanh approximation.
class GELU : public Module {
public:
    explicit GELU(bool approximate = false) : approximate_(approximate) {}
    Tensor forward(const Tensor &x) override { return gelu(x, approximate_); }
    std::string describe() const override;

private:
    bool approximate_;
};

// Zeroes each element with probability p in training mode and scales the rest by 1/(1-p);
// the identity in evaluation mode. Call k (counting from 0) draws its mask from
// rand(shape, mix(seed, k)), so a run is reproducible on every backend.
class Dropout : public Module {
public:
    explicit Dropout(double p = 0.5, uint64_t seed = 0);
    Tensor forward(const Tensor &x) override;
    std::string describe() const override;

private:
    double p_;
    uint64_t seed_;
    uint64_t calls_ = 0;
};

// Rows of weight [num_embeddings, dim] picked by integer indices [...] -> [..., dim].
// Initialised like torch.nn.Embedding: N(0, 1).
class Embedding : public Module {
public:
    Embedding(int64_t num_embeddings, int64_t dim, uint64_t seed = 0);
    Tensor forward(const Tensor &indices) override { return embedding(weight, indices); }
    std::string describe() const override;

    Tensor weight;

private:
    int64_t num_, dim_;
};

// Normalises over the last axis of size dim: (x - mean) / sqrt(var + eps) * weight + bias with
// the biased variance; weight starts at 1 and bias at 0 (torch.nn.LayerNorm).
class LayerNorm : public Module {
public:
    explicit LayerNorm(int64_t dim, double eps = 1e-5, bool bias = true);
    Tensor forward(const Tensor &x) override { return layer_norm(x, 1, weight, bias, eps_); }
    std::string describe() const override;

    Tensor weight;
    Tensor bias;

private:
    int64_t dim_;
    double eps_;
};

// Collapses axes start_dim..end_dim into one ([N, C, H, W] -> [N, C*H*W] by default).
class Flatten : public Module {
public:
    explicit Flatten(int start_dim = 1, int end_dim = -1) : start_(start_dim), end_(end_dim) {}
    Tensor forward(const Tensor &x) override;
    std::string describe() const override;

private:
    int start_, end_;
};

// Applies its children in order; they are named "0", "1", ...
class Sequential : public Module {
public:
    Sequential() = default;
    // Sequential{std::make_shared<Linear>(4, 8), std::make_shared<ReLU>()}.
    Sequential(std::initializer_list<std::shared_ptr<Module>> modules);
    // The same through make_shared, which cannot forward a brace list:
    // std::make_shared<Sequential>(std::make_shared<Linear>(4, 8), std::make_shared<ReLU>()).
    template <typename... M>
    requires(sizeof...(M) > 0 && (std::is_convertible_v<std::shared_ptr<M>, std::shared_ptr<Module>> &&
                                  ...)) explicit Sequential(std::shared_ptr<M>... modules) {
        (push_back(std::move(modules)), ...);
    }
    void push_back(std::shared_ptr<Module> module);
    std::size_t size() const { return children().size(); }
    Module &operator[](std::size_t index) const;
    Tensor forward(const Tensor &x) override;
    // One line per child ("Sequential(\n  (0): Conv2d(...)\n  ...)").
    std::string describe() const override;
};

// ---- Initialisers ---------------------------------------------------------------------------
// Each fills a floating-point tensor in place (assign_ under NoGradGuard, on the tensor's
// device) and returns it. Fans follow PyTorch: for a weight [out, in, k...], fan_in =
// in * prod(k) and fan_out = out * prod(k); rank < 2 is an error for the fan-based ones.

namespace init {

enum class FanMode { fan_in, fan_out };
enum class Nonlinearity { linear, sigmoid, tanh, relu, leaky_relu };

// The recommended gain of torch.nn.init.calculate_gain (param: leaky_relu's negative slope).
double calculate_gain(Nonlinearity nonlinearity, double param = 0.01);
// {fan_in, fan_out} of a weight shape.
std::pair<int64_t, int64_t> fans(const Shape &shape);

Tensor uniform_(const Tensor &t, double low, double high, uint64_t seed);
Tensor normal_(const Tensor &t, double mean, double std, uint64_t seed);
Tensor constant_(const Tensor &t, double value);
Tensor zeros_(const Tensor &t);
Tensor ones_(const Tensor &t);
// U(-bound, bound), bound = gain * sqrt(3 / fan), gain = calculate_gain(nonlinearity, a).
// a = sqrt(5) with leaky_relu is PyTorch's default for Linear and Conv2d weights.
Tensor kaiming_uniform_(const Tensor &t, uint64_t seed, double a = 0, FanMode mode = FanMode::fan_in,
                        Nonlinearity nonlinearity = Nonlinearity::leaky_relu);
// N(0, std^2), std = gain / sqrt(fan).
Tensor kaiming_normal_(const Tensor &t, uint64_t seed, double a = 0, FanMode mode = FanMode::fan_in,
                       Nonlinearity nonlinearity = Nonlinearity::leaky_relu);
// U(-bound, bound), bound = gain * sqrt(6 / (fan_in + fan_out)).
Tensor xavier_uniform_(const Tensor &t, uint64_t seed, double gain = 1);
// N(0, std^2), std = gain * sqrt(2 / (fan_in + fan_out)).
Tensor xavier_normal_(const Tensor &t, uint64_t seed, double gain = 1);

}  // namespace init

// A well-mixed seed for stream `stream` of `seed` (splitmix64 of both); modules use it to give
// each tensor and each dropout call its own random stream.
uint64_t mix_seed(uint64_t seed, uint64_t stream);

// A shuffled order of 0..n-1 for one epoch of (seed, epoch): Fisher-Yates driven by splitmix64,
// the same on every run, machine and thread count. The examples shuffle their data with it, and
// tinyfin-dist's ShardedSampler too, so N ranks see the batches one process would.
std::vector<int64_t> permutation(int64_t n, uint64_t seed, int epoch);

// ---- Training helpers ------------------------------------------------------------------------

// torch.nn.utils.clip_grad_norm_: the global L2 norm of every defined gradient of params taken
// together; when it exceeds max_norm every gradient is scaled by max_norm / (norm + 1e-6). The
// scale is computed on the device (min(1, max_norm / (norm + 1e-6))), so nothing is read back:
// the returned rank-0 f32 tensor is the norm before clipping. Parameters without a gradient are
// skipped; with none at all the norm is 0. The gradients must all be on one device.
Tensor clip_grad_norm(const std::vector<Tensor> &params, double max_norm);

// A learning rate that rises linearly for `warmup` steps and then follows half a cosine from
// max_lr down to min_lr at step `total`, staying at min_lr after (nanoGPT's get_lr):
//   step < warmup:           max_lr * (step + 1) / warmup
//   warmup <= step < total:  min_lr + (max_lr - min_lr) * (1 + cos(pi * r)) / 2,
//                            r = (step - warmup) / (total - warmup)
//   step >= total:           min_lr
struct WarmupCosine {
    double max_lr;
    double min_lr;
    int64_t warmup;
    int64_t total;
    // Throws ValueError for negative rates or steps, or warmup > total.
    WarmupCosine(double max_lr, double min_lr, int64_t warmup, int64_t total);
    double operator()(int64_t step) const;
};

// ---- Serialization -------------------------------------------------------------------------
// The TFNN format (docs/nn.md): "TFNN", version, count, file size, then per tensor its name,
// dtype, shape and raw little-endian data, then a zlib CRC32 of everything before it.

// Writes the tensors to path (through a temporary file renamed into place).
// Throws ValueError naming the file when it cannot be written or two names repeat.
void save(const std::string &path, const NamedTensors &tensors);
void save(const std::string &path, const Module &module);
// Reads path into the given tensors in place, matching by name. Every name must be in the
// file with the same dtype and shape, and the file must hold no other name. Throws ValueError
// naming the file and the problem: missing, not a TFNN file, unsupported version, truncated,
// checksum mismatch, malformed entry, or a name/dtype/shape mismatch.
void load(const std::string &path, const NamedTensors &tensors);
void load(const std::string &path, Module &module);
// Reads every tensor of path as new tensors on device (default_device() when not given).
NamedTensors load_all(const std::string &path, std::optional<Device> device = {});

}  // namespace tinyfin::nn

// ---- Optimizers -------------------------------------------------------------------------------
// Updates run with tensor ops on each parameter's device under NoGradGuard and are written
// with assign_; no value travels to the host. Parameters whose grad is undefined are skipped.

namespace tinyfin::optim {

// Parameters that share settings; a weight decay < 0 means "the optimizer's default".
struct ParamGroup {
    std::vector<Tensor> params;
    double weight_decay = -1;
};

// The usual transformer split: parameters of rank >= 2 (matrices, embeddings) decay with
// weight_decay, vectors (biases, norm gains) do not.
std::vector<ParamGroup> decay_matrices_only(const std::vector<Tensor> &params, double weight_decay);

class Optimizer {
public:
    Optimizer(std::vector<Tensor> params, double lr);
    virtual ~Optimizer() = default;
    Optimizer(const Optimizer &) = delete;
    Optimizer &operator=(const Optimizer &) = delete;

    // Sets every parameter's gradient to undefined (PyTorch's set_to_none).
    void zero_grad();
    virtual void step() = 0;

    double lr() const { return lr_; }
    void set_lr(double lr);
    const std::vector<Tensor> &params() const { return params_; }

protected:
    std::vector<Tensor> params_;
    double lr_;
};

// torch.optim.SGD (dampening 0): g += weight_decay * p; with momentum, buf = g on the first
// step and buf = momentum * buf + g after; g = nesterov ? g + momentum * buf : buf;
// p -= lr * g.
class SGD : public Optimizer {
public:
    SGD(std::vector<Tensor> params, double lr, double momentum = 0, double weight_decay = 0, bool nesterov = false);
    void step() override;

private:
    double momentum_, weight_decay_;
    bool nesterov_;
    std::vector<Tensor> momentum_buffers_;
};

// torch.optim.AdamW: p *= 1 - lr * weight_decay; m = b1 m + (1 - b1) g;
// v = b2 v + (1 - b2) g^2; p -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps).
class AdamW : public Optimizer {
public:
    explicit AdamW(std::vector<Tensor> params, double lr = 1e-3, std::pair<double, double> betas = {0.9, 0.999},
                   double eps = 1e-8, double weight_decay = 0.01);
    // Per-group weight decay (a group with weight_decay < 0 takes weight_decay).
    AdamW(std::vector<ParamGroup> groups, double lr = 1e-3, std::pair<double, double> betas = {0.9, 0.999},
          double eps = 1e-8, double weight_decay = 0.01);
    void step() override;
    // The weight decay of parameter i (in params() order).
    double weight_decay(std::size_t i) const { return decay_[i]; }

private:
    double beta1_, beta2_, eps_;
    std::vector<double> decay_;
    std::vector<Tensor> exp_avg_, exp_avg_sq_;
    std::vector<int64_t> steps_;
};

}  // namespace tinyfin::optim

// ---- Loss scaling (f16 training) --------------------------------------------------------------

namespace tinyfin::nn {

// Dynamic loss scaling for f16 training (torch.cuda.amp.GradScaler's rules): the loss is
// multiplied by scale() before backward so small f16 gradients do not flush to zero; step()
// divides the gradients by the scale and skips the optimizer step when any gradient is inf or
// NaN. update() then halves the scale (backoff_factor) after a skipped step, or doubles it
// (growth_factor) after growth_interval steps in a row without inf/NaN. bf16 and f32 need no
// scaling (construct it disabled: every call then passes through).
//
//   auto loss = scaler.scale(cross_entropy(model.forward(x), y));
//   loss.backward();
//   scaler.step(optimizer);   // unscales, checks, steps or skips
//   scaler.update();
class GradScaler {
public:
    struct Options {
        double init_scale = 65536.0;
        double growth_factor = 2.0;
        double backoff_factor = 0.5;
        int64_t growth_interval = 2000;
        bool enabled = true;
    };
    GradScaler();
    explicit GradScaler(Options options);

    // loss * scale, in loss's dtype (loss itself when disabled).
    Tensor scale(const Tensor &loss) const;
    // Divides every gradient of the optimizer's parameters by the scale, in place, and records
    // whether any is inf or NaN (one host read). At most once per step; step() calls it unless
    // the caller did (to clip gradients between unscale_ and step).
    void unscale_(optim::Optimizer &optimizer);
    // Unscales unless already done, then runs optimizer.step() unless a gradient was inf or NaN.
    // Returns whether the step ran.
    bool step(optim::Optimizer &optimizer);
    // Adjusts the scale after step(), as described above; call once per iteration.
    void update();

    double get_scale() const { return scale_; }
    // Steps since the last backoff or growth.
    int64_t growth_tracker() const { return growth_tracker_; }
    bool enabled() const { return options_.enabled; }
    // Whether the last step() found inf or NaN and skipped.
    bool found_inf() const { return found_inf_; }

    // "<prefix>scale" (f32 rank 0; the scale is a power of two times init_scale) and
    // "<prefix>growth_tracker" (i64 rank 0): save them beside the model and optimizer in one
    // TFNN file (nn::save), read them back from nn::load_all's dict.
    NamedTensors state_dict(const std::string &prefix = "grad_scaler.") const;
    // Reads the two entries of state_dict from dict; ValueError when one is missing or malformed.
    void load_state_dict(const NamedTensors &dict, const std::string &prefix = "grad_scaler.");

private:
    Options options_;
    double scale_;
    int64_t growth_tracker_ = 0;
    bool unscaled_ = false;
    bool found_inf_ = false;
    bool stepped_ = false;
};

}  // namespace tinyfin::nn
