"""The Hessian, the generalized Gauss-Newton matrix, the empirical Fisher and the Monte-Carlo Fisher of an empirical
risk, with curvlinops 3's names, arguments and scaling. Each batch's product with K columns is one program: the
forward once, then the columns as one batch of cotangents through the backward (or through a backward of a
backward: J v is the VJP of J^T u with respect to u). The Hessian's traced program runs forward-over-reverse instead
(the gradient's JVP with each column): on the CNN of benchmarks/curvature.py that halved the time of one column and
of 64 at once against the backward of the backward, and compiled in less than half the time; many columns time it
against the gradient's VJP (_hessian_columns)."""

import math

from ..nn import BCEWithLogitsLoss, CrossEntropyLoss, MSELoss
from ._curvature import CurvatureLinearOperator
from ._programs import batched_grad, jacobian_columns, loss_of_arrays, traced

SUPPORTED_LOSSES = (MSELoss, CrossEntropyLoss, BCEWithLogitsLoss)


class HessianLinearOperator(CurvatureLinearOperator):
    """The Hessian of the empirical risk with respect to `params`; `block_sizes` makes it block-diagonal (each block
    the Hessian of the risk with respect to its parameters alone)."""

    SELF_ADJOINT = True
    SUPPORTS_BLOCKS = True

    def _matmat_batch(self, X, y, M, factor):
        model, blocks = self._functional, tuple(self._block_sizes)

        def build():
            def hessian_product(state, data, M, order="forward"):
                from ..autograd import grad

                X, y, factor = data
                if traced(factor):
                    return _hessian_columns(model, state, data, M, blocks, order)
                leaves = model.leaves(state)
                loss = model.loss(state, model(state, leaves, X), y) * factor
                result, start = [], 0
                for size in blocks:
                    block = leaves[start : start + size]
                    gradients = grad(loss, block, create_graph=True, allow_unused=True, materialize_grads=True)
                    result += batched_grad(gradients, block, list(M[start : start + size]))
                    start += size
                return result

            # backward-over-forward as the alternative that the program's tuning times against it
            return [hessian_product, lambda state, data, M: hessian_product(state, data, M, "reverse")]

        return self._run("hessian", build, (X, y, factor), M, blocks)


def _hessian_columns(model, state, data, M, blocks, order):
    """Inside a traced program, the Hessian's products per block: `order` "forward", forward-over-reverse (the JVP of
    the gradient's program with each column, vmapped over the columns: the forward and the gradient run once for all
    columns, each column adds one linear pass through them); "reverse", the VJP of the gradient with each column
    (the Hessian is symmetric), which on the MLP of benchmarks/curvature.py ran 16-64 columns faster (it does not
    transpose the first layer's tangents), and on its CNN 2x-3x slower."""
    import jax

    from .._tensor import Tensor

    arrays = [leaf._value for leaf in model.leaves(state)]
    loss = loss_of_arrays(model, state, *data)
    result, start = [], 0
    for size in blocks:
        end = start + size

        def block_loss(block, start=start, end=end):
            return loss(arrays[:start] + list(block) + arrays[end:])

        gradient = jax.grad(block_loss)
        primal = arrays[start:end]
        columns = [m._value for m in M[start:end]]
        if order == "forward":
            products = jax.vmap(lambda v, g=gradient, p=primal: jax.jvp(g, (p,), (v,))[1])(columns)
        else:
            _, vjp = jax.vjp(gradient, primal)
            (products,) = jax.vmap(vjp)(columns)
        result += [Tensor._wrap(p) for p in products]
        start = end
    return result


class GGNLinearOperator(CurvatureLinearOperator):
    """The generalized Gauss-Newton matrix J^T (d^2 loss / d f^2) J of the empirical risk, J the model's Jacobian
    with respect to `params`."""

    SELF_ADJOINT = True

    def _matmat_batch(self, X, y, M, factor):
        model = self._functional

        def build():
            def ggn_product(state, data, M):
                from ..autograd import grad

                X, y, factor = data
                leaves = model.leaves(state)
                out = model(state, leaves, X)
                JM = jacobian_columns(out, leaves, list(M))
                prediction = out.detach().requires_grad_()
                (gradient,) = grad(model.loss(state, prediction, y) * factor, prediction, create_graph=True)
                (HJM,) = batched_grad([gradient], [prediction], [JM])
                return batched_grad([out], leaves, [HJM])

            return ggn_product

        return self._run("ggn", build, (X, y, factor), M)


