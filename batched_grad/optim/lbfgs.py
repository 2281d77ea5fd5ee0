"""L-BFGS as torch.optim.LBFGS computes it: one step runs up to max_iter quasi-Newton iterations on the flattened
parameters, each direction from the two-loop recursion over the last history_size curvature pairs, with a fixed
step (lr) or a strong-Wolfe line search (cubic interpolation, bracketing and zoom); the state (direction, step,
history, previous gradient and loss, counters) persists between steps as torch's."""

from .. import _factories
from .._grad_mode import enable_grad, no_grad
from .._ops.conveniences import view_as_complex, view_as_real
from .._ops.shape import cat
from .._tensor import Tensor
from .optimizer import Optimizer


def _cubic_interpolate(x1, f1, g1, x2, f2, g2, bounds=None):
    """The minimizer of the cubic through (x1, f1) and (x2, f2) with slopes g1, g2, clamped to `bounds` (default:
    between x1 and x2); the bounds' midpoint where the cubic has no minimum."""
    low, high = bounds if bounds is not None else ((x1, x2) if x1 <= x2 else (x2, x1))
    d1 = g1 + g2 - 3 * (f1 - f2) / (x1 - x2)
    d2_square = d1**2 - g1 * g2
    if d2_square < 0:
        return (low + high) / 2.0
    d2 = d2_square.sqrt()
    if x1 <= x2:
        at = x2 - (x2 - x1) * ((g2 + d2 - d1) / (g2 - g1 + 2 * d2))
    else:
        at = x1 - (x1 - x2) * ((g1 + d2 - d1) / (g1 - g2 + 2 * d2))
    return min(max(at, low), high)


class _Point:
    """A trial step t along the direction: the loss f, flat gradient g and directional derivative gtd there."""

    def __init__(self, t, f, g, gtd):
        self.t, self.f, self.g, self.gtd = t, f, g, gtd


def _strong_wolfe(obj_func, x, t, d, f, g, gtd, c1=1e-4, c2=0.9, tolerance_change=1e-9, max_ls=25):
    """torch.optim.lbfgs._strong_wolfe, which line searches outside torch import: as _wolfe_search, with
    obj_func(x, t, d) giving the loss and flat gradient at x + t d."""

    def evaluate(step):
        loss, flat_grad = obj_func(x, step, d)
        flat_grad = flat_grad.clone()  # obj_func may hand back a buffer it reuses, as torch's clone guards against
        return loss, flat_grad, flat_grad.dot(d)

    return _wolfe_search(evaluate, t, d, f, g, gtd, c1, c2, tolerance_change, max_ls)


def _wolfe_search(evaluate, t, d, f, g, gtd, c1=1e-4, c2=0.9, tolerance_change=1e-9, max_ls=25):
    """A step satisfying the strong Wolfe conditions along d from the point (0, f, g, gtd), evaluate(t) giving
    (loss, flat gradient, directional derivative) there: (loss, flat gradient, step, evaluations)."""
    d_norm = d.abs().max()
    previous, trial = _Point(0, f, g, gtd), _Point(t, *evaluate(t))
    evals, iterations, bracket, done = 1, 0, None, False
    while iterations < max_ls:  # widen the step until the minimum is bracketed or the step is acceptable
        if trial.f > f + c1 * trial.t * gtd or (iterations > 1 and trial.f >= previous.f):
            bracket = [previous, trial]
            break
        if abs(trial.gtd) <= -c2 * gtd:
            bracket, done = [trial], True
            break
        if trial.gtd >= 0:
            bracket = [previous, trial]
            break
        step = _cubic_interpolate(
            previous.t,
            previous.f,
            previous.gtd,
            trial.t,
            trial.f,
            trial.gtd,
            bounds=(trial.t + 0.01 * (trial.t - previous.t), trial.t * 10),
        )
        previous, trial = trial, _Point(step, *evaluate(step))
        evals, iterations = evals + 1, iterations + 1
    if iterations == max_ls:
        bracket = [_Point(0, f, g, None), trial]
    low, high = (0, 1) if bracket[0].f <= bracket[-1].f else (1, 0)
    stalled = False
    while not done and iterations < max_ls:  # zoom into the bracket
        if abs(bracket[1].t - bracket[0].t) * d_norm < tolerance_change:
            break
        step = _cubic_interpolate(
            bracket[0].t, bracket[0].f, bracket[0].gtd, bracket[1].t, bracket[1].f, bracket[1].gtd
        )
        step, stalled = _away_from_ends(step, max(p.t for p in bracket), min(p.t for p in bracket), stalled)
        trial = _Point(step, *evaluate(step))
        evals, iterations = evals + 1, iterations + 1
        if trial.f > f + c1 * step * gtd or trial.f >= bracket[low].f:
            bracket[high] = trial
            low, high = (0, 1) if bracket[0].f <= bracket[1].f else (1, 0)
            continue
        if abs(trial.gtd) <= -c2 * gtd:
            done = True
        elif trial.gtd * (bracket[high].t - bracket[low].t) >= 0:
            bracket[high] = bracket[low]
        bracket[low] = trial
    best = bracket[low]
    return best.f, best.g, best.t, evals


