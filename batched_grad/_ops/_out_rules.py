"""Which of torch's functions take out=, and the rule for out's dtype (_public.write_out): "cast" (TensorIterator
ops: the result is cast to out's dtype where torch's can_cast allows), "same" (out's dtype must be the result's),
"factory" (the result is made in out's dtype unless a dtype is given). A function of several results (sort, aminmax,
svd, ...) takes a tuple of tensors, each of its result's dtype ("same"), whatever its rule here. The elementwise ops
of the exposure table in __init__.py give their rules there."""


def _rules(rule, names):
    return dict.fromkeys(names.split(), rule)


OUT_RULES = {
    "torch": {
        **_rules("factory", "arange empty eye full linspace logspace ones rand randint randn randperm range zeros"),
        **_rules(
            "same",
            """addbmm addmm addmv addr baddbmm bmm mm mv dot vdot inner outer ger kron matmul matrix_power cholesky
            cholesky_inverse cholesky_solve inverse lu_solve tril triu diag cross complex polar masked_select nonzero
            index_select gather take_along_dim bucketize searchsorted histc amax amin multinomial""",
        ),
        **_rules(
            "cast",
            """all any bitwise_left_shift bitwise_not bitwise_right_shift cat column_stack concat concatenate
            conj_physical copysign cumprod cumsum dstack float_power fmax fmin gcd heaviside hstack igamma igammac
            isneginf isposinf lcm ldexp logaddexp logaddexp2 logcumsumexp logit logsumexp mean median max min
            mvlgamma nan_to_num nanmean nanmedian nanquantile nextafter normal polygamma quantile renorm row_stack
            signbit stack std var vstack xlogy aminmax cummax cummin frexp histogram histogramdd kthvalue lu_unpack
            mode sort svd topk triangular_solve""",
        ),
    },
    "linalg": _rules(
        "same",
        """cholesky cholesky_ex cond cross det eig eigh eigvals eigvalsh householder_product inv inv_ex lu lu_factor
        lu_factor_ex lu_solve matmul matrix_norm matrix_power matrix_rank multi_dot norm pinv qr slogdet solve
        solve_ex solve_triangular svd svdvals tensorinv tensorsolve vecdot vector_norm""",
    ),
    "special": _rules(
        "cast",
        """bessel_j0 bessel_j1 entr erfcx gammainc gammaincc i0e i1 i1e log_ndtr logit logsumexp modified_bessel_i0
        modified_bessel_i1 multigammaln ndtr ndtri polygamma round spherical_bessel_j0 xlog1py xlogy zeta""",
    ),
    "fft": {
        **_rules(
            "same",
            """fft fft2 fftn hfft hfft2 hfftn ifft ifft2 ifftn ihfft ihfft2 ihfftn irfft irfft2 irfftn rfft rfft2
            rfftn""",
        ),
        **_rules("factory", "fftfreq rfftfreq"),
    },
}
