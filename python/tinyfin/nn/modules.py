"""tinyfin.nn modules. Module registers parameters and sub-modules assigned as attributes (as
PyTorch does), so Python subclasses need no registration calls. Linear, Conv2d, MaxPool2d, ReLU,
GELU, Dropout and Flatten run the C++ modules of include/tinyfin/nn.hpp (same initialisation as
the C++ API for the same seed); the others are written over tinyfin's ops."""
import math
from collections import OrderedDict, namedtuple

import tinyfin as tf
from tinyfin import _C
from . import functional as F


class Parameter:
    """Marks a tensor as a parameter: `self.w = nn.Parameter(t)` registers t with requires_grad.
    The result is the tensor itself (tinyfin has no separate parameter type)."""

    def __new__(cls, data, requires_grad=True):
        t = data.detach()
        t.requires_grad_(requires_grad)
        return t


# What load_state_dict returns, as torch.nn.modules.module._IncompatibleKeys.
IncompatibleKeys = namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])


class Module:
    """Base of all layers. Assigning a Tensor that requires grad, or a Module, to an attribute
    registers it under that name; parameters(), named_parameters(), state_dict() walk own
    parameters first, then children, in assignment order."""

    def __init__(self):
        object.__setattr__(self, "_parameters", OrderedDict())
        object.__setattr__(self, "_modules", OrderedDict())
        object.__setattr__(self, "_buffers", OrderedDict())
        object.__setattr__(self, "training", True)

    def __setattr__(self, name, value):
        params = self.__dict__.get("_parameters")
        if params is None:
            raise tf.AutogradError(f"{type(self).__name__}: call super().__init__() before assigning attributes")
        buffers = self.__dict__.get("_buffers")
        if buffers is not None and name in buffers and (value is None or isinstance(value, tf.Tensor)):
            buffers[name] = value
            object.__setattr__(self, name, value)
            return
        params.pop(name, None)
        self._modules.pop(name, None)
        if isinstance(value, Module):
            self._modules[name] = value
        elif isinstance(value, tf.Tensor) and value.requires_grad and value.is_leaf:
            params[name] = value
        elif value is None and name in ("bias", "weight"):
            pass
        object.__setattr__(self, name, value)

    def __delattr__(self, name):
        self._parameters.pop(name, None)
        self._modules.pop(name, None)
        object.__delattr__(self, name)

    def register_parameter(self, name, param):
        if param is None:
            object.__setattr__(self, name, None)
            return
        if not param.requires_grad:
            param.requires_grad_(True)
        setattr(self, name, param)

    def register_buffer(self, name, tensor, persistent=True):
        """A tensor that is state but not a parameter (running statistics): saved in state_dict
        (unless persistent=False), moved by to(), never given to optimizers."""
        if tensor is not None and not isinstance(tensor, tf.Tensor):
            raise TypeError(f"register_buffer: {name!r} must be a tinyfin.Tensor or None")
        self._parameters.pop(name, None)
        self._buffers[name] = tensor
        if not persistent:
            object.__setattr__(self, "_non_persistent", self.__dict__.get("_non_persistent", set()) | {name})
        object.__setattr__(self, name, tensor)

    def named_buffers(self, prefix="", recurse=True):
        mods = self.named_modules(prefix=prefix) if recurse else [(prefix, self)]
        for mod_prefix, mod in mods:
            for name, b in mod.__dict__.get("_buffers", {}).items():
                if b is not None:
                    yield (f"{mod_prefix}.{name}" if mod_prefix else name), b

    def buffers(self):
        return (b for _, b in self.named_buffers())

    def register_module(self, name, module):
        setattr(self, name, module)

    add_module = register_module

    def forward(self, *args, **kwargs):
        raise NotImplementedError(f"{type(self).__name__}.forward is not defined")

    def __call__(self, *args, **kwargs):
        return self.forward(*args, **kwargs)

    def named_children(self):
        return iter(self._modules.items())

    def children(self):
        return iter(self._modules.values())

    def named_modules(self, memo=None, prefix="", remove_duplicate=True):
        """(name, module) for this module ("") and every descendant, depth first; a module
        reachable twice is listed once unless remove_duplicate=False (as PyTorch)."""
        if isinstance(memo, str):  # named_modules("prefix"), the older tinyfin form
            memo, prefix = None, memo
        if memo is None:
            memo = set()
        if remove_duplicate:
            if id(self) in memo:
                return
            memo.add(id(self))
        yield prefix, self
        for name, child in self._modules.items():
            if child is None:
                continue
            yield from child.named_modules(memo, f"{prefix}.{name}" if prefix else name, remove_duplicate)

    def apply(self, fn):
        """Calls fn on every child (recursively), then on this module; returns self (as
        PyTorch: model.apply(init_weights))."""
        for child in self._modules.values():
            child.apply(fn)
        fn(self)
        return self

    def requires_grad_(self, requires_grad=True):
        """Sets requires_grad of every parameter (freezing a part of a model); returns self."""
        for p in self.parameters():
            p.requires_grad_(requires_grad)
        return self

    def get_submodule(self, target):
        mod = self
        for part in target.split(".") if target else []:
            if part not in mod._modules:
                raise AttributeError(f"{type(mod).__name__} has no submodule {part!r}")
            mod = mod._modules[part]
        return mod

    def get_parameter(self, target):
        mod_path, _, name = target.rpartition(".")
        mod = self.get_submodule(mod_path)
        if name not in mod._parameters:
            raise AttributeError(f"{type(mod).__name__} has no parameter {name!r}")
        return mod._parameters[name]

    def cpu(self):
        return self.to("cpu")

    def float(self):
        return self.to(tf.float32)

    def half(self):
        return self.to(tf.float16)

    def bfloat16(self):
        return self.to(tf.bfloat16)

    def modules(self):
        return (m for _, m in self.named_modules())

    def named_parameters(self, prefix="", recurse=True, remove_duplicate=True):
        seen = set()
        mods = self.named_modules(prefix=prefix) if recurse else [(prefix, self)]
        for mod_prefix, mod in mods:
            for name, p in mod._parameters.items():
                key = id(p)
                if key in seen and remove_duplicate:
                    continue
                seen.add(key)
                yield (f"{mod_prefix}.{name}" if mod_prefix else name), p

    def parameters(self, recurse=True):
        return (p for _, p in self.named_parameters(recurse=recurse))

    def state_dict(self):
        """name -> parameter (detached, sharing memory), the names C++ named_parameters() gives,
        then each module's persistent buffers after its parameters."""
        out = OrderedDict((name, p.detach()) for name, p in self.named_parameters())
        for mod_prefix, mod in self.named_modules():
            skip = mod.__dict__.get("_non_persistent", set())
            for name, b in mod.__dict__.get("_buffers", {}).items():
                if b is not None and name not in skip:
                    out[f"{mod_prefix}.{name}" if mod_prefix else name] = b.detach()
        return out

    def load_state_dict(self, state_dict, strict=True):
        """Copies values into the parameters in place (every handle, optimizers' included, sees
        them). strict: the names must match exactly (ValueError naming the difference)."""
        own = OrderedDict(self.named_parameters())
        for name, b in self.state_dict().items():
            own.setdefault(name, b)
        missing = [k for k in own if k not in state_dict]
        unexpected = [k for k in state_dict if k not in own]
        if strict and (missing or unexpected):
            raise tf.ValueError(f"load_state_dict: missing keys {missing}, unexpected keys {unexpected}")
        with tf.no_grad():
            for name, p in own.items():
                if name not in state_dict:
                    continue
                src = state_dict[name]
                if not isinstance(src, tf.Tensor):
                    src = tf.tensor(src)
                if tuple(src.shape) != tuple(p.shape):
                    raise tf.ShapeError(f"load_state_dict: {name} has shape {tuple(src.shape)} in the "
                                        f"state dict, the parameter has {tuple(p.shape)}")
                p.copy_(src.to(p.dtype))
        return IncompatibleKeys(missing, unexpected)

    def train(self, mode=True):
        if not isinstance(mode, bool):
            raise tf.ValueError(f"train: mode must be a bool, got {type(mode).__name__}")
        object.__setattr__(self, "training", mode)
        for child in self._modules.values():
            child.train(mode)
        return self

    def eval(self):
        return self.train(False)

    def zero_grad(self, set_to_none=True):
        for p in self.parameters():
            p.grad = None

    def to(self, device=None, dtype=None, non_blocking=False):
        """Moves every parameter (and its grad) to device in place, as PyTorch: the parameters
        stay the same tensor objects, so an optimizer built before the move keeps training them.
        model.to(dtype) casts the floating-point parameters."""
        if isinstance(device, tf.dtype):
            device, dtype = None, device
        for mod in self.modules():
            mod._move(device, dtype)
        return self

    def _move(self, device, dtype=None):
        for p in self._parameters.values():
            _move_tensor(p, device, dtype)
        for b in self.__dict__.get("_buffers", {}).values():
            if b is not None:
                _move_tensor(b, device, dtype)

    def extra_repr(self):
        return ""

    def __repr__(self):
        lines = [f"  ({name}): " + repr(m).replace("\n", "\n  ") for name, m in self._modules.items()]
        head = f"{type(self).__name__}({self.extra_repr()}"
        return head + ("\n" + "\n".join(lines) + "\n)" if lines else ")")


