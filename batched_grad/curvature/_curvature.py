"""The base of the curvature operators: a matrix summed over the batches of a data set, each batch's part computed by
one compiled program over all the columns (_programs.py), scaled as the loss's reduction asks (curvlinops 3's
CurvatureLinearOperator: 'mean' weighs a batch by its share of the data, 'sum' by 1)."""

import sys
from collections.abc import MutableMapping

import numpy as np

from .._tensor import Tensor
from ._base import LinearOperator
from ._programs import FunctionalModel, as_factor, program


class CurvatureLinearOperator(LinearOperator):
    """A curvature matrix of the empirical risk `c * sum_n loss(model_func(x_n), y_n)` over the batches of `data`
    (c = 1/N for reduction='mean', 1 for 'sum'), as a linear operator on the parameters' space.

    Arguments as curvlinops 3's: `model_func` (a Module holding `params`, or a callable of X), `loss_func` (a loss
    Module with a `reduction`, or None), `params` (a list of Parameters), `data` (an iterable of batches `(X, y)`,
    iterated once per product; X may be a dict, with `batch_size_fn`), `progressbar` (report each batch on stderr),
    `check_deterministic` (compare two passes over the data and two products at construction), `num_data` (the
    number of data points, else counted from the data), `block_sizes` (the number of consecutive parameters in each
    diagonal block, where the operator supports blocks), `batch_size_fn` (X -> its batch size)."""

    SUPPORTS_BLOCKS = False
    FIXED_DATA_ORDER = False

    def __init__(
        self,
        model_func,
        loss_func,
        params,
        data,
        progressbar=False,
        check_deterministic=True,
        num_data=None,
        block_sizes=None,
        batch_size_fn=None,
    ):
        self._params = list(params)
        if not self._params or not all(isinstance(p, Tensor) for p in self._params):
            raise TypeError(f"{type(self).__name__}: params must be a non-empty list of Tensors")
        first = next(iter(data), None)
        if first is None:
            raise ValueError(f"{type(self).__name__}: data has no batches")
        if isinstance(first[0], MutableMapping) and batch_size_fn is None:
            raise ValueError(f"{type(self).__name__}: data whose X is a dict needs batch_size_fn (X -> batch size)")
        self._block_sizes = self._checked_blocks(block_sizes)
        self._model_func, self._loss_func, self._data = model_func, loss_func, data
        self._progressbar = progressbar
        self._batch_size_fn = (lambda X: X.shape[0]) if batch_size_fn is None else batch_size_fn
        self._functional = FunctionalModel(model_func, loss_func, self._params)
        if num_data is None:
            num_data = sum(self._batch_size_fn(X) for X, _ in self._loop_over_data("_N_data"))
        self._N_data = num_data
        super().__init__(self._get_in_shape(), self._get_out_shape())
        if check_deterministic:
            self._check_deterministic()

    def _checked_blocks(self, block_sizes):
        if block_sizes is None:
            return [len(self._params)]
        if not self.SUPPORTS_BLOCKS:
            raise ValueError(f"{type(self).__name__} does not support block_sizes, but got {block_sizes}")
        if any(not isinstance(s, int) or s <= 0 for s in block_sizes):
            raise ValueError(f"block_sizes must be positive ints, but got {block_sizes}")
        if sum(block_sizes) != len(self._params):
            n = len(self._params)
            raise ValueError(f"block_sizes must sum to len(params) = {n}, but sum to {sum(block_sizes)}")
        return list(block_sizes)

    def _get_in_shape(self):
        return [tuple(p.shape) for p in self._params]

    def _get_out_shape(self):
        return [tuple(p.shape) for p in self._params]

    @property
    def block_sizes(self):
        """The number of consecutive parameters in each diagonal block (one block: the whole matrix)."""
        return list(self._block_sizes)

    @property
    def dtype(self):
        """The parameters' dtype (RuntimeError if they have several)."""
        dtypes = {p.dtype for p in self._params}
        if len(dtypes) != 1:
            raise RuntimeError(f"{type(self).__name__}: the parameters have several dtypes {dtypes}")
        return dtypes.pop()

    @property
    def device(self):
        """The parameters' device (RuntimeError if they live on several)."""
        devices = {str(p.device) for p in self._params}
        if len(devices) != 1:
            raise RuntimeError(f"{type(self).__name__}: the parameters live on several devices {devices}")
        return self._params[0].device

    # -- the product ------------------------------------------------------------------------------------------------

    def _matmat(self, M):
        self._begin_product()
        total = None
        for X, y in self._loop_over_data("_matmat"):
            part = self._matmat_batch(X, y, M, self._factor(X, y))
            total = part if total is None else [a + b for a, b in zip(total, part)]
        return total

    def _matmat_rows(self, R):
        """The product with the rows of R `(K, N)`, as rows: each batch's program takes R whole (its split into the
        parameters' shapes, the concatenation of its products and the sum over batches happen inside it, where XLA
        fuses them into their neighbours, not as passes over K x N numbers each)."""
        if type(self)._matmat_batch is CurvatureLinearOperator._matmat_batch:
            return super()._matmat_rows(R)
        self._begin_product()
        total = None
        for X, y in self._loop_over_data("_matmat"):
            (total,) = self._matmat_batch(X, y, _Rows(R, total), self._factor(X, y))
        return total

    def _begin_product(self):
        """Called before each product's pass over the data."""

    def _matmat_batch(self, X, y, M, factor):
        raise NotImplementedError(f"{type(self).__name__} does not implement _matmat_batch")

    def _run(self, kind, build, data, columns, options=()):
        """The cached program `kind` (its function made by `build()`) on this batch's `data` and `columns` (a list of
        `(K, *shape)` Tensors, or _Rows: then the program's product is one `(K, N)` Tensor)."""
        if isinstance(columns, _Rows):
            kind, options = f"{kind} on rows", (options, columns.total is not None)
            build = _on_rows(build, self._in_shape)
            columns = columns.tensors()
        objects = [self._model_func, self._loss_func, *self._params]
        run = program(kind, objects, options, build, traceable=self._functional.traceable)
        return run(self._functional.state(), data, columns)

    def _factor(self, X, y):
        return as_factor(self._get_normalization_factor(X, y), self._params[0])

    def _loop_over_data(self, desc=None):
        """The batches (X, y), reported on stderr with `progressbar`."""
        count = 0
        for X, y in self._data:
            count += 1
            if self._progressbar:
                print(f"\r{type(self).__name__}.{desc}: batch {count}", end="", file=sys.stderr, flush=True)
            yield X, y
        if self._progressbar:
            print(file=sys.stderr, flush=True)

    def _get_normalization_factor(self, X, y):
        reduction = getattr(self._loss_func, "reduction", None)
        if reduction == "sum":
            return 1.0
        if reduction == "mean":
            return self._batch_size_fn(X) / self._N_data
        raise ValueError(f"{type(self).__name__}: the loss's reduction must be 'mean' or 'sum', but got {reduction!r}")

    # -- loss and gradient ------------------------------------------------------------------------------------------

    def _loss_and_gradient(self, X, y):
        model = self._functional

        def build():
            def loss_and_gradient(state, data, columns):
                from ..autograd import grad

                X, y, factor = data
                leaves = model.leaves(state)
                prediction = model(state, leaves, X)
                loss = model.loss(state, prediction, y) * factor
                grads = grad(loss, leaves, allow_unused=True, materialize_grads=True)
                return [prediction.detach(), loss.detach(), *grads]

            return loss_and_gradient

        return self._run("loss_and_gradient", build, (X, y, self._factor(X, y)), [])

    def data_prediction_loss_gradient(self, desc="batch_prediction_loss_gradient"):
        """Per batch: ((X, y), prediction, loss, gradient), the loss and gradient scaled by the batch's weight (None
        without a loss function)."""
        if self._loss_func is None:
            for X, y in self._loop_over_data(desc):
                yield (X, y), self._model_func(X).detach(), None, None
            return
        for X, y in self._loop_over_data(desc):
            prediction, loss, *grads = self._loss_and_gradient(X, y)
            yield (X, y), prediction, loss, grads

    def gradient_and_loss(self):
        """(the gradient as a list shaped like params, the loss) of the empirical risk over the data."""
        if self._loss_func is None:
            raise ValueError(f"{type(self).__name__} has no loss function")
        total_grad, total_loss = None, None
        for _, _, loss, grads in self.data_prediction_loss_gradient("gradient_and_loss"):
            total_loss = loss if total_loss is None else total_loss + loss
            total_grad = grads if total_grad is None else [a + b for a, b in zip(total_grad, grads)]
        return total_grad, total_loss

    # -- the determinism check --------------------------------------------------------------------------------------

    def _check_deterministic(self):
        """Two passes over the data must give the same loss and gradient (and, for an operator that needs a fixed data
        order, the same batches and predictions), and two products with one vector the same result."""
        from .. import rand

        rtol, atol = 5e-5, 1e-6
        totals = []
        for first, second in zip(self.data_prediction_loss_gradient(), self.data_prediction_loss_gradient()):
            if self.FIXED_DATA_ORDER:
                _check_batches(first, second, rtol, atol)
            totals.append((first[2], second[2], first[3], second[3]))
        if self._loss_func is not None:
            loss1, loss2 = (sum(_numpy(t[i]) for t in totals) for i in (0, 1))
            if not np.allclose(loss1, loss2, rtol=rtol, atol=atol):
                raise RuntimeError("Check for deterministic total loss failed.")
            for j in range(len(self._params)):
                g1, g2 = (sum(_numpy(t[i][j]) for t in totals) for i in (2, 3))
                if not np.allclose(g1, g2, rtol=rtol, atol=atol):
                    raise RuntimeError("Check for deterministic total gradient failed.")
        v = rand(self.shape[1], dtype=self.dtype)
        if not np.allclose(_numpy(self @ v), _numpy(self @ v), rtol=rtol, atol=atol):
            raise RuntimeError("Check for deterministic matvec failed.")