def _flatten(out, loss_func):
    """The model's output as (loss terms, classes), as curvlinops flattens it: for cross-entropy the classes are
    axis 1 (`(N, C, ...)`), for the others the last axis."""
    if isinstance(loss_func, CrossEntropyLoss):
        return out.movedim(1, -1).reshape(-1, out.shape[1])
    return out.reshape(-1, out.shape[-1])


def _unflatten(rows, shape, loss_func):
    """The inverse of _flatten for a batch of rows `(K, terms, C)`: `(K, *shape)`."""
    k = rows.shape[0]
    if isinstance(loss_func, CrossEntropyLoss):
        return rows.reshape(k, shape[0], *shape[2:], shape[1]).movedim(-1, 2)
    return rows.reshape(k, *shape)


def _reduction_factor(loss_func, terms, classes):
    """The factor by which a 'mean' loss divides a sum of per-term losses: the number of terms (cross-entropy) or
    of terms times classes (the others); 1 for 'sum'."""
    if loss_func.reduction == "sum":
        return 1.0
    return float(terms if isinstance(loss_func, CrossEntropyLoss) else terms * classes)


def _check_loss(op, loss_func):
    if not isinstance(loss_func, SUPPORTED_LOSSES):
        names = ", ".join(c.__name__ for c in SUPPORTED_LOSSES)
        raise NotImplementedError(f"{type(op).__name__}: loss_func must be one of {names}, but got {loss_func}")


def _outer_product_program(model, weights):
    """The program of J^T (sum_s g_s g_s^T) J M for an output-space weighting built by `weights(out, y, extra)`
    (out detached) -> (G `(S, terms, C)`, scale): the empirical Fisher (S = 1, G the loss's gradients) and the MC
    Fisher (G sampled would-be gradients)."""

    loss_func = model.loss_func

    def product(state, data, M):
        from .. import einsum

        X, y, factor, extra = data
        leaves = model.leaves(state)
        out = model(state, leaves, X)
        G, scale = weights(state, out.detach(), y, extra)
        JM = _flatten_rows(jacobian_columns(out, leaves, list(M)), loss_func)
        projections = einsum("ktc,stc->kst", JM, G)
        W = einsum("kst,stc->ktc", projections, G) * (factor * scale)
        return batched_grad([out], leaves, [_unflatten(W, out.shape, loss_func)])

    return product


def _flatten_rows(rows, loss_func):
    """_flatten of each row of `(K, *out.shape)`: `(K, terms, C)`."""
    k = rows.shape[0]
    if isinstance(loss_func, CrossEntropyLoss):
        return rows.movedim(2, -1).reshape(k, -1, rows.shape[2])
    return rows.reshape(k, -1, rows.shape[-1])


class EFLinearOperator(CurvatureLinearOperator):
    """The empirical Fisher: the uncentered covariance c * sum_n g_n g_n^T of the per-datum loss gradients g_n
    (MSELoss, CrossEntropyLoss or BCEWithLogitsLoss). The gradients are never formed per datum: the product is
    J^T (sum_n d_n d_n^T) J M, d_n the loss's gradient with respect to the n-th output."""

    SELF_ADJOINT = True

    def _matmat_batch(self, X, y, M, factor):
        _check_loss(self, self._loss_func)
        model, loss_func = self._functional, self._loss_func

        def gradients(state, out, y, _):
            from ..autograd import grad

            prediction = out.requires_grad_()
            (g,) = grad(model.loss(state, prediction, y), prediction)
            flat = _flatten(g, loss_func)
            c = _reduction_factor(loss_func, *flat.shape)
            return (flat * c).unsqueeze(0), 1.0 / c

        return self._run("ef", lambda: _outer_product_program(model, gradients), (X, y, factor, 0), M)


