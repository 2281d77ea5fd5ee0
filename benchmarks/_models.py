"""Models built from one layer table in torch.nn, bg.nn and jax.lax, so that every peer uses the same weights."""

import jax
import jax.numpy as jnp

CNN = [
    ("Conv2d", 1, 8, 3),
    ("ReLU",),
    ("MaxPool2d", 2),
    ("Conv2d", 8, 16, 3),
    ("ReLU",),
    ("MaxPool2d", 2),
    ("Flatten",),
    ("Linear", 16 * 5 * 5, 10),
]  # on 1x28x28 images


def _jax_pool(x, k):
    return jax.lax.reduce_window(x, -jnp.inf, jax.lax.max, (1, 1, k, k), (1, 1, k, k), "VALID")


def _jax_conv(x, w, b):
    return (
        jax.lax.conv_general_dilated(x, w, (1, 1), "VALID", dimension_numbers=("NCHW", "OIHW", "NCHW"))
        + b[:, None, None]
    )


JAX_LAYERS = {  # name -> (x, {"weight", "bias"} of the layer, its table arguments) -> output, as torch.nn computes
    "Linear": lambda x, p, *_: x @ p["weight"].T + p["bias"],
    "Conv2d": lambda x, p, *_: _jax_conv(x, p["weight"], p["bias"]),
    "ReLU": lambda x, p: jax.nn.relu(x),
    "Tanh": lambda x, p: jnp.tanh(x),
    "MaxPool2d": lambda x, p, k: _jax_pool(x, k),
    "Flatten": lambda x, p: x.reshape(x.shape[0], -1),
}


def build(nn, layers):
    """An nn.Sequential of `layers` in the library `nn` (torch.nn or bg.nn)."""
    return nn.Sequential(*(getattr(nn, name)(*args) for name, *args in layers))


def jax_forward(layers, params, x):
    """The same Sequential on JAX arrays; `params` maps torch's names ("0.weight", ...) to arrays."""
    for i, (name, *args) in enumerate(layers):
        x = JAX_LAYERS[name](x, {k: params.get(f"{i}.{k}") for k in ("weight", "bias")}, *args)
    return x


def jax_cross_entropy(logits, y):
    return -jnp.take_along_axis(jax.nn.log_softmax(logits), y[:, None], axis=1).mean()
