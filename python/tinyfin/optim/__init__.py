"""tinyfin.optim: SGD, Adam and AdamW with PyTorch's parameter groups, state_dict and
load_state_dict; lr_scheduler. The updates are the fused ops the C++ optimizers of
include/tinyfin/nn.hpp run (sgd_step_, adamw_step_: the same results bit for bit), on each
parameter's device, in place; amsgrad is written over the ops. Each optimizer is also a C++
optim::Optimizer over its parameters, so tinyfin.amp.GradScaler.step(optimizer) calls its step().

Differences from PyTorch: optimizer.state is keyed by the parameter's position (0, 1, ... over
the groups in order), as PyTorch's state_dict() numbers them; groups cannot be added after
construction; "step" in the state is a Python int."""
import builtins as _builtins
import math as _math

import tinyfin as _tf
from tinyfin import _C

from . import lr_scheduler  # noqa: F401

__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "WarmupCosine", "lr_scheduler"]


class Optimizer(_C.optim.Optimizer):
    """Base of the optimizers: param_groups (a list of dicts: "params" and the hyperparameters,
    each group's own or the defaults), state, zero_grad, state_dict, load_state_dict."""

    def __init__(self, params, defaults):
        groups = list(params)
        if not groups:
            raise _tf.ValueError(f"{type(self).__name__}: got an empty parameter list")
        if not isinstance(groups[0], dict):
            groups = [{"params": groups}]
        param_groups = []
        for group in groups:
            if not isinstance(group, dict) or "params" not in group:
                raise _builtins.TypeError(f"{type(self).__name__}: a parameter group is a dict with a "
                                          "'params' entry")
            params_of_group = group["params"]
            params_of_group = [params_of_group] if isinstance(params_of_group, _tf.Tensor) else list(params_of_group)
            unknown = set(group) - set(defaults) - {"params"}
            if unknown:
                raise _builtins.TypeError(f"{type(self).__name__}: unknown options {sorted(unknown)} in a "
                                          "parameter group")
            full = dict(defaults)
            full.update({k: v for k, v in group.items() if k != "params"})
            full["params"] = params_of_group
            param_groups.append(full)
        flat = [p for g in param_groups for p in g["params"]]
        for i, p in enumerate(flat):
            if not isinstance(p, _tf.Tensor):
                raise _builtins.TypeError(f"{type(self).__name__}: parameter {i} is a {type(p).__name__}, "
                                          "not a tinyfin.Tensor")
            if not p.is_leaf:
                raise _tf.ValueError(f"{type(self).__name__}: parameter {i} is not a leaf tensor")
        if len({id(p) for p in flat}) != len(flat):
            raise _tf.ValueError(f"{type(self).__name__}: a parameter appears in more than one place")
        super().__init__(flat, 0.0)  # checks the dtypes (floats only)
        self.defaults = dict(defaults)
        self.param_groups = param_groups
        self.state = {}
        self._validate()

    def _validate(self):
        for g in self.param_groups:
            for key in ("lr", "weight_decay", "momentum", "eps"):
                if key in g and not (g[key] >= 0 and _math.isfinite(g[key])):
                    raise _tf.ValueError(f"{type(self).__name__}: {key} must be finite and >= 0, got {g[key]}")

    def _indexed(self):
        """(index, group, param) for every parameter, in state_dict order."""
        i = 0
        for g in self.param_groups:
            for p in g["params"]:
                yield i, g, p
                i += 1

    @property
    def lr(self):
        """The first group's learning rate; setting it sets every group's."""
        return self.param_groups[0]["lr"]

    @lr.setter
    def lr(self, value):
        if not (value >= 0 and _math.isfinite(value)):
            raise _tf.ValueError(f"lr must be finite and >= 0, got {value}")
        for g in self.param_groups:
            g["lr"] = value

    @property
    def params(self):
        return [p for g in self.param_groups for p in g["params"]]

    def zero_grad(self, set_to_none=True):
        for g in self.param_groups:
            for p in g["params"]:
                if set_to_none or p.grad is None:
                    p.grad = None
                else:
                    with _tf.no_grad():
                        p.grad.zero_()

    def step(self, closure=None):
        loss = None
        if closure is not None:
            with _tf.enable_grad():
                loss = closure()
        with _tf.no_grad():
            for i, group, p in self._indexed():
                if p.grad is not None:
                    self._update(i, group, p, p.grad)
        return loss

    def state_dict(self):
        """{"state": {index: {name: tensor or int}}, "param_groups": [{hyperparameters,
        "params": [indices]}]}, as PyTorch; tensors are the live state (tinyfin.save copies)."""
        groups, i = [], 0
        for g in self.param_groups:
            entry = {k: v for k, v in g.items() if k != "params"}
            entry["params"] = list(range(i, i + len(g["params"])))
            i += len(g["params"])
            groups.append(entry)
        state = {k: dict(v) for k, v in self.state.items()}
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict):
        """Takes a state_dict() (also one read back by tinyfin.load): the hyperparameters of each
        group and a copy of each state tensor on its parameter's device, so training resumes
        exactly where it stopped."""
        groups = state_dict.get("param_groups") if isinstance(state_dict, dict) else None
        if not isinstance(groups, (list, tuple)) or len(groups) != len(self.param_groups):
            raise _tf.ValueError(f"load_state_dict: the state has {len(groups) if groups else 0} parameter "
                                 f"groups, the optimizer {len(self.param_groups)}")
        for k, (mine, theirs) in enumerate(zip(self.param_groups, groups)):
            if len(theirs.get("params", ())) != len(mine["params"]):
                raise _tf.ValueError(f"load_state_dict: group {k} has {len(theirs.get('params', ()))} "
                                     f"parameters in the state, {len(mine['params'])} in the optimizer")
        flat = self.params
        state = {}
        for key, entries in state_dict.get("state", {}).items():
            i = int(key)
            if not 0 <= i < len(flat):
                raise _tf.ValueError(f"load_state_dict: state for parameter {i}, the optimizer has {len(flat)}")
            p = flat[i]
            own = {}
            for name, value in entries.items():
                if isinstance(value, _tf.Tensor):
                    if tuple(value.shape) != tuple(p.shape):
                        raise _tf.ShapeError(f"load_state_dict: {name} of parameter {i} has shape "
                                             f"{tuple(value.shape)}, the parameter {tuple(p.shape)}")
                    value = value.detach().to(p.device).to(p.dtype).clone()
                own[name] = value
            state[i] = own
        for mine, theirs in zip(self.param_groups, groups):
            for k, v in theirs.items():
                if k != "params":
                    mine[k] = tuple(v) if isinstance(v, list) else v
        self.state = state

    def __repr__(self):
        lines = [f"{type(self).__name__} ("]
        for k, g in enumerate(self.param_groups):
            lines.append(f"Parameter Group {k}")
            lines += [f"    {key}: {g[key]}" for key in sorted(g) if key != "params"]
        return "\n".join(lines) + "\n)"


