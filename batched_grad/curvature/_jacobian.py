"""The model's Jacobian with respect to its parameters over a data set, and its transpose, as linear operators
(curvlinops 3's JacobianLinearOperator and TransposedJacobianLinearOperator): J maps the parameters' space to the
outputs of all N data points, `(N, *output_shape)`; the data must come in a fixed order."""

from ._curvature import CurvatureLinearOperator
from ._programs import batched_grad, jacobian_columns


class _JacobianBase(CurvatureLinearOperator):
    FIXED_DATA_ORDER = True

    def __init__(
        self,
        model_func,
        params,
        data,
        progressbar=False,
        check_deterministic=True,
        num_data=None,
        batch_size_fn=None,
    ):
        super().__init__(
            model_func,
            None,
            params,
            data,
            progressbar=progressbar,
            check_deterministic=check_deterministic,
            num_data=num_data,
            batch_size_fn=batch_size_fn,
        )

    def _output_space(self):
        from .. import no_grad

        X = next(iter(self._data))[0]
        with no_grad():
            out = self._model_func(X)
        return [(self._N_data, *tuple(out.shape[1:]))]

    def _with(self, cls):
        return cls(
            self._model_func,
            self._params,
            self._data,
            progressbar=self._progressbar,
            check_deterministic=False,
            num_data=self._N_data,
            batch_size_fn=self._batch_size_fn,
        )


class JacobianLinearOperator(_JacobianBase):
    """J: parameters -> the model's outputs on every data point, `(N, *output_shape)`."""

    def _get_out_shape(self):
        return self._output_space()

    def _matmat(self, M):
        from .. import cat

        model = self._functional

        def build():
            def jacobian_product(state, X, M):
                leaves = model.leaves(state)
                return [jacobian_columns(model(state, leaves, X), leaves, list(M))]

            return jacobian_product

        parts = [self._run("jacobian", build, X, M)[0] for X, _ in self._loop_over_data("_matmat")]
        return [cat(parts, dim=1)]

    def _adjoint(self):
        return self._with(TransposedJacobianLinearOperator)


class TransposedJacobianLinearOperator(_JacobianBase):
    """J^T: the outputs on every data point, `(N, *output_shape)`, -> parameters."""

    def _get_in_shape(self):
        return self._output_space()

    def _matmat(self, M):
        model = self._functional
        (columns,) = M

        def build():
            def transposed_jacobian_product(state, X, columns):
                leaves = model.leaves(state)
                return batched_grad([model(state, leaves, X)], leaves, list(columns))

            return transposed_jacobian_product

        total, start = None, 0
        for X, _ in self._loop_over_data("_matmat"):
            size = self._batch_size_fn(X)
            part = self._run("transposed_jacobian", build, X, [columns[:, start : start + size]])
            total = part if total is None else [a + b for a, b in zip(total, part)]
            start += size
        if start != columns.shape[1]:
            raise ValueError(f"{type(self).__name__}: the data had {start} points, not num_data = {columns.shape[1]}")
        return total

    def _adjoint(self):
        return self._with(JacobianLinearOperator)
