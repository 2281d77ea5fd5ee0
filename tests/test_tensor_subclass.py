"""Subclasses of Tensor and other tensor-likes through torch's __torch_function__ protocol, against torch 2.13: the
default protocol keeps a subclass through functions, methods, operators and properties; a subclass's own
__torch_function__ sees each call; as_subclass, _make_subclass and Subclass(tensor) alias; the switches and tests of
torch._C and torch.overrides; tensor-likes of other classes dispatch functions to their handlers."""

import pytest
import torch

import batched_grad as bg
from oracle import raises_like_torch


def _name(value):
    return [_name(v) for v in value] if isinstance(value, (list, tuple)) else type(value).__name__


def _default_protocol_story(m):
    """Which class each kind of call returns on an instance of a plain subclass, and what it computes."""

    class Marked(m.Tensor):
        pass

    plain = m.tensor([1.0, -2.0, 3.0])
    marked = plain.as_subclass(Marked)
    results = {
        "operators": [marked + 1, 1 + marked, plain + marked, marked * marked, -marked, marked > 0, marked[1:]],
        "functions": [m.add(marked, 1), m.relu(marked), m.cat([marked, plain]), m.nn.functional.relu(marked)],
        "namespaces": [m.linalg.norm(marked), m.special.expit(marked), m.fft.fft(marked).real],
        "methods": [marked.sum(), marked.exp(), marked.reshape(3, 1), marked.float(), marked.to(m.float64)],
        "properties": [marked.data, marked[None].mT, marked.real, marked.clone().detach()],
        "several": [marked.max(0).values, *marked.unbind(0), *marked],
        "a module": [m.nn.Linear(3, 2)(marked)],
    }
    seen = {kind: _name(values) for kind, values in results.items()}
    seen["values"] = [[round(v, 5) for v in m.atleast_1d(r).flatten().tolist()] for r in results["operators"][:4]]
    seen["not tensors"] = [_name(marked.shape), _name(marked.tolist()), _name(marked.max(0))]
    seen["repr"] = repr(marked)
    return seen


def test_a_plain_subclass_flows_through_every_kind_of_call_as_torch():
    bg.manual_seed(0), torch.manual_seed(0)
    got, want = _default_protocol_story(bg), _default_protocol_story(torch)
    assert got.pop("a module")[0] == want.pop("a module")[0] == "Marked"
    assert got == want


def _aliasing_story(m):
    class Marked(m.Tensor):
        pass

    leaf = m.tensor([1.0, 2.0], requires_grad=True)
    alias = leaf.as_subclass(Marked)
    seen = [_name(alias), alias.is_leaf, type(alias.grad_fn).__name__, alias.requires_grad]
    (alias * 3).sum().backward()
    seen.append(leaf.grad.tolist())
    base = m.zeros(3)
    view = base.as_subclass(Marked)
    view[0] = 5.0
    base[1] = 7.0
    seen += [base.tolist(), view.tolist()]
    constructed = Marked(m.ones(2))
    made = m.Tensor._make_subclass(Marked, m.ones(2), True)
    seen += [_name(constructed), repr(constructed), _name(Marked([1.0, 2.0])), _name(Marked(2, 3))]
    seen += [_name(made), made.requires_grad, made.is_leaf]
    param = m.nn.Parameter(m.zeros(2))
    seen += [_name(param * 2), _name(param.as_subclass(Marked) * 2)]
    return seen


def test_as_subclass_make_subclass_and_the_constructor_alias_as_torch():
    assert _aliasing_story(bg) == _aliasing_story(torch)


