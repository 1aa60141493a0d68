// Modules: the parameter registry of Module, and the layers built on it.
#include <cmath>
#include <string>

#include "../errors.hpp"
#include "tinyfin/nn.hpp"

namespace tinyfin::nn {

using detail::raise;

// ---- Module -------------------------------------------------------------------------------

void Module::register_parameter(std::string name, Tensor &member) {
    if (!member.defined()) return;
    for (const auto &[existing, tensor] : params_)
        if (existing == name) raise<ValueError>("register_parameter: '" + name + "' is already registered");
    member.requires_grad_(true);
    params_.emplace_back(std::move(name), &member);
}

std::shared_ptr<Module> Module::register_module(std::string name, std::shared_ptr<Module> child) {
    if (!child) raise<ValueError>("register_module: child '" + name + "' is null");
    for (const auto &[existing, module] : children_)
        if (existing == name) raise<ValueError>("register_module: '" + name + "' is already registered");
    children_.emplace_back(std::move(name), child);
    return child;
}

void Module::collect(const std::string &prefix, NamedTensors &out) const {
    for (const auto &[name, tensor] : params_) out.emplace_back(prefix + name, *tensor);
    for (const auto &[name, child] : children_) child->collect(prefix + name + ".", out);
}

NamedTensors Module::named_parameters() const {
    NamedTensors out;
    collect("", out);
    return out;
}

std::vector<Tensor> Module::parameters() const {
    std::vector<Tensor> out;
    for (auto &[name, tensor] : named_parameters()) out.push_back(std::move(tensor));
    return out;
}

int64_t Module::parameter_count() const {
    int64_t n = 0;
    for (const Tensor &p : parameters()) n += p.numel();
    return n;
}

void Module::train(bool on) {
    training_ = on;
    for (auto &[name, child] : children_) child->train(on);
}

void Module::to(const Device &device) {
    NoGradGuard no_grad;
    for (auto &[name, tensor] : params_) {
        if (tensor->device() == device) continue;
        // In place (set_data): every handle to the parameter, an optimizer's included, follows.
        Tensor grad = tensor->grad();
        tensor->set_data(tensor->to(device).detach());
        if (grad.defined()) tensor->set_grad(grad.to(device));
    }
    for (auto &[name, child] : children_) child->to(device);
}

void Module::zero_grad() {
    for (Tensor &p : parameters()) p.zero_grad();
}

NamedTensors Module::state_dict() const {
    NamedTensors out = named_parameters();
    for (auto &[name, tensor] : out) tensor = tensor.detach();
    return out;
}

namespace {

bool is_float_dtype(DType d) { return d == DType::f32 || d == DType::f16 || d == DType::bf16; }

std::string join_names(const std::vector<std::string> &names) {
    std::string out;
    for (const std::string &n : names) out += (out.empty() ? "'" : ", '") + n + "'";
    return out;
}

}  // namespace

LoadStateDictResult Module::load_state_dict(const NamedTensors &dict, bool strict) {
    NamedTensors params = named_parameters();
    LoadStateDictResult result;
    std::vector<std::string> mismatches;
    std::vector<std::pair<Tensor, Tensor>> copies;  // (parameter, source): loaded only when all fit
    std::vector<bool> used(dict.size(), false);
    for (const auto &[name, param] : params) {
        std::size_t found = dict.size();
        for (std::size_t i = 0; i < dict.size(); ++i)
            if (dict[i].first == name) {
                if (found != dict.size()) raise<ValueError>("load_state_dict: the dict holds '" + name + "' twice");
                found = i;
            }
        if (found == dict.size()) {
            result.missing_keys.push_back(name);
            continue;
        }
        used[found] = true;
        const Tensor &src = dict[found].second;
        if (!src.defined()) {
            mismatches.push_back("'" + name + "' is an undefined tensor");
            continue;
        }
        bool dtype_fits =
            src.dtype() == param.dtype() || (is_float_dtype(src.dtype()) && is_float_dtype(param.dtype()));
        if (src.shape() != param.shape() || !dtype_fits) {
            mismatches.push_back("'" + name + "' is " + dtype_name(src.dtype()) + shape_str(src.shape()) +
                                 " in the dict but " + dtype_name(param.dtype()) + shape_str(param.shape()) +
                                 " in the module");
            continue;
        }
        copies.emplace_back(param, src);
    }
    for (std::size_t i = 0; i < dict.size(); ++i)
        if (!used[i]) result.unexpected_keys.push_back(dict[i].first);
    bool key_error = strict && (!result.missing_keys.empty() || !result.unexpected_keys.empty());
    if (key_error || !mismatches.empty()) {
        std::string message = "load_state_dict: the dict does not fit the module";
        if (strict && !result.missing_keys.empty()) message += "; missing keys: " + join_names(result.missing_keys);
        if (strict && !result.unexpected_keys.empty())
            message += "; unexpected keys: " + join_names(result.unexpected_keys);
        for (const std::string &m : mismatches) message += "; size mismatch: " + m;
        if (strict && key_error) message += " (pass strict = false to load the keys that match)";
        raise<ValueError>(message);
    }
    NoGradGuard no_grad;
    for (auto &[param, src] : copies) param.assign_(src.to(param.device()));
    return result;
}

// ---- Layers ---------------------------------------------------------------------------------

namespace {

// Weight and bias as torch.nn.Linear/Conv2d's reset_parameters: kaiming_uniform(a = sqrt(5))
// for the weight, which is U(-1/sqrt(fan_in), 1/sqrt(fan_in)), and the same bound for the bias.
void default_init(Tensor &weight, Tensor &bias, uint64_t seed) {
    init::kaiming_uniform_(weight, mix_seed(seed, 0), std::sqrt(5.0));
    if (!bias.defined()) return;
    double bound = 1.0 / std::sqrt(static_cast<double>(init::fans(weight.shape()).first));
    init::uniform_(bias, -bound, bound, mix_seed(seed, 1));
}

std::string yes_no(bool b) { return b ? "true" : "false"; }

}  // namespace

Linear::Linear(int64_t in_features, int64_t out_features, bool with_bias, uint64_t seed)
    : in_(in_features), out_(out_features) {
    if (in_features < 1 || out_features < 1)
        raise<ValueError>("Linear: features must be >= 1, got in " + std::to_string(in_features) + ", out " +
                          std::to_string(out_features));
    weight = empty({out_features, in_features});
    if (with_bias) bias = empty({out_features});
    default_init(weight, bias, seed);
    register_parameter("weight", weight);
    register_parameter("bias", bias);
}

Tensor Linear::forward(const Tensor &x) {
    if (x.rank() < 1 || x.size(-1) != in_)
        raise<ShapeError>("Linear(" + std::to_string(in_) + ", " + std::to_string(out_) + "): input of shape " +
                          shape_str(x.shape()) + " does not end in " + std::to_string(in_));
    return linear(x, weight, bias);
}

std::string Linear::describe() const {
    return "Linear(" + std::to_string(in_) + ", " + std::to_string(out_) + ", bias=" + yes_no(bias.defined()) + ")";
}

Conv2d::Conv2d(int64_t in_channels, int64_t out_channels, int kernel_size, const Conv2dOptions &opts, bool with_bias,
               uint64_t seed)
    : Conv2d(in_channels, out_channels, {kernel_size, kernel_size}, opts, with_bias, seed) {}

Conv2d::Conv2d(int64_t in_channels, int64_t out_channels, std::pair<int, int> kernel_size, const Conv2dOptions &opts,
               bool with_bias, uint64_t seed)
    : options(opts), in_(in_channels), out_(out_channels), kernel_h_(kernel_size.first), kernel_w_(kernel_size.second) {
    if (in_channels < 1 || out_channels < 1 || kernel_h_ < 1 || kernel_w_ < 1 || opts.groups < 1 ||
        in_channels % opts.groups != 0 || out_channels % opts.groups != 0)
        raise<ValueError>("Conv2d: channels " + std::to_string(in_channels) + " -> " + std::to_string(out_channels) +
                          ", kernel " + std::to_string(kernel_h_) + "x" + std::to_string(kernel_w_) + ", groups " +
                          std::to_string(opts.groups) + " (need sizes >= 1 and channels divisible by groups)");
    weight = empty({out_channels, in_channels / opts.groups, kernel_h_, kernel_w_});
    if (with_bias) bias = empty({out_channels});
    default_init(weight, bias, seed);
    register_parameter("weight", weight);
    register_parameter("bias", bias);
}

Tensor Conv2d::forward(const Tensor &x) { return conv2d(x, weight, bias, options); }

std::string Conv2d::describe() const {
    std::string kernel = kernel_h_ == kernel_w_ ? std::to_string(kernel_h_)
                                                : std::to_string(kernel_h_) + "x" + std::to_string(kernel_w_);
    return "Conv2d(" + std::to_string(in_) + ", " + std::to_string(out_) + ", kernel=" + kernel +
           ", stride=" + std::to_string(options.stride_h) + "x" + std::to_string(options.stride_w) +
           ", padding=" + std::to_string(options.pad_h) + "x" + std::to_string(options.pad_w) +
           ", groups=" + std::to_string(options.groups) + ", bias=" + yes_no(bias.defined()) + ")";
}

MaxPool2d::MaxPool2d(int kernel_size, int stride, int padding) {
    options.kernel_h = options.kernel_w = kernel_size;
    options.stride_h = options.stride_w = stride;
    options.pad_h = options.pad_w = padding;
}

Tensor MaxPool2d::forward(const Tensor &x) { return max_pool2d(x, options); }

std::string MaxPool2d::describe() const {
    int stride = options.stride_h ? options.stride_h : options.kernel_h;
    return "MaxPool2d(kernel=" + std::to_string(options.kernel_h) + ", stride=" + std::to_string(stride) +
           ", padding=" + std::to_string(options.pad_h) + ")";
}

std::string GELU::describe() const { return std::string("GELU(approximate=") + (approximate_ ? "tanh" : "none") + ")"; }

Dropout::Dropout(double p, uint64_t seed) : p_(p), seed_(seed) {
    if (!(p >= 0 && p <= 1)) raise<ValueError>("Dropout: p must be in [0, 1], got " + std::to_string(p));
}

Tensor Dropout::forward(const Tensor &x) {
    if (!is_training() || p_ == 0) return x;
    uint64_t stream = calls_++;
    if (p_ == 1) return mul(x, scalar_like(x, 0));
    Tensor u = rand(x.shape(), mix_seed(seed_, stream), x.device());
    Tensor keep = ge(u, scalar_like(u, p_));
    return mul(x, mul(cast(keep, x.dtype()), scalar_like(x, 1.0 / (1.0 - p_))));
}

std::string Dropout::describe() const { return "Dropout(p=" + std::to_string(p_) + ")"; }

Embedding::Embedding(int64_t num_embeddings, int64_t dim, uint64_t seed) : num_(num_embeddings), dim_(dim) {
    if (num_embeddings < 1 || dim < 1)
        raise<ValueError>("Embedding: sizes must be >= 1, got " + std::to_string(num_embeddings) + " x " +
                          std::to_string(dim));
    weight = empty({num_embeddings, dim});
    init::normal_(weight, 0, 1, mix_seed(seed, 0));
    register_parameter("weight", weight);
}

std::string Embedding::describe() const {
    return "Embedding(" + std::to_string(num_) + ", " + std::to_string(dim_) + ")";
}

LayerNorm::LayerNorm(int64_t dim, double eps, bool with_bias) : dim_(dim), eps_(eps) {
    if (dim < 1) raise<ValueError>("LayerNorm: dim must be >= 1, got " + std::to_string(dim));
    if (!(eps > 0)) raise<ValueError>("LayerNorm: eps must be > 0, got " + std::to_string(eps));
    weight = ones({dim});
    register_parameter("weight", weight);
    if (with_bias) {
        bias = zeros({dim});
        register_parameter("bias", bias);
    }
}

std::string LayerNorm::describe() const {
    return "LayerNorm(" + std::to_string(dim_) + ", eps=" + std::to_string(eps_) + ", bias=" + yes_no(bias.defined()) +
           ")";
}

Tensor Flatten::forward(const Tensor &x) { return flatten(x, start_, end_); }

std::string Flatten::describe() const {
    return "Flatten(" + std::to_string(start_) + ", " + std::to_string(end_) + ")";
}

Sequential::Sequential(std::initializer_list<std::shared_ptr<Module>> modules) {
    for (const auto &m : modules) push_back(m);
}

void Sequential::push_back(std::shared_ptr<Module> module) {
    register_module(std::to_string(children().size()), std::move(module));
}

Module &Sequential::operator[](std::size_t index) const {
    if (index >= children().size())
        raise<ValueError>("Sequential: index " + std::to_string(index) + " out of range for " +
                          std::to_string(children().size()) + " modules");
    return *children()[index].second;
}

Tensor Sequential::forward(const Tensor &x) {
    Tensor y = x;
    for (const auto &[name, child] : children()) y = child->forward(y);
    return y;
}

std::string Sequential::describe() const {
    std::string out = "Sequential(\n";
    for (const auto &[name, child] : children()) out += "  (" + name + "): " + child->describe() + "\n";
    return out + ")";
}

}  // namespace tinyfin::nn