def _move_tensor(p, device, dtype):
    """p.data = p.data.to(device, dtype) with its grad following (PyTorch's Module._apply)."""
    if dtype is not None and not p.dtype.is_floating_point:
        dtype = None
    if device is not None and not isinstance(device, tf.device):
        device = tf.device(device)
    if (device is None or p.device == device) and (dtype is None or p.dtype == dtype):
        return
    grad = p.grad
    p._set_data(p.detach().to(device, dtype))
    if grad is not None:
        p.grad = grad.to(device, dtype)


class _Native(Module):
    """A module whose forward runs a C++ module (tinyfin._C.nn.*)."""

    def __init__(self, impl):
        super().__init__()
        object.__setattr__(self, "_impl", impl)
        self._sync()

    def _sync(self):
        names = set()
        for name, t in self._impl.named_parameters():
            setattr(self, name, t)
            names.add(name)
        if isinstance(self._impl, (_C.nn.Linear, _C.nn.Conv2d)) and "bias" not in names:
            object.__setattr__(self, "bias", None)  # built with bias=False

    def forward(self, input):
        return self._impl(input)

    def train(self, mode=True):
        self._impl.train(mode)
        return super().train(mode)

    def _move(self, device, dtype=None):
        if device is not None:
            self._impl.to(device)  # in place: the Python parameter objects share the tensors
        if dtype is not None:
            for p in self._parameters.values():
                _move_tensor(p, None, dtype)

    def load_state_dict(self, state_dict, strict=True):
        return super().load_state_dict(state_dict, strict)

    def extra_repr(self):
        text = self._impl.describe()
        return text[text.index("(") + 1:-1]