class _Rows:
    """Columns given as the rows of one `(K, N)` Tensor, with the sum of the earlier batches' products (or None)."""

    def __init__(self, rows, total):
        self.rows, self.total = rows, total

    def tensors(self):
        return [self.rows] if self.total is None else [self.rows, self.total]


def _on_rows(build, shapes):
    """build for a program on _Rows: the rows split into `shapes` go through `build()`'s function, whose products come
    back flattened into one `(K, N)` Tensor, plus the earlier total where there is one."""
    sizes = [int(np.prod(s, dtype=np.int64)) for s in shapes]

    def on_rows(fn):
        from .. import cat

        def run(state, data, columns):
            rows, *total = columns
            k = rows.shape[0]
            M = [p.reshape(k, *s) for p, s in zip(rows.split(sizes, dim=1), shapes)]
            product = cat([a.reshape(k, -1) for a in fn(state, data, M)], dim=1)
            return [product + total[0] if total else product]

        return run

    def made():
        fns = build()
        return [on_rows(f) for f in fns] if isinstance(fns, list) else on_rows(fns)

    return made


def _numpy(t):
    return np.asarray(t.detach().numpy()) if isinstance(t, Tensor) else np.asarray(t)


def _same(a, b, rtol, atol):
    if isinstance(a, MutableMapping):
        return all(_same(a[k], b[k], rtol, atol) for k in a if isinstance(a[k], Tensor))
    return np.allclose(_numpy(a), _numpy(b), rtol=rtol, atol=atol)


def _check_batches(first, second, rtol, atol):
    ((X1, y1), pred1, loss1, grad1), ((X2, y2), pred2, loss2, grad2) = first, second
    for what, a, b in (("X", X1, X2), ("y", y1, y2), ("batch prediction", pred1, pred2)):
        if not _same(a, b, rtol, atol):
            raise RuntimeError(f"Check for deterministic {what} failed.")
    if loss1 is not None:
        if not _same(loss1, loss2, rtol, atol):
            raise RuntimeError("Check for deterministic batch loss failed.")
        if not all(_same(a, b, rtol, atol) for a, b in zip(grad1, grad2)):
            raise RuntimeError("Check for deterministic batch gradient failed.")