def _custom_protocol_story(m):
    calls = []

    class Logged(m.Tensor):
        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            calls.append(func.__name__)
            return super().__torch_function__(func, types, args, kwargs or {})

    class Unwrapping(m.Tensor):
        def __init__(self, data):
            super().__init__()
            self.payload = data

        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            args = tuple(a.payload if isinstance(a, cls) else a for a in args)
            out = func(*args, **(kwargs or {}))
            return cls(out) if isinstance(out, m.Tensor) else out

    class Identity(m.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x

        @staticmethod
        def backward(ctx, grad):
            return grad

    logged = m.zeros(2).as_subclass(Logged)
    result = m.exp(logged * 2 + 1).sum()
    unwrapping = Unwrapping(m.randn(2, 3))
    with m._C.DisableTorchFunctionSubclass():
        off = logged + 1
    return [
        _name(result),
        calls,
        _name(Identity.apply(unwrapping)),
        _name(unwrapping + 1),
        _name(off),
        m.overrides.has_torch_function((logged,)),
        m.overrides.has_torch_function((m.zeros(1),)),
        m.overrides.has_torch_function((m.nn.Parameter(m.zeros(1)),)),
        m.overrides.is_tensor_like(logged),
        m.overrides.is_tensor_like(1.0),
    ]


def test_a_subclass_own_torch_function_sees_every_call_as_torch():
    assert _custom_protocol_story(bg) == _custom_protocol_story(torch)


def _tensor_like(m):
    """torch's documented tensor-like: not a Tensor, its functions' handlers found by the function object."""
    handled = {}

    class Diagonal:
        def __init__(self, n, value):
            self.n, self.value = n, value

        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            if func not in handled:
                return NotImplemented
            return handled[func](*args, **(kwargs or {}))

    handled[m.mean] = lambda d: d.value / d.n
    handled[m.add] = lambda a, b: (a.value * m.eye(a.n) if isinstance(a, Diagonal) else a) + b
    return Diagonal


def test_a_tensor_like_of_another_class_takes_functions_as_torch():
    def computed(m):
        diagonal = _tensor_like(m)
        return m.mean(diagonal(5, 2.0)), m.add(diagonal(2, 3.0), m.ones(2, 2)).tolist()

    assert computed(bg) == computed(torch)
    raises_like_torch(lambda m: m.sum(_tensor_like(m)(2, 1.0)))
    raises_like_torch(lambda m: m.nn.functional.relu(_tensor_like(m)(2, 1.0)))


def test_an_operator_no_handler_takes_is_python_type_error_as_torch():
    def refused(m):
        class Refusing(m.Tensor):
            @classmethod
            def __torch_function__(cls, func, types, args=(), kwargs=None):
                return NotImplemented

        return m.zeros(2).as_subclass(Refusing) + 1

    raises_like_torch(refused)
    raises_like_torch(lambda m: m.zeros(2).as_subclass(int))


@pytest.mark.parametrize("name", ["sum", "exp"])
def test_a_method_no_handler_takes_names_it_as_torch(name):
    def refused(m):
        class Refusing(m.Tensor):
            @classmethod
            def __torch_function__(cls, func, types, args=(), kwargs=None):
                return NotImplemented

        return getattr(m.zeros(2).as_subclass(Refusing), name)()

    raises_like_torch(refused)


def _library_style_story(m):
    """A subclass written as vision libraries write theirs: a classmethod of its own named `_wrap`, metadata kept
    through the calls its __torch_function__ chooses, its own __repr__ (which print uses), pickles; and deep copies,
    which torch makes only of a subclass whose new_empty keeps its class."""
    import copy
    import pickle

    class Marked(m.Tensor):
        def new_empty(self, *size, **kwargs):  # what torch's deep copy of a subclass asks for
            return super().new_empty(*size, **kwargs).as_subclass(type(self))

    class Boxes(m.Tensor):
        @classmethod
        def _wrap(cls, tensor, *, fmt):
            boxes = tensor.as_subclass(cls)
            boxes.fmt = fmt
            return boxes

        def __new__(cls, data, *, fmt):
            return cls._wrap(m.as_tensor(data, dtype=m.float32), fmt=fmt)

        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            with m._C.DisableTorchFunctionSubclass():
                out = func(*args, **(kwargs or {}))
            if func is m.Tensor.clone:
                return cls._wrap(out, fmt=args[0].fmt)
            return out.as_subclass(m.Tensor) if isinstance(out, cls) else out

        def __repr__(self):
            return f"Boxes({self.tolist()}, fmt={self.fmt})"

    boxes = Boxes([[0, 0, 2, 2], [1, 1, 3, 4]], fmt="xyxy")
    flipped = boxes.clone()
    flipped[:, [0, 2]] = 4 - boxes[:, [2, 0]]
    Boxes.__qualname__, globals()["Boxes"] = "Boxes", Boxes  # picklable by name
    try:
        loaded = pickle.loads(pickle.dumps(boxes))
    finally:
        del globals()["Boxes"]
    marked = m.tensor([1.0, 2.0]).as_subclass(Marked)
    marked.note = "kept"
    copied = copy.deepcopy(marked)
    return [str(boxes), str(flipped), _name(boxes * 2), _name(loaded), loaded.fmt, loaded.tolist()] + [
        _name(copied),
        copied.note,
        copied.tolist(),
    ]


def test_a_library_style_subclass_prints_copies_and_pickles_as_torch():
    assert _library_style_story(bg) == _library_style_story(torch)


def test_a_deep_copy_of_a_subclass_that_loses_its_class_is_refused_as_torch():
    import copy

    def copied(m):
        class Marked(m.Tensor):
            pass

        return copy.deepcopy(m.zeros(2).as_subclass(Marked))

    raises_like_torch(copied)
