"""Every public name of SPEC §2 has a docstring: module functions, classes, and the public methods and
properties of those classes (Tensor's generated methods included)."""

import importlib
import inspect

import pytest

import batched_grad as bg
import vmap

NAMESPACES = [
    "batched_grad",
    "batched_grad.autograd",
    "batched_grad.autograd.functional",
    "batched_grad.autograd.graph",
    "batched_grad.autograd.gradcheck",
    "batched_grad.linalg",
    "batched_grad.nn",
    "batched_grad.nn.functional",
    "batched_grad.nn.init",
    "batched_grad.nn.utils",
    "batched_grad.nn.utils.init",
    "batched_grad.nn.utils.prune",
    "batched_grad.nn.utils.stateless",
    "batched_grad.optim",
    "batched_grad.testing",
    "batched_grad.utils.benchmark",
    "batched_grad.utils.dlpack",
    "vmap",
]
PROJECT = ("batched_grad", "vmap")


def _is_ours(obj, prefix=PROJECT):
    return (inspect.isfunction(obj) or inspect.isclass(obj)) and obj.__module__.startswith(prefix)


def _has_doc(text):
    return bool(text and text.strip())


def _public_names(module):
    """The module's `__all__`, else its public functions and classes defined in it (or in its subpackages)."""
    if hasattr(module, "__all__"):
        return list(module.__all__)
    return [name for name, obj in vars(module).items() if not name.startswith("_") and _is_ours(obj, module.__name__)]


def _is_documentable(member):
    return callable(member) or isinstance(member, (property, staticmethod, classmethod))


def _undocumented_members(cls, qualname):
    """Public methods and properties of `cls` (inherited ones from this project's classes included) with no
    docstring; an override without one inherits the overridden member's, as `inspect.getdoc` does."""
    missing = []
    names = {
        name
        for k in cls.__mro__
        if _is_ours(k)
        for name, member in vars(k).items()
        if not name.startswith("_") and _is_documentable(member)
    }
    for name in sorted(names):
        if not any(_has_doc(vars(k)[name].__doc__) for k in cls.__mro__ if name in vars(k)):
            missing.append(f"{qualname}.{name}")
    return missing


def _undocumented(namespace):
    module = importlib.import_module(namespace)
    missing = [] if _has_doc(module.__doc__) else [f"{namespace} (module)"]
    for name in _public_names(module):
        obj = getattr(module, name)
        if inspect.ismodule(obj):
            if not _has_doc(obj.__doc__):
                missing.append(f"{namespace}.{name} (module)")
            continue
        if not _is_ours(obj):
            continue
        qualname = f"{namespace}.{name}"
        if not _has_doc(vars(obj).get("__doc__") if inspect.isclass(obj) else obj.__doc__):  # classes: their own
            missing.append(qualname)
        if inspect.isclass(obj):
            missing += _undocumented_members(obj, qualname)
    return missing


@pytest.mark.parametrize("namespace", NAMESPACES)
def test_public_names_have_docstrings(namespace):
    missing = _undocumented(namespace)
    assert not missing, f"{len(missing)} public names without a docstring:\n  " + "\n  ".join(missing)


def test_generated_methods_are_documented_from_their_functions():
    assert bg.Tensor.add.__doc__ == bg.add.__doc__
    assert bg.Tensor.add_.__doc__ == f"In-place version of add.\n\n{bg.add.__doc__}"
    assert bg.Tensor.lt.__doc__ and bg.Tensor.lt.__doc__ != bg.Tensor.gt.__doc__


def test_the_walk_sees_undocumented_names(monkeypatch):
    def undocumented(x):
        return x

    undocumented.__module__ = "batched_grad.linalg"
    monkeypatch.setattr(bg.linalg, "__all__", [*bg.linalg.__all__, "undocumented"], raising=True)
    monkeypatch.setattr(bg.linalg, "undocumented", undocumented, raising=False)
    monkeypatch.setattr(vmap.FallbackWarning, "extra", property(lambda self: 0), raising=False)
    missing = _undocumented("batched_grad.linalg") + _undocumented("vmap")
    assert "batched_grad.linalg.undocumented" in missing and "vmap.FallbackWarning.extra" in missing