def _seed(seed):
    return tf._next_seed() if seed is None else seed


class Linear(_Native):
    def __init__(self, in_features, out_features, bias=True, seed=None):
        self.in_features, self.out_features = in_features, out_features
        super().__init__(_C.nn.Linear(in_features, out_features, bias, _seed(seed)))

    def __setattr__(self, name, value):
        if name in ("in_features", "out_features") and "_parameters" not in self.__dict__:
            object.__setattr__(self, name, value)
            return
        super().__setattr__(name, value)


class Conv2d(_Native):
    """torch.nn.Conv2d: kernel_size, stride, padding and dilation ints or pairs; padding also
    'valid' or 'same' (stride 1; an even kernel pads one more row/column after, as PyTorch)."""

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1,
                 groups=1, bias=True, padding_mode="zeros", device=None, dtype=None, seed=None):
        if padding_mode != "zeros":
            raise tf.ValueError(f"Conv2d: only padding_mode='zeros' is supported, got {padding_mode!r}")
        kernel = F._pair(kernel_size, "kernel_size", "Conv2d")
        self.kernel_size, self.stride = kernel, F._pair(stride, "stride", "Conv2d")
        self.dilation, self.groups = F._pair(dilation, "dilation", "Conv2d"), groups
        self.in_channels, self.out_channels = in_channels, out_channels
        self.padding = padding if isinstance(padding, str) else F._pair(padding, "padding", "Conv2d")
        native_padding = self.padding
        if padding == "valid":
            native_padding = (0, 0)
        elif padding == "same":
            if self.stride != (1, 1):
                raise tf.ValueError("Conv2d: padding='same' needs stride 1 (as in PyTorch)")
            (top, bottom), (left, right) = F._same_padding(kernel, self.dilation)
            native_padding = (top, left) if (top, left) == (bottom, right) else (0, 0)
            if (top, left) != (bottom, right):
                self._pre_pad = (left, right, top, bottom)
        elif isinstance(padding, str):
            raise tf.ValueError(f"Conv2d: padding must be an int, a pair, 'valid' or 'same', got {padding!r}")
        super().__init__(_C.nn.Conv2d(in_channels, out_channels, list(kernel), self.stride, native_padding,
                                      self.dilation, groups, bias, _seed(seed)))
        if device is not None or dtype is not None:
            self.to(device, dtype)

    def __setattr__(self, name, value):
        if "_parameters" not in self.__dict__:
            object.__setattr__(self, name, value)
            return
        super().__setattr__(name, value)

    def forward(self, input):
        pre = self.__dict__.get("_pre_pad")
        if pre is not None:
            input = tf.pad(input, pre)
        return self._impl(input)


