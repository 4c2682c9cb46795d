import diffrax as dfx
import equinox as eqx
import jax
import jax.numpy as jnp

from .._model import State
from ._wrapped import AbstractWrappedController


class TimingTolerance(AbstractWrappedController):
    r"""Wraps an adaptive step-size controller so that a voltage error on a steep
    flank counts as what it is, a shift in time.

    Before the wrapped controller sees a step's error estimate, the membrane
    potential's component is divided, compartment by compartment, by

    $$1 + \frac{|v_1 - v_0|}{(t_1 - t_0)\,s}$$

    with `s = slope` (mV/ms). Where `v` moves slower than `s` (between spikes) the
    error is judged as it is, against `atol + rtol·|v|` (mV); where it moves
    faster (the flanks of a spike) the allowed error in `v` grows with the slope,
    so that it stands for a shift in time of about `atol / s` (ms). Gate and
    synapse states are left as they are.

    **Why.** A spike train's timing is set between spikes, where `v` drifts
    slowly to threshold and a small error in `v` moves the next spike a lot; on
    the upstroke, an error of the same size moves it by `δv / |dv/dt|`, hundreds
    of times less. Plain error control spends its steps where the local error is
    largest — on the spikes — and takes long steps in between.

    The default `slope` and the comparison with plain error control are measured
    in `benchmarks/work_precision.py` (spike-time error against steps).

    Use it with `rtol=0`: a membrane potential has no natural zero (`-65 mV` at
    rest), so a relative tolerance on it only makes the absolute one looser.

    ```python
    controller = stable_ode.TimingTolerance(
        diffrax.PIDController(rtol=0, atol=1e-5), slope=3.0
    )
    sim = stable_ode.simulate(model, 100.0, 0.01, solver=stable_ode.CrankNicolson(),
                              controller=controller)
    ```

    It needs the state of a `stable_ode.MembraneTerm` (a `stable_ode.State`). The
    weight is not differentiated through (as diffrax's controllers do not
    differentiate through their error norm). A non-finite step gets weight 1, so
    its error stays non-finite for `NonFiniteRejecting` (which `simulate` puts
    around every adaptive controller) to reject.
    """

    controller: dfx.AbstractAdaptiveStepSizeController
    slope: float = 3.0

    def __check_init__(self):
        if isinstance(self.slope, (int, float)) and not self.slope > 0:
            raise ValueError(f"slope must be > 0 (mV/ms), got {self.slope}")

    def adapt_step_size(
        self,
        t0,
        t1,
        y0,
        y1_candidate,
        args,
        y_error,
        error_order,
        controller_state,
    ):
        if y_error is not None:
            if not isinstance(y0, State):
                raise ValueError(
                    "TimingTolerance needs the state of a stable_ode.MembraneTerm "
                    f"(a stable_ode.State), got {type(y0).__name__}"
                )
            y_error = eqx.tree_at(
                lambda e: e.v,
                y_error,
                y_error.v * _weight(y0.v, y1_candidate.v, t1 - t0, self.slope),
            )
        return self.controller.adapt_step_size(
            t0, t1, y0, y1_candidate, args, y_error, error_order, controller_state
        )


def _weight(v0, v1, dt, slope):
    """`1 / (1 + |v1 - v0| / (dt·slope))`; 1 where that is not finite."""
    rate = jnp.abs(v1 - v0) / (dt * slope)
    w = jnp.where(jnp.isfinite(rate), 1 / (1 + rate), 1)
    return jax.lax.stop_gradient(w.astype(v0.dtype))


TimingTolerance.__init__.__doc__ = """**Arguments:**

- `controller`: the adaptive controller that decides the steps, e.g.
    `diffrax.PIDController(rtol=0, atol=1e-5)`.
- `slope`: the rate of change of `v` (mV/ms, > 0) above which a voltage error
    is judged as a timing error (default 3 mV/ms).
"""