class SGD(Optimizer):
    """torch.optim.SGD (dampening 0): g += weight_decay p; with momentum buf = momentum buf + g
    (g on the first step), g = nesterov ? g + momentum buf : buf; p -= lr g."""

    def __init__(self, params, lr=1e-3, momentum=0.0, weight_decay=0.0, nesterov=False, maximize=False):
        if maximize:
            raise _tf.ValueError("SGD: maximize=True is not supported")
        if nesterov and momentum == 0:
            raise _tf.ValueError("SGD: nesterov needs a momentum > 0")
        super().__init__(params, {"lr": lr, "momentum": momentum, "weight_decay": weight_decay,
                                  "nesterov": nesterov})

    def _update(self, i, group, p, grad):
        lr, momentum, wd = group["lr"], group["momentum"], group["weight_decay"]
        if momentum != 0:
            state = self.state.setdefault(i, {})
            state["momentum_buffer"] = _C.optim._sgd_step(p, grad, state.get("momentum_buffer"), lr, momentum, wd,
                                                           group["nesterov"])
            return
        if wd != 0:
            grad = grad + p * wd
        p.copy_(p - grad * lr)


class AdamW(Optimizer):
    """torch.optim.AdamW: p *= 1 - lr weight_decay; m = b1 m + (1 - b1) g; v = b2 v + (1 - b2) g^2
    (amsgrad: v_max = max(v_max, v) in the denominator); p -= lr / (1 - b1^t) m /
    (sqrt(v) / sqrt(1 - b2^t) + eps)."""

    _decoupled = True

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=None, amsgrad=False):
        if weight_decay is None:
            weight_decay = 0.01 if self._decoupled else 0.0
        b1, b2 = betas
        if not (0 <= b1 < 1 and 0 <= b2 < 1):
            raise _tf.ValueError(f"{type(self).__name__}: betas must be in [0, 1), got {tuple(betas)}")
        super().__init__(params, {"lr": lr, "betas": tuple(betas), "eps": eps, "weight_decay": weight_decay,
                                  "amsgrad": amsgrad})

    def _update(self, i, group, p, grad):
        lr, (b1, b2), eps, wd = group["lr"], group["betas"], group["eps"], group["weight_decay"]
        state = self.state.setdefault(i, {"step": 0})
        state["step"] += 1
        if not self._decoupled and wd != 0:
            grad = grad + p * wd  # Adam: L2 penalty in the gradient
            wd = 0.0
        if not group["amsgrad"]:
            state["exp_avg"], state["exp_avg_sq"] = _C.optim._adamw_step(
                p, grad, state.get("exp_avg"), state.get("exp_avg_sq"), lr, b1, b2, eps, wd, state["step"])
            return
        if "exp_avg" not in state:
            state["exp_avg"] = _tf.zeros_like(p)
            state["exp_avg_sq"] = _tf.zeros_like(p)
            state["max_exp_avg_sq"] = _tf.zeros_like(p)
        m, v, v_max = state["exp_avg"], state["exp_avg_sq"], state["max_exp_avg_sq"]
        t = state["step"]
        if wd != 0:
            p.copy_(p * (1 - lr * wd))
        m.copy_(m * b1 + grad * (1 - b1))
        v.copy_(v * b2 + grad * grad * (1 - b2))
        v_max.copy_(_tf.maximum(v_max, v))
        denom = _tf.sqrt(v_max) / _math.sqrt(1 - b2 ** t) + eps
        p.copy_(p - m / denom * (lr / (1 - b1 ** t)))


class Adam(AdamW):
    """torch.optim.Adam: weight_decay adds weight_decay p to the gradient (L2), default 0."""

    _decoupled = False


class WarmupCosine(_C.nn.WarmupCosine):
    """Learning rate at a step (the C++ nn::WarmupCosine): linear warmup from max_lr/warmup to
    max_lr over warmup steps, then cosine decay to min_lr at step total."""

    def __init__(self, max_lr, min_lr, warmup, total):
        super().__init__(max_lr, min_lr, warmup, total)
