"""pybind11's "incompatible function arguments" TypeError, which lists every overload and prints
each argument (a whole tensor's values), replaced by one naming the function, the first argument
that does not fit and what it should be. Wraps the functions of tinyfin._C and the Tensor methods
at import; the binary ops on the fast path (tinyfin.add, ...) and the operators (__add__, ...) are
left as they are."""
import builtins
import functools
import re

_FAST = {"add", "sub", "mul", "div", "pow", "maximum", "minimum", "eq", "ne", "lt", "le", "gt", "ge",
         "relu_backward", "gelu_backward"}
_SIGNATURE = re.compile(r"^(?:\d+\. )?\w+\((?P<params>.*)\) -> ", re.M)


def _params(doc):
    """[(name, type text, has default)] of the first overload in a pybind11 docstring."""
    m = _SIGNATURE.search(doc or "")
    if not m:
        return []
    out, depth, part = [], 0, ""
    for ch in m["params"] + ",":
        if ch == "," and depth == 0:
            if part.strip():
                name, _, rest = part.strip().partition(": ")
                kind, _, default = rest.partition(" = ")
                out.append((name.strip("*"), kind.strip(), bool(default)))
            part = ""
            continue
        depth += ch in "[(" and 1 or (ch in "])" and -1 or 0)
        part += ch
    return out


def _fits(value, kind):
    from tinyfin import _C
    if kind.startswith("Optional[") or kind.startswith("typing.Optional["):
        return value is None or _fits(value, kind[kind.index("[") + 1:-1])
    if kind.endswith("Tensor"):
        return isinstance(value, _C.Tensor)
    if kind == "float":
        return isinstance(value, (int, float)) and not isinstance(value, builtins.bool)
    if kind == "int":
        return isinstance(value, int) and not isinstance(value, builtins.bool)
    if kind == "bool":
        return isinstance(value, (builtins.bool, int))
    if kind == "str":
        return isinstance(value, str)
    if kind.startswith("List[") or kind.startswith("list["):
        return isinstance(value, (list, tuple))
    return True  # object, handle, dtype, device...: the binding checks these itself


def _describe(kind):
    if kind.endswith("Tensor"):
        return "a tinyfin.Tensor"
    if kind.startswith("Optional["):
        return _describe(kind[9:-1]) + " or None"
    return {"float": "a number", "int": "an integer", "bool": "a bool", "str": "a string"}.get(
        kind, "a " + kind.replace("tinyfin._C.", "tinyfin."))


def _explain(name, doc, args, kwargs):
    params = _params(doc)
    given = list(zip([p[0] for p in params], args)) + list(kwargs.items())
    kinds = {p[0]: p[1] for p in params}
    for pname, value in given:
        kind = kinds.get(pname)
        if kind is None:
            return f"{name}() got an unexpected keyword argument '{pname}'"
        if not _fits(value, kind):
            return (f"{name}: argument '{pname}' must be {_describe(kind)}, got "
                    f"{type(value).__name__}")
    if len(args) > len(params):
        return f"{name}() takes {len(params)} arguments, got {len(args)}"
    named = {p for p, _ in given}
    missing = [p for p, _, has_default in params if not has_default and p not in named]
    if missing:
        return f"{name}() is missing argument '{missing[0]}'"
    signature = ", ".join(f"{p}: {_describe(k)}" for p, k, _ in params)
    return f"{name}: the arguments do not fit {name}({signature})"


def _wrap(name, fn):
    doc = fn.__doc__

    @functools.wraps(fn)
    def call(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except builtins.TypeError as e:
            if "incompatible function arguments" not in str(e):
                raise
            raise builtins.TypeError(_explain(name, doc, args, kwargs)) from None
    return call


def wrap_module(module):
    for name, obj in list(vars(module).items()):
        if name.startswith("_") or name in _FAST or type(obj).__name__ != "builtin_function_or_method":
            continue
        setattr(module, name, _wrap(name, obj))


def wrap_methods(cls):
    """The same for the compiled methods of cls (Tensor.reshape, Tensor.to, ...): "Tensor.reshape:
    argument 'shape' must be ...". self is not counted as an argument in the message."""
    for name, obj in list(vars(cls).items()):
        if name.startswith("_") or type(obj).__name__ != "instancemethod":
            continue
        setattr(cls, name, _wrap_method(f"{cls.__name__}.{name}", obj))


def _wrap_method(name, method):
    doc = method.__func__.__doc__

    @functools.wraps(method.__func__)
    def call(self, *args, **kwargs):
        try:
            return method(self, *args, **kwargs)
        except builtins.TypeError as e:
            if "incompatible function arguments" not in str(e):
                raise
            params = _params(doc)
            if params and params[0][0] == "self":
                doc_without_self = doc.replace(params[0][0] + ": " + params[0][1], "", 1).replace("(, ", "(", 1)
            else:
                doc_without_self = doc
            raise builtins.TypeError(_explain(name, doc_without_self, args, kwargs)) from None
    return call
