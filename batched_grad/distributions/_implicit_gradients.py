"""torch's reparameterized gradients of its gamma and Dirichlet draws (the formulas of its Distributions.h, as JAX
functions): a draw is a constant of the sampler, differentiable in its concentration through the implicit
function theorem, -(dF/dalpha) / (dF/dx) for the draw's CDF F, which torch approximates by series, saddle point
expansions and rational fits by regime. gamma_draw and dirichlet_draw give the draw with that derivative."""

import jax
import jax.numpy as jnp


def _digamma(x):
    """torch's digamma_one<scalar_t, double>: computed in double, returned in x's dtype."""
    return jax.scipy.special.digamma(x.astype(jnp.float64)).astype(x.dtype)


def _nan_to_zero(x):
    return jnp.where(jnp.isnan(x), jnp.zeros_like(x), x)


def _torch_gamma_gradient(alpha, x):
    """torch's standard_gamma_grad_one, elementwise in double: the reparameterized gradient dx/dalpha =
    -(dF/dalpha) / (dF/dx) of a standard Gamma(alpha) draw x, by a Taylor series below x = 0.8, Rice's saddle point
    expansion above alpha = 8, and a bivariate rational approximation between."""
    a, x = alpha.astype(jnp.float64), x.astype(jnp.float64)
    safe_x = jnp.maximum(x, jnp.finfo(jnp.float64).tiny)
    # Taylor series of the regularized lower incomplete gamma function and its alpha-derivative
    numer, denom = jnp.ones_like(x), a
    series1, series2 = numer / denom, numer / (denom * denom)
    for i in range(1, 6):
        numer = numer * (-x / i)
        denom = denom + 1
        series1, series2 = series1 + numer / denom, series2 + numer / (denom * denom)
    pow_x_alpha = jnp.power(safe_x, a)
    pdf = jnp.power(safe_x, a - 1) * jnp.exp(-x)
    cdf_alpha = (jnp.log(safe_x) - jax.scipy.special.digamma(a)) * pow_x_alpha * series1 - pow_x_alpha * series2
    taylor = -cdf_alpha / pdf
    taylor = jnp.where(jnp.isnan(taylor), 0.0, taylor)
    # Rice saddle point expansion (large alpha), with its own rational form near x = alpha
    near = (
        (1 + 24 * a * (1 + 12 * a))
        * (1440 * a * a + 6 * x * (53 - 120 * x) - 65 * x * x / a + a * (107 + 3600 * x))
        / (1244160 * a * a * a * a)
    )
    root = jnp.sqrt(8 * a)
    gap = jnp.where(x == a, 1.0, a - x)
    term2 = root / gap
    term3 = jnp.power(jnp.abs(x - a - a * jnp.log(safe_x / a)), -1.5)
    term23 = jnp.where(x < a, term2 - term3, term2 + term3)
    term1 = jnp.log(safe_x / a) * term23 - jnp.sqrt(2 / a) * (a + x) / (gap * gap)
    stirling = 1 + 1 / (12 * a) * (1 + 1 / (24 * a))
    saddle = jnp.where((0.9 * a <= x) & (x <= 1.1 * a), near, -stirling * x * term1 / root)
    # bivariate rational approximation in u = log(x / alpha), v = log(alpha)
    u, v = jnp.log(safe_x / a), jnp.log(a)
    coef = [c0 + u * (c1 + u * c2) for c0, c1, c2 in zip(*_GAMMA_GRAD_COEFFICIENTS)]
    p = coef[0] + v * (coef[1] + v * (coef[2] + v * coef[3]))
    q = coef[4] + v * (coef[5] + v * (coef[6] + v * coef[7]))
    rational = jnp.exp(p / q)
    result = jnp.where(x < 0.8, taylor, jnp.where(a > 8.0, saddle, rational))
    return result.astype(alpha.dtype)


_GAMMA_GRAD_COEFFICIENTS = (
    (0.16009398, -0.094634809, 0.025146376, -0.0030648343, 1, 0.32668115, 0.10406089, 0.0014179084),
    (0.53487893, 0.1298071, 0.065735949, -0.0015649758, 0.16639465, 0.020070113, -0.0035938915, -0.00058392623),
    (
        0.040121004,
        -0.0065914022,
        -0.0026286047,
        -0.0013441777,
        0.017050642,
        -0.0021309326,
        0.00085092367,
        -1.5247877e-07,
    ),
)