class MaxPool2d(_Native):
    def __init__(self, kernel_size, stride=None, padding=0):
        super().__init__(_C.nn.MaxPool2d(kernel_size, stride or 0, padding))


class ReLU(_Native):
    def __init__(self, inplace=False):
        super().__init__(_C.nn.ReLU())
        object.__setattr__(self, "inplace", inplace)

    def forward(self, input):
        return input.relu_() if self.inplace else self._impl(input)

    def extra_repr(self):
        return "inplace=True" if self.inplace else ""


class GELU(_Native):
    def __init__(self, approximate="none"):
        if approximate not in ("none", "tanh"):
            raise tf.ValueError(f"GELU: approximate must be 'none' or 'tanh', got {approximate!r}")
        super().__init__(_C.nn.GELU(approximate == "tanh"))


class Dropout(_Native):
    def __init__(self, p=0.5, inplace=False, seed=None):
        if not 0 <= p < 1:
            raise tf.ValueError(f"Dropout: p must be in [0, 1), got {p}")
        super().__init__(_C.nn.Dropout(p, _seed(seed)))
        object.__setattr__(self, "inplace", inplace)

    def forward(self, input):
        out = self._impl(input)
        return input.copy_(out) if self.inplace and self.training else out


class Dropout2d(Module):
    """Zeroes whole channels with probability p in training (torch.nn.Dropout2d); each call
    draws the next stream of its seed (manual_seed's when None)."""

    def __init__(self, p=0.5, inplace=False, seed=None):
        super().__init__()
        if not 0 <= p <= 1:
            raise tf.ValueError(f"Dropout2d: p must be in [0, 1], got {p}")
        self.p, self.inplace, self._seed, self._calls = p, inplace, _seed(seed), 0

    def forward(self, input):
        if not self.training:
            return input
        seed = _C.mix_seed(self._seed, self._calls)
        object.__setattr__(self, "_calls", self._calls + 1)
        return F.dropout2d(input, self.p, True, self.inplace, seed=seed)

    def extra_repr(self):
        return f"p={self.p}, inplace={self.inplace}"


class Flatten(_Native):
    def __init__(self, start_dim=1, end_dim=-1):
        super().__init__(_C.nn.Flatten(start_dim, end_dim))


class AvgPool2d(Module):
    def __init__(self, kernel_size, stride=None, padding=0, count_include_pad=True):
        super().__init__()
        self.kernel_size, self.stride, self.padding = kernel_size, stride, padding
        self.count_include_pad = count_include_pad

    def forward(self, input):
        return F.avg_pool2d(input, self.kernel_size, self.stride, self.padding,
                            count_include_pad=self.count_include_pad)

    def extra_repr(self):
        return f"kernel_size={self.kernel_size}, stride={self.stride or self.kernel_size}, padding={self.padding}"


class AdaptiveAvgPool2d(Module):
    def __init__(self, output_size):
        super().__init__()
        self.output_size = output_size

    def forward(self, input):
        return F.adaptive_avg_pool2d(input, self.output_size)

    def extra_repr(self):
        return f"output_size={self.output_size}"


class GroupNorm(Module):
    """torch.nn.GroupNorm: weight ones and bias zeros [num_channels] when affine."""

    def __init__(self, num_groups, num_channels, eps=1e-5, affine=True, device=None):
        super().__init__()
        if num_groups < 1 or num_channels % num_groups:
            raise tf.ValueError(f"GroupNorm: num_channels {num_channels} must be divisible by num_groups {num_groups}")
        self.num_groups, self.num_channels, self.eps, self.affine = num_groups, num_channels, eps, affine
        self.weight = tf.ones(num_channels, device=device, requires_grad=True) if affine else None
        self.bias = tf.zeros(num_channels, device=device, requires_grad=True) if affine else None

    def forward(self, input):
        if input.ndim < 2 or input.shape[1] != self.num_channels:
            raise tf.ShapeError(f"GroupNorm({self.num_groups}, {self.num_channels}): expected input [N, "
                                f"{self.num_channels}, ...], got shape {tuple(input.shape)}")
        return F.group_norm(input, self.num_groups, self.weight, self.bias, self.eps)

    def extra_repr(self):
        return f"{self.num_groups}, {self.num_channels}, eps={self.eps}, affine={self.affine}"


