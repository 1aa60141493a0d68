// Autocast: the one table of which ops run in the scope's low-precision dtype and which in f32,
// and the hook the listed ops call (autocast.hpp). docs/numerics.md quotes the table.
#include "autocast.hpp"

#include <cstring>
#include <map>
#include <mutex>
#include <tuple>

#include "errors.hpp"
#include "op_samples.hpp"
#include "ops_common.hpp"

namespace tinyfin {

namespace detail {

constinit thread_local int32_t autocast_scope = -1;

namespace {

enum class Policy {
    // Float operands cast to the scope's dtype when the backend claims `claim` in it, else to f32.
    lower,
    // f16/bf16 operands cast to f32.
    f32,
    // Float operands of different dtypes cast to f32 (an f16/bf16 activation meets an f32 bias).
    widest,
};

struct Row {
    const char *op;  // the public function's name (attention: scaled_dot_product_attention)
    Policy policy;
    tf_op claim;  // the op whose supports() decides `lower`
};

// The table. conv2d's gradients need no row: backward runs with autocast off, on the operands
// the forward pass saved, which are already in the scope's dtype.
constexpr Row k_table[] = {
    {"matmul", Policy::lower, TF_OP_MATMUL},
    {"linear", Policy::lower, TF_OP_MATMUL},
    {"conv2d", Policy::lower, TF_OP_CONV2D},
    {"attention", Policy::lower, TF_OP_ATTENTION},
    {"softmax", Policy::f32, TF_OP_SOFTMAX},
    {"log_softmax", Policy::f32, TF_OP_LOG_SOFTMAX},
    {"layer_norm", Policy::f32, TF_OP_LAYER_NORM},
    {"rms_norm", Policy::f32, TF_OP_RMS_NORM},
    {"sum", Policy::f32, TF_OP_SUM},
    {"cumsum", Policy::f32, TF_OP_CUMSUM},
    {"mean", Policy::f32, TF_OP_MEAN},
    {"var", Policy::f32, TF_OP_VAR},
    {"cross_entropy", Policy::f32, TF_OP_CROSS_ENTROPY},
    {"exp", Policy::f32, TF_OP_EXP},
    {"log", Policy::f32, TF_OP_LOG},
    {"add", Policy::widest, TF_OP_ADD},
    {"sub", Policy::widest, TF_OP_SUB},
    {"mul", Policy::widest, TF_OP_MUL},
    {"div", Policy::widest, TF_OP_DIV},
    {"where", Policy::widest, TF_OP_WHERE},
};

const Row *find_row(std::string_view op) {
    for (const Row &row : k_table)
        if (op == row.op) return &row;
    return nullptr;
}

}  // namespace

Autocast::Autocast(const char *op, std::initializer_list<const Tensor *> operands) {
    if (autocast_scope < 0) return;
    const Row *row = find_row(op);
    if (!row) return;
    const auto scope = static_cast<DType>(autocast_scope);
    // The dtype every float operand should have; none needs a change unless decided below.
    const Tensor *first = nullptr;
    bool mixed = false;
    for (const Tensor *t : operands) {
        if (!t->defined() || !is_float(t->dtype())) continue;
        if (first && t->dtype() != first->dtype()) mixed = true;
        if (!first) first = t;
    }
    if (!first) return;
    DType target = first->dtype();
    switch (row->policy) {
    case Policy::lower: {
        const Storage &storage = *first->impl()->storage;
        target = claims(*storage.backend, storage.device, row->claim, scope) ? scope : DType::f32;
        break;
    }
    case Policy::f32: target = DType::f32; break;
    case Policy::widest:
        if (!mixed) return;
        target = DType::f32;
        break;
    }
    bool change = false;
    for (const Tensor *t : operands) change = change || (t->defined() && is_float(t->dtype()) && t->dtype() != target);
    if (!change) return;
    operands_.reserve(operands.size());
    for (const Tensor *t : operands) operands_.push_back(t->defined() && is_float(t->dtype()) ? cast(*t, target) : *t);
    engaged_ = true;
    previous_ = autocast_scope;
    autocast_scope = -1;
}

Autocast::~Autocast() {
    if (engaged_) autocast_scope = previous_;
}

}  // namespace detail

namespace {

int32_t scope_of(DType dtype) {
    if (dtype == DType::f32) return -1;
    if (dtype == DType::f16 || dtype == DType::bf16) return static_cast<int32_t>(dtype);
    detail::raise<DTypeError>(std::string("AutocastGuard: dtype ") + dtype_name(dtype) +
                              " is not a float dtype; use f16 or bf16 (f32 turns autocast off)");
}

}  // namespace

AutocastGuard::AutocastGuard(DType dtype) : previous_(detail::autocast_scope) {
    detail::autocast_scope = scope_of(dtype);
}

AutocastGuard::AutocastGuard(bool enabled, DType dtype) : previous_(detail::autocast_scope) {
    const int32_t scope = scope_of(dtype);
    detail::autocast_scope = enabled ? scope : -1;
}

AutocastGuard::~AutocastGuard() { detail::autocast_scope = previous_; }

std::optional<DType> autocast_dtype() {
    if (detail::autocast_scope < 0) return std::nullopt;
    return static_cast<DType>(detail::autocast_scope);
}

std::string autocast_policy(std::string_view op) {
    if (op == "scaled_dot_product_attention") op = "attention";
    const detail::Row *row = detail::find_row(op);
    if (!row) return "none";
    switch (row->policy) {
    case detail::Policy::lower: return "lower";
    case detail::Policy::f32: return "f32";
    case detail::Policy::widest: return "widest";
    }
    return "none";
}

}  // namespace tinyfin