class FisherMCLinearOperator(CurvatureLinearOperator):
    """The type-I Fisher J^T E_{y~q(.|f)}[d_y d_y^T] J, the expectation estimated with `mc_samples` targets drawn
    from the model's predictive distribution per datum (MSELoss: Gaussian; CrossEntropyLoss: categorical;
    BCEWithLogitsLoss: Bernoulli, binary targets). The draws come from a generator seeded with `seed` at the start of
    every product, so the operator is one fixed matrix; data must come in a fixed order."""

    SELF_ADJOINT = True
    FIXED_DATA_ORDER = True
    supported_losses = SUPPORTED_LOSSES

    def __init__(
        self,
        model_func,
        loss_func,
        params,
        data,
        progressbar=False,
        check_deterministic=True,
        seed=2147483647,
        mc_samples=1,
        num_data=None,
        batch_size_fn=None,
    ):
        _check_loss(self, loss_func)
        if isinstance(mc_samples, bool) or not isinstance(mc_samples, int) or mc_samples < 1:
            raise ValueError(f"FisherMCLinearOperator: mc_samples must be a positive int, but got {mc_samples!r}")
        self._seed, self._mc_samples, self._generator = seed, mc_samples, None
        super().__init__(
            model_func,
            loss_func,
            params,
            data,
            progressbar=progressbar,
            check_deterministic=check_deterministic,
            num_data=num_data,
            batch_size_fn=batch_size_fn,
        )

    def _begin_product(self):
        from .. import Generator

        self._generator = Generator().manual_seed(self._seed)

    def _matmat_batch(self, X, y, M, factor):
        from .. import no_grad

        loss_func, samples = self._loss_func, self._mc_samples
        state = self._functional.state()
        with no_grad():
            prediction = self._functional(state, self._functional.leaves(state), X)
        noise = self._draw_noise(self._generator, tuple(_flatten(prediction, loss_func).shape), y)

        def build():
            def sampled(state, out, y, noise):
                flat = _flatten(out, loss_func)
                G = sample_output_gradients(loss_func, flat, noise)
                return G, 1.0 / (samples * _reduction_factor(loss_func, *flat.shape))

            return _outer_product_program(self._functional, sampled)

        return self._run("fisher_mc", build, (X, y, factor, noise), M, samples)

    def _draw_noise(self, generator, flat_shape, y):
        """The draws behind one batch's sampled targets: standard normals `(S, terms, C)` for MSELoss, uniforms
        `(S, terms)` for CrossEntropyLoss, uniforms `(S, terms, C)` for BCEWithLogitsLoss."""
        from .. import rand, randn

        terms, classes = flat_shape
        shape = (self._mc_samples, terms) + (() if isinstance(self._loss_func, CrossEntropyLoss) else (classes,))
        if isinstance(self._loss_func, MSELoss):
            return randn(*shape, generator=generator, dtype=self.dtype)
        if isinstance(self._loss_func, BCEWithLogitsLoss) and not bool(((y == 0) | (y == 1)).all()):
            raise NotImplementedError("FisherMCLinearOperator: BCEWithLogitsLoss needs binary targets (0, 1)")
        return rand(*shape, generator=generator, dtype=self.dtype)


def sample_output_gradients(loss_func, flat, noise):
    """Would-be gradients d/df -log q(y~|f) for targets y~ drawn from the model's distribution q(.|f) by `noise`
    (see FisherMCLinearOperator._draw_noise), without the 'mean' reduction's scaling: `(S, terms, C)`.
    MSELoss: 2 (f - y~) with y~ ~ N(f, 1/2), i.e. sqrt(2) z; CrossEntropyLoss: softmax(f) - onehot(y~), y~ the
    first class whose cumulative probability exceeds the uniform; BCEWithLogitsLoss: sigmoid(f) - [u < sigmoid(f)]."""
    from .. import arange, sigmoid, softmax

    if isinstance(loss_func, MSELoss):
        return math.sqrt(2.0) * noise
    if isinstance(loss_func, CrossEntropyLoss):
        prob = softmax(flat, dim=1)
        classes = flat.shape[1]
        below = (prob.cumsum(dim=1).unsqueeze(0) < noise.unsqueeze(-1)).sum(dim=-1).clamp(max=classes - 1)
        onehot = (below.unsqueeze(-1) == arange(classes)).to(flat.dtype)
        return prob.unsqueeze(0) - onehot
    prob = sigmoid(flat)
    return prob.unsqueeze(0) - (noise < prob.unsqueeze(0)).to(flat.dtype)