class _BatchNorm(Module):
    """Normalises each channel (dim 1) over the batch and the other dims: in training with the
    batch's mean and biased variance, updating running_mean and running_var (unbiased) with
    momentum; in eval with the running statistics (as torch.nn.BatchNorm*d)."""

    _ranks = ()

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True, device=None):
        super().__init__()
        self.num_features, self.eps, self.momentum = num_features, eps, momentum
        self.affine, self.track_running_stats = affine, track_running_stats
        self.weight = tf.ones(num_features, device=device, requires_grad=True) if affine else None
        self.bias = tf.zeros(num_features, device=device, requires_grad=True) if affine else None
        if track_running_stats:
            self.register_buffer("running_mean", tf.zeros(num_features, device=device))
            self.register_buffer("running_var", tf.ones(num_features, device=device))
            self.register_buffer("num_batches_tracked", tf.zeros((), dtype=tf.int64, device=device))

    def forward(self, input):
        if input.ndim not in self._ranks or input.shape[1] != self.num_features:
            raise tf.ShapeError(f"{type(self).__name__}({self.num_features}): expected input of rank "
                                f"{' or '.join(map(str, self._ranks))} with {self.num_features} channels in dim 1, "
                                f"got shape {tuple(input.shape)}")
        dims = (0,) + tuple(range(2, input.ndim))
        shape = (1, self.num_features) + (1,) * (input.ndim - 2)
        if self.training or not self.track_running_stats:
            mean = tf.mean(input, dims, keepdim=True)
            var = tf.var(input, dims, correction=0, keepdim=True)
            if self.training and self.track_running_stats:
                n = input.numel() // self.num_features
                with tf.no_grad():
                    m = self.momentum
                    self.running_mean.copy_(self.running_mean * (1 - m) + mean.detach().reshape(-1) * m)
                    unbiased = var.detach().reshape(-1) * (n / max(n - 1, 1))
                    self.running_var.copy_(self.running_var * (1 - m) + unbiased * m)
                    self.num_batches_tracked.add_(1)
        else:
            mean = self.running_mean.reshape(shape)
            var = self.running_var.reshape(shape)
        out = (input - mean) * tf.rsqrt(var + self.eps)
        if self.affine:
            out = out * self.weight.reshape(shape) + self.bias.reshape(shape)
        return out

    def extra_repr(self):
        return f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, affine={self.affine}"


class BatchNorm1d(_BatchNorm):
    _ranks = (2, 3)


class BatchNorm2d(_BatchNorm):
    _ranks = (4,)


class Identity(Module):
    def forward(self, input):
        return input


class Sigmoid(Module):
    def forward(self, input):
        return tf.sigmoid(input)


class Tanh(Module):
    def forward(self, input):
        return tf.tanh(input)


class SiLU(Module):
    def forward(self, input):
        return tf.silu(input)


class Softmax(Module):
    def __init__(self, dim=-1):
        super().__init__()
        self.dim = dim

    def forward(self, input):
        return tf.softmax(input, self.dim)


def _shape(normalized_shape):
    return (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)


class LayerNorm(Module):
    def __init__(self, normalized_shape, eps=1e-5, elementwise_affine=True, bias=True, device=None):
        super().__init__()
        self.normalized_shape, self.eps = _shape(normalized_shape), eps
        self.weight = tf.ones(*self.normalized_shape, device=device, requires_grad=True) if elementwise_affine else None
        self.bias = (tf.zeros(*self.normalized_shape, device=device, requires_grad=True)
                     if elementwise_affine and bias else None)

    def forward(self, input):
        return F.layer_norm(input, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self):
        return f"{self.normalized_shape}, eps={self.eps}"


class RMSNorm(Module):
    def __init__(self, normalized_shape, eps=None, elementwise_affine=True, device=None):
        super().__init__()
        self.normalized_shape, self.eps = _shape(normalized_shape), eps
        self.weight = tf.ones(*self.normalized_shape, device=device, requires_grad=True) if elementwise_affine else None

    def forward(self, input):
        return F.rms_norm(input, self.normalized_shape, self.weight, self.eps)

    def extra_repr(self):
        return f"{self.normalized_shape}, eps={self.eps}"


