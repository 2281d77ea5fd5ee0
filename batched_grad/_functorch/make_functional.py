"""torch._functorch.make_functional's first functional-module API, which functorch's early ensembling examples
use: make_functional_deprecated_v1 (weights, fn(weights, data), names), its with-buffers form, and functional_init,
which builds a model class once or, for an ensemble, several times with their weights stacked for vmap.

fn runs the model with the given tensors in place of its own (functional_call); the model keeps its parameters,
where torch's moves them out (leaving meta tensors) and runs a deep copy."""

from .._ops import stack
from ..func._module import functional_call


def _named(pairs):
    names, tensors = zip(*pairs) if pairs else ((), ())
    return tuple(tensors), tuple(names)


def make_functional_deprecated_v1(model):
    """(weights, fn, weight_names) of a model without buffers: fn(weights, data) is model(*data) with `weights`
    in place of its parameters."""
    if list(model.buffers()):
        raise RuntimeError(
            "make_functional_deprecated_v1(model): `model` has buffers. Please use "
            "make_functional_with_buffers_deprecated_v1(model) instead."
        )
    weights, names = _named(list(model.named_parameters()))

    def fn(weights, data):
        return functional_call(model, dict(zip(names, weights)), tuple(data))

    return weights, fn, names


def make_functional_with_buffers_deprecated_v1(model):
    """(weights, buffers, fn, weight_names, buffer_names): fn(weights, buffers, data) is model(*data) with
    `weights` and `buffers` in place of its parameters and buffers."""
    weights, weight_names = _named(list(model.named_parameters()))
    buffers, buffer_names = _named(list(model.named_buffers()))

    def fn(weights, buffers, data):
        tensors = {**dict(zip(weight_names, weights)), **dict(zip(buffer_names, buffers))}
        return functional_call(model, tensors, tuple(data))

    return weights, buffers, fn, weight_names, buffer_names


def _ensemble_size(ensemble_shape):
    if len(ensemble_shape) >= 2:
        raise ValueError("NYI: ensemble_shape with more than 1 element")
    if len(ensemble_shape) == 1 and ensemble_shape[0] <= 0:
        raise ValueError(f"num_models {ensemble_shape[0]} should be > 0")
    return ensemble_shape[0] if ensemble_shape else None


def _stacked(per_model):
    """Per tensor position, the models' tensors stacked along a new first dimension, detached."""
    return tuple(stack(shards).detach() for shards in zip(*per_model))


def functional_init(model_class, ensemble_shape=(), device="cpu"):
    """A function of model_class's arguments giving make_functional_deprecated_v1 of a new model on `device`, or,
    with ensemble_shape (n,), of n new models: their weights stacked, fn and names those of one more model."""

    def wrapped(*args, **kwargs):
        size = _ensemble_size(ensemble_shape)
        if size is None:
            return make_functional_deprecated_v1(model_class(*args, **kwargs).to(device))
        models = [model_class(*args, **kwargs).to(device) for _ in range(size)]
        _, fn, names = make_functional_deprecated_v1(model_class(*args, **kwargs))
        return _stacked([make_functional_deprecated_v1(m)[0] for m in models]), fn, names

    return wrapped


def functional_init_with_buffers(model_class, ensemble_shape=(), device="cpu"):
    """functional_init with buffers: for an ensemble, (weights, buffers, fn, weight_names, buffer_names), the
    models' weights and buffers stacked; without one, as torch's, make_functional_deprecated_v1 of one model."""

    def wrapped(*args, **kwargs):
        size = _ensemble_size(ensemble_shape)
        if size is None:
            return make_functional_deprecated_v1(model_class(*args, **kwargs).to(device))
        models = [model_class(*args, **kwargs).to(device) for _ in range(size)]
        _, _, fn, weight_names, buffer_names = make_functional_with_buffers_deprecated_v1(model_class(*args, **kwargs))
        made = [make_functional_with_buffers_deprecated_v1(m) for m in models]
        weights, buffers = _stacked([w for w, *_ in made]), _stacked([b for _, b, *_ in made])
        return weights, buffers, fn, weight_names, buffer_names

    return wrapped