def _draw_with_tangent(name, tangent):
    """A JAX function (concentration, drawn) -> drawn, named `name`, whose derivative in the concentration is
    tangent(concentration, drawn, d_concentration) (the draw itself is a constant)."""

    @jax.custom_jvp
    def draw(concentration, drawn):
        return drawn

    @draw.defjvp
    def _jvp(primals, tangents):
        concentration, drawn = primals
        return drawn, tangent(concentration, drawn, tangents[0])

    draw.__name__ = name
    return draw


# standard Gamma(concentration) draws
gamma_draw = _draw_with_tangent("gamma_draw", lambda c, x, dc: _torch_gamma_gradient(c, x) * dc)


def _beta_grad_alpha_small(x, alpha, beta):
    """d x / d alpha of a Beta(alpha, beta) draw near 0 (a Taylor series, in x's own precision)."""
    factor = _digamma(alpha) - _digamma(alpha + beta) - jnp.log(x)
    numer = jnp.ones_like(x)
    series = numer / alpha * (factor + 1 / alpha)
    for i in range(1, 11):
        numer = numer * ((i - beta) * x / i)
        denom = alpha + i
        series = series + numer / denom * (factor + 1 / denom)
    return _nan_to_zero(x * jnp.power(1 - x, -beta) * series)


def _beta_grad_beta_small(x, alpha, beta):
    """d x / d beta of a Beta(alpha, beta) draw near 0 (a Taylor series, in x's own precision)."""
    factor = _digamma(alpha + beta) - _digamma(beta)
    numer, betas, dbetas, series = jnp.ones_like(x), jnp.ones_like(x), jnp.zeros_like(x), factor / alpha
    for i in range(1, 9):
        numer = numer * (-x / i)
        dbetas = dbetas * (beta - i) + betas
        betas = betas * (beta - i)
        series = series + numer / (alpha + i) * (dbetas + factor * betas)
    return _nan_to_zero(-jnp.power(1 - x, 1 - beta) * series)


def _beta_grad_alpha_mid(x, alpha, beta):
    """d x / d alpha of a Beta(alpha, beta) draw for alpha and beta both large (Rice's saddle point expansion,
    with its own polynomial near the mean), in double."""
    total = alpha + beta
    mean = alpha / total
    std = jnp.sqrt(alpha * beta / (total + 1)) / total
    poly = 47 * x * (beta * beta) * (beta * beta) + alpha * (
        (43 + 20 * (16 + 27 * beta) * x) * (beta * beta) * beta
        + alpha
        * (
            3 * (59 + 180 * beta - 90 * x) * (beta * beta)
            + alpha * ((453 + 1620 * beta * (1 - x) - 455 * x) * beta + alpha * (8 * (1 - x) * (135 * beta - 11)))
        )
    )
    prefactor_num = (1 + 12 * alpha) * (1 + 12 * beta) / (total * total)
    prefactor_den = 12960 * alpha * alpha * alpha * beta * beta * (1 + 12 * total)
    near_mean = prefactor_num / (1 - x) * poly / prefactor_den
    prefactor = -x / jnp.sqrt(2 * alpha * beta / total)
    stirling = (
        (1 + 1 / (12 * alpha) + 1 / (288 * alpha * alpha))
        * (1 + 1 / (12 * beta) + 1 / (288 * beta * beta))
        / (1 + 1 / (12 * total) + 1 / (288 * total * total))
    )
    axbx = alpha * (x - 1) + beta * x
    term1 = (2 * (alpha * alpha) * (x - 1) + alpha * beta * (x - 1) - x * (beta * beta)) / (
        jnp.sqrt(2 * alpha / beta) * jnp.power(total, 1.5) * axbx * axbx
    )
    term2 = 0.5 * jnp.log(alpha / (total * x))
    term3 = jnp.sqrt(8 * alpha * beta / total) / (beta * x + alpha * (x - 1))
    term4 = jnp.power(beta * jnp.log(beta / (total * (1 - x))) + alpha * jnp.log(alpha / (total * x)), -1.5)
    saddle = stirling * prefactor * (term1 + term2 * (term3 + jnp.where(x < mean, term4, -term4)))
    return jnp.where((mean - 0.1 * std <= x) & (x <= mean + 0.1 * std), near_mean, saddle)