class Embedding(Module):
    """weight [num_embeddings, embedding_dim] ~ N(0, 1), as torch.nn.Embedding."""

    def __init__(self, num_embeddings, embedding_dim, device=None, seed=None):
        super().__init__()
        self.num_embeddings, self.embedding_dim = num_embeddings, embedding_dim
        self.weight = tf.randn(num_embeddings, embedding_dim, seed=seed, device=device, requires_grad=True)

    def forward(self, input):
        return F.embedding(input, self.weight)

    def extra_repr(self):
        return f"{self.num_embeddings}, {self.embedding_dim}"


class Sequential(Module):
    """Applies its modules in order; they are named "0", "1", ... (as C++ nn::Sequential)."""

    def __init__(self, *modules):
        super().__init__()
        if len(modules) == 1 and isinstance(modules[0], OrderedDict):
            for name, m in modules[0].items():
                setattr(self, name, m)
        else:
            for i, m in enumerate(modules):
                setattr(self, str(i), m)

    def append(self, module):
        setattr(self, str(len(self._modules)), module)
        return self

    def __len__(self):
        return len(self._modules)

    def __getitem__(self, i):
        mods = list(self._modules.values())
        return Sequential(*mods[i]) if isinstance(i, slice) else mods[i]

    def __iter__(self):
        return iter(self._modules.values())

    def forward(self, input):
        for m in self._modules.values():
            input = m(input)
        return input


class ModuleList(Module):
    def __init__(self, modules=()):
        super().__init__()
        for m in modules:
            self.append(m)

    def append(self, module):
        setattr(self, str(len(self._modules)), module)
        return self

    def __len__(self):
        return len(self._modules)

    def __getitem__(self, i):
        return list(self._modules.values())[i]

    def __iter__(self):
        return iter(self._modules.values())


class CrossEntropyLoss(Module):
    def __init__(self, weight=None, ignore_index=-100, reduction="mean", label_smoothing=0.0):
        super().__init__()
        if isinstance(weight, str):  # CrossEntropyLoss("sum"), the older tinyfin form
            weight, reduction = None, weight
        self.weight, self.reduction, self.ignore_index = weight, reduction, ignore_index
        self.label_smoothing = label_smoothing

    def forward(self, input, target):
        return F.cross_entropy(input, target, self.weight, ignore_index=self.ignore_index,
                               reduction=self.reduction, label_smoothing=self.label_smoothing)


class NLLLoss(Module):
    def __init__(self, weight=None, ignore_index=-100, reduction="mean"):
        super().__init__()
        self.weight, self.ignore_index, self.reduction = weight, ignore_index, reduction

    def forward(self, input, target):
        return F.nll_loss(input, target, self.weight, ignore_index=self.ignore_index, reduction=self.reduction)


class L1Loss(Module):
    def __init__(self, reduction="mean"):
        super().__init__()
        self.reduction = reduction

    def forward(self, input, target):
        return F.l1_loss(input, target, reduction=self.reduction)


class SmoothL1Loss(Module):
    def __init__(self, reduction="mean", beta=1.0):
        super().__init__()
        self.reduction, self.beta = reduction, beta

    def forward(self, input, target):
        return F.smooth_l1_loss(input, target, reduction=self.reduction, beta=self.beta)


class HuberLoss(Module):
    def __init__(self, reduction="mean", delta=1.0):
        super().__init__()
        self.reduction, self.delta = reduction, delta

    def forward(self, input, target):
        return F.huber_loss(input, target, reduction=self.reduction, delta=self.delta)


class BCEWithLogitsLoss(Module):
    def __init__(self, weight=None, reduction="mean", pos_weight=None):
        super().__init__()
        self.weight, self.reduction, self.pos_weight = weight, reduction, pos_weight

    def forward(self, input, target):
        return F.binary_cross_entropy_with_logits(input, target, self.weight, self.reduction, self.pos_weight)


class MSELoss(Module):
    def __init__(self, reduction="mean"):
        super().__init__()
        self.reduction = reduction

    def forward(self, input, target):
        return F.mse_loss(input, target, reduction=self.reduction)


_ = math  # kept for subclasses' initialisers