def _away_from_ends(step, top, bottom, stalled):
    """The zoom's safeguard: a step within 10% of the bracket's width from an end is moved to that distance when
    the previous step also was, or when it falls outside; (step, whether this one was too close)."""
    eps = 0.1 * (top - bottom)
    if not min(top - step, step - bottom) < eps:
        return step, False
    if stalled or step >= top or step <= bottom:
        return (top - eps if abs(step - top) < abs(step - bottom) else bottom + eps), False
    return step, True


class LBFGS(Optimizer):
    """Limited-memory BFGS over all parameters as one flat vector; step(closure) needs the closure, which
    recomputes the loss and its gradients."""

    def __init__(
        self,
        params,
        lr=1,
        max_iter=20,
        max_eval=None,
        tolerance_grad=1e-7,
        tolerance_change=1e-9,
        history_size=100,
        line_search_fn=None,
    ):
        if isinstance(lr, Tensor) and lr.numel() != 1:
            raise ValueError("Tensor lr must be 1-element")
        if not 0.0 <= lr:
            raise ValueError(f"Invalid learning rate: {lr}")
        max_eval = max_iter * 5 // 4 if max_eval is None else max_eval
        super().__init__(
            params,
            dict(
                lr=lr,
                max_iter=max_iter,
                max_eval=max_eval,
                tolerance_grad=tolerance_grad,
                tolerance_change=tolerance_change,
                history_size=history_size,
                line_search_fn=line_search_fn,
            ),
        )
        if len(self.param_groups) != 1:
            raise ValueError("LBFGS doesn't support per-parameter options (parameter groups)")
        self._params = self.param_groups[0]["params"]

    # ---- the parameters as one flat vector ----------------------------------------------------------------
    def _flat_grad(self):
        parts = []
        for p in self._params:
            if p.grad is None:
                grad = _factories.zeros(p.numel(), dtype=p.dtype)
            else:  # a sparse gradient (Embedding(sparse=True)'s) is read densely, as torch's
                grad = (p.grad.to_dense() if p.grad.is_sparse else p.grad).reshape(-1)
            parts.append(view_as_real(grad).reshape(-1) if grad.is_complex() else grad)
        return cat(parts, 0)

    def _add_step(self, t, d):
        """Every parameter moved by t times its part of the flat direction d."""
        offset = 0
        for p in self._params:
            size = p.numel() * (2 if p.is_complex() else 1)
            part = d[offset : offset + size]
            part = view_as_complex(part.view(*p.shape, 2)) if p.is_complex() else part.view_as(p)
            p.add_(part, alpha=t)
            offset += size

    def _evaluate_along(self, closure, x, d):
        """loss and flat gradient at x + t d, the parameters restored to x after."""

        def evaluate(t):
            self._add_step(t, d)
            loss = float(closure())
            flat_grad = self._flat_grad()
            for p, value in zip(self._params, x):
                p.copy_(value)
            return loss, flat_grad, flat_grad.dot(d)

        return evaluate

    # ---- the step ----------------------------------------------------------------------------------------
    def step(self, closure):
        """Up to max_iter L-BFGS iterations; returns the loss the closure gave first."""

        def with_grad():
            with enable_grad():
                return closure()

        with no_grad():
            return self._iterate(with_grad)

    def _iterate(self, closure):
        group = self.param_groups[0]
        lr, max_iter, max_eval = float(group["lr"]), group["max_iter"], group["max_eval"]
        state = self.state[self._params[0]]
        state.setdefault("func_evals", 0)
        state.setdefault("n_iter", 0)
        first_loss = closure()
        loss, evals = float(first_loss), 1
        state["func_evals"] += 1
        flat_grad = self._flat_grad()
        if flat_grad.abs().max() <= group["tolerance_grad"]:
            return first_loss
        d, t, prev_flat_grad, prev_loss = (state.get(k) for k in ("d", "t", "prev_flat_grad", "prev_loss"))
        for iteration in range(1, max_iter + 1):
            state["n_iter"] += 1
            d = self._direction(state, flat_grad, prev_flat_grad, d, t, group["history_size"])
            prev_flat_grad, prev_loss = flat_grad, loss
            t = (min(1.0, 1.0 / flat_grad.abs().sum()) * lr) if state["n_iter"] == 1 else lr
            gtd = flat_grad.dot(d)
            if gtd > -group["tolerance_change"]:
                break
            loss, flat_grad, t, done, used = self._move(
                closure, group, d, t, loss, flat_grad, gtd, evals, iteration == max_iter
            )
            evals += used
            state["func_evals"] += used
            small_step = d.mul(t).abs().max() <= group["tolerance_change"]
            if (
                iteration == max_iter
                or evals >= max_eval
                or done
                or small_step
                or abs(loss - prev_loss) < group["tolerance_change"]
            ):
                break
        state.update(d=d, t=t, prev_flat_grad=prev_flat_grad, prev_loss=prev_loss)
        return first_loss

    def _move(self, closure, group, d, t, loss, flat_grad, gtd, evals, last):
        """Take the step t d (a strong-Wolfe search for t first, with one): (loss, flat gradient, t, whether the
        gradient is within tolerance_grad, closure evaluations)."""
        search = group["line_search_fn"]
        if search is not None:
            if search != "strong_wolfe":
                raise RuntimeError("only 'strong_wolfe' is supported")
            start = [p.clone() for p in self._params]
            loss, flat_grad, t, used = _wolfe_search(
                self._evaluate_along(closure, start, d), t, d, loss, flat_grad, gtd, max_ls=group["max_eval"] - evals
            )
            self._add_step(t, d)
            return loss, flat_grad, t, bool(flat_grad.abs().max() <= group["tolerance_grad"]), used
        self._add_step(t, d)
        if last:  # torch skips the re-evaluation after the last iteration
            return loss, flat_grad, t, False, 0
        loss = float(closure())
        flat_grad = self._flat_grad()
        return loss, flat_grad, t, bool(flat_grad.abs().max() <= group["tolerance_grad"]), 1

    @staticmethod
    def _direction(state, flat_grad, prev_flat_grad, d, t, history_size):
        """The quasi-Newton direction: -g at the first iteration, else the two-loop recursion over the curvature
        pairs (s, y), after storing the newest pair when its curvature y.s exceeds 1e-10."""
        if state["n_iter"] == 1:
            state.update(old_dirs=[], old_stps=[], ro=[], H_diag=1)
            return flat_grad.neg()
        dirs, steps, ro = state["old_dirs"], state["old_stps"], state["ro"]
        y, s = flat_grad.sub(prev_flat_grad), d.mul(t)
        ys = y.dot(s)
        if ys > 1e-10:
            if len(dirs) == history_size:
                dirs.pop(0), steps.pop(0), ro.pop(0)
            dirs.append(y), steps.append(s), ro.append(1.0 / ys)
            state["H_diag"] = ys / y.dot(y)
        al = state.setdefault("al", [None] * history_size)
        q = flat_grad.neg()
        for i in range(len(dirs) - 1, -1, -1):
            al[i] = steps[i].dot(q) * ro[i]
            q = q.add(dirs[i], alpha=-al[i])
        r = q.mul(state["H_diag"])
        for i in range(len(dirs)):
            be_i = dirs[i].dot(r) * ro[i]
            r = r.add(steps[i], alpha=al[i] - be_i)
        return r