def _beta_grad_rational(x, alpha, total):
    """torch's rational correction to an analytic approximation of d x / d alpha, in double."""
    u = jnp.log(x)
    a = jnp.log(alpha) - u
    b = jnp.log(total) - a
    p, q = jnp.zeros_like(x), jnp.zeros_like(x)
    for i, pow_u in enumerate((1.0, u, u * u)):
        for j, pow_a in enumerate((1.0, a, a * a)):
            c0, c1 = _DIRICHLET_RATIONAL[0][i][j], _DIRICHLET_RATIONAL[1][i][j]
            p = p + pow_u * pow_a * (c0[0] + b * (c0[1] + b * (c0[2] + b * c0[3])))
            q = q + pow_u * pow_a * (c1[0] + b * (c1[1] + b * (c1[2] + b * c1[3])))
    return p, q


def _torch_dirichlet_gradient(x, alpha, total):
    """torch's dirichlet_grad_one, elementwise: -(d/dalpha cdf(x; alpha, total - alpha)) / pdf / (1 - x) of a
    coordinate x of a Dirichlet draw, whose marginal is Beta(alpha, total - alpha)."""
    x64, alpha64, total64 = x.astype(jnp.float64), alpha.astype(jnp.float64), total.astype(jnp.float64)
    beta, beta64 = total - alpha, total64 - alpha64
    boundary = total * x * (1 - x)
    p, q = _beta_grad_rational(x64, alpha64, total64)
    approx = x64 * (_digamma(total) - _digamma(alpha)).astype(jnp.float64) / beta64
    result = jnp.where(
        (x <= 0.5) & (boundary < 2.5),
        _beta_grad_alpha_small(x, alpha, beta),
        jnp.where(
            (x >= 0.5) & (boundary < 0.75),
            -_beta_grad_beta_small(1 - x, beta, alpha),
            jnp.where(
                (alpha > 6) & (beta > 6),
                _beta_grad_alpha_mid(x64, alpha64, beta64).astype(x.dtype),
                (p / q * approx).astype(x.dtype),
            ),
        ),
    )
    return result.astype(x.dtype)


_DIRICHLET_RATIONAL = (
    (
        (
            (1.003668233, -0.01061107488, -0.0657888334, 0.01201642863),
            (0.6336835991, -0.3557432599, 0.05486251648, -0.001465281033),
            (-0.03276231906, 0.004474107445, 0.002429354597, -0.0001557569013),
        ),
        (
            (0.221950385, -0.3187676331, 0.01799915743, 0.01074823814),
            (-0.2951249643, 0.06219954479, 0.01535556598, 0.001550077057),
            (0.02155310298, 0.004170831599, 0.001292462449, 6.976601077e-05),
        ),
        (
            (-0.05980841433, 0.008441916499, 0.01085618172, 0.002319392565),
            (0.02911413504, 0.01400243777, -0.002721828457, 0.000751041181),
            (0.005900514878, -0.001936558688, -9.495446725e-06, 5.385558597e-05),
        ),
    ),
    (
        (
            (1, -0.02924021934, -0.04438342661, 0.007285809825),
            (0.6357567472, -0.3473456711, 0.05454656494, -0.002407477521),
            (-0.03301322327, 0.004845219414, 0.00231480583, -0.0002307248149),
        ),
        (
            (0.5925320577, -0.1757678135, 0.01505928619, 0.000564515273),
            (0.1014815858, -0.06589186703, 0.01272886114, -0.0007316646956),
            (-0.007258481865, 0.001096195486, 0.0003934994223, -4.12701925e-05),
        ),
        (
            (0.06469649321, -0.0236701437, 0.002902096474, -5.896963079e-05),
            (0.001925008108, -0.002869809258, 0.0008000589141, -6.063713228e-05),
            (-0.0003477407336, 6.959756487e-05, 1.097287507e-05, -1.650964693e-06),
        ),
    ),
)


def _dirichlet_tangent(concentration, drawn, d_concentration):
    # torch's backward gives grad_c = D * (g - sum(x * g)) for D = dirichlet_grad(x, c, sum(c)); its transpose,
    # dx = D * dc - x * sum(D * dc), is the tangent
    total = jnp.broadcast_to(concentration.sum(-1, keepdims=True), concentration.shape)
    scaled = _torch_dirichlet_gradient(drawn, concentration, total) * d_concentration
    return scaled - drawn * scaled.sum(-1, keepdims=True)


# Dirichlet(concentration) draws (the simplex along the last dimension)
dirichlet_draw = _draw_with_tangent("dirichlet_draw", _dirichlet_tangent)
