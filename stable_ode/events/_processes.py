"""Point processes at a site (NEURON's `POINT_PROCESS`es at `sec(x)`): what a
user writes. `build(..., point_processes=...)` turns each kind into one
vectorised group (`stable_ode.events._groups`).

Parameters, units and defaults are NEURON's (`stim.mod`, `expsyn.mod`,
`exp2syn.mod`, `svclmp.mod`, `vclmp.mod` and the built-in `AlphaSynapse`);
every current is in nA into the one compartment that contains the site.
"""

import equinox as eqx

from .._errors import check_number, InvalidArgument
from .._stimulus import Site


_check = check_number


def _check_site(owner, site) -> None:
    if not isinstance(site, Site):
        raise InvalidArgument(owner, "site", f"must be a stable_ode.Site, got {site!r}")


class IClamp(eqx.Module):
    """NEURON's `IClamp`: `amp` nA injected (positive depolarises) from `delay`
    ms (NEURON's `del`) for `dur` ms. Built as a `stable_ode.StepCurrent` (the
    same current, sampled at the middle of each fixed step as NEURON does)."""

    site: Site
    delay: float = 0.0
    dur: float = 0.0
    amp: float = 0.0
    name: str | None = None

    def __check_init__(self):
        _check_site("IClamp", self.site)
        _check("IClamp", "del", self.delay, ge=0)
        _check("IClamp", "dur", self.dur, ge=0)
        _check("IClamp", "amp", self.amp)


class ExpSyn(eqx.Module):
    """NEURON's `ExpSyn`: `i = g·(v - e)` (nA, outward), `dg/dt = -g/tau`
    (g in µS), and each arriving NetCon event adds its `weight` (µS) to `g`.

    **Fields:** `tau` decay time constant, ms (> 0; default 0.1); `e` reversal
    potential, mV (default 0); `site`; `name` (how NetCons and recordings name
    it)."""

    site: Site
    tau: float = 0.1
    e: float = 0.0
    name: str | None = None

    def __check_init__(self):
        _check_site("ExpSyn", self.site)
        _check("ExpSyn", "tau", self.tau, gt=0)
        _check("ExpSyn", "e", self.e)


class Exp2Syn(eqx.Module):
    """NEURON's `Exp2Syn`: `g = B - A` (µS), `i = g·(v - e)` (nA),
    `dA/dt = -A/tau1`, `dB/dt = -B/tau2`; an event of `weight` µS adds
    `weight·factor` to both `A` and `B`, with NEURON's normalisation
    `factor = 1/(exp(-tp/tau2) - exp(-tp/tau1))`,
    `tp = tau1·tau2/(tau2 - tau1)·log(tau2/tau1)`, so a lone event of weight
    `w` peaks at `g = w`. As NEURON's INITIAL block, `tau1` is taken as
    `0.9999·tau2` where `tau1/tau2 > 0.9999` and as `1e-9·tau2` where it is
    below `1e-9`.

    **Fields:** `tau1` rise time constant, ms (> 0; default 0.1); `tau2` decay
    time constant, ms (> 0; default 10); `e` reversal potential, mV (0)."""

    site: Site
    tau1: float = 0.1
    tau2: float = 10.0
    e: float = 0.0
    name: str | None = None

    def __check_init__(self):
        _check_site("Exp2Syn", self.site)
        _check("Exp2Syn", "tau1", self.tau1, gt=0)
        _check("Exp2Syn", "tau2", self.tau2, gt=0)
        _check("Exp2Syn", "e", self.e)


class AlphaSynapse(eqx.Module):
    """NEURON's built-in `AlphaSynapse`: from `onset` (ms) the conductance
    `g = gmax·x·exp(1 - x)`, `x = (t - onset)/tau` (µS; 0 before `onset`),
    `i = g·(v - e)` (nA). As in NEURON's fixed step, `g` is sampled at the
    middle of each step.

    **Fields:** `onset`, ms (default 0); `tau`, ms (> 0; default 0.1); `gmax`,
    µS (default 0); `e`, mV (default 0)."""

    site: Site
    onset: float = 0.0
    tau: float = 0.1
    gmax: float = 0.0
    e: float = 0.0
    name: str | None = None

    def __check_init__(self):
        _check_site("AlphaSynapse", self.site)
        _check("AlphaSynapse", "onset", self.onset)
        _check("AlphaSynapse", "tau", self.tau, gt=0)
        _check("AlphaSynapse", "gmax", self.gmax)
        _check("AlphaSynapse", "e", self.e)


class SEClamp(eqx.Module):
    """NEURON's `SEClamp`: a single-electrode voltage clamp with series
    resistance `rs` (MΩ) and three levels: `vc = amp1` (mV) for `t < dur1`,
    `amp2` until `dur1 + dur2`, `amp3` until `dur1 + dur2 + dur3` (ms), then
    off (`i = 0`). It injects `i = (vc - v)/rs` nA (positive depolarises).

    As NEURON's fixed step, the level of a step is the one at its middle, and
    the recorded `i` is `(vc - v)/rs` with the voltage at the end of the step
    (NEURON's `after_cvode` recomputation). Recordable variables: `i` (nA),
    `vc` (mV).

    **Fields:** `rs`, MΩ (> 0; default 1); `dur1`, `dur2`, `dur3`, ms (>= 0;
    default 0); `amp1`, `amp2`, `amp3`, mV (default 0)."""

    site: Site
    rs: float = 1.0
    dur1: float = 0.0
    amp1: float = 0.0
    dur2: float = 0.0
    amp2: float = 0.0
    dur3: float = 0.0
    amp3: float = 0.0
    name: str | None = None

    def __check_init__(self):
        _check_site("SEClamp", self.site)
        _check("SEClamp", "rs", self.rs, gt=0)
        for k in (1, 2, 3):
            _check("SEClamp", f"dur{k}", getattr(self, f"dur{k}"), ge=0)
            _check("SEClamp", f"amp{k}", getattr(self, f"amp{k}"))


class VClamp(eqx.Module):
    """NEURON's `VClamp` (`vclmp.mod`): a two-electrode voltage clamp, a
    control amplifier of `gain` and time constant `tau2` (ms) driving the
    cell through `rstim` (MΩ), and a measuring amplifier of time constant
    `tau1` (ms), with three levels: the command is `amp[0]` (mV) for
    `t < dur[0]`, `amp[1]` until `dur[0] + dur[1]`, `amp[2]` until
    `dur[0] + dur[1] + dur[2]` (ms), then the clamp is off (`i = 0`).

    Its three states (the amplifier's input `e`, its output `vo`, the
    measured `vi`, all mV) follow NEURON's own discretisation, the `LINEAR
    clamp` block with `t1 = tau1/dt`, `t2 = tau2/dt` over each step of `dt`:
    `vi = v + fac·(vo - v)`, `(1 + t2)·vo - t2·vo₀ = -gain·e`,
    `(1 + t1)·vi - (2 + t1)·e = stim + t1·(vi₀ - e₀)` (`₀`: the values at
    the step's start). It injects `i = (vo - v)/rstim` nA (positive
    depolarises), linear in `v`, so implicit steps treat it exactly as
    NEURON's fixed step does. As NEURON, the level of a step is the one at
    its middle and the recorded `i` is recomputed at the voltage at the
    step's end; the clamp is a fixed-step model (NEURON refuses it under
    CVODE: its dynamics depend on the step). Recordable: `i` (nA), `vo`,
    `e`, `vi` (mV). The sample at `t = 0` of `i` is 0 (NEURON's is computed
    with its `dt`).

    **Fields:** `dur` (3 durations, ms, >= 0; default 0), `amp` (3 levels, mV;
    default 0), `gain` (default 1e5), `rstim` (MΩ, > 0; default 1), `tau1`
    (ms, >= 0; default 0.001), `tau2` (ms, >= 0; default 0), `fac` (default
    0)."""

    site: Site
    dur: tuple[float, float, float] = (0.0, 0.0, 0.0)
    amp: tuple[float, float, float] = (0.0, 0.0, 0.0)
    gain: float = 1e5
    rstim: float = 1.0
    tau1: float = 0.001
    tau2: float = 0.0
    fac: float = 0.0
    name: str | None = None

    def __check_init__(self):
        _check_site("VClamp", self.site)
        for f in ("dur", "amp"):
            x = getattr(self, f)
            if not isinstance(x, (tuple, list)) or len(x) != 3:
                raise InvalidArgument(
                    "VClamp", f, f"must be 3 numbers (NEURON's {f}[0..2]), got {x!r}"
                )
            for j, xj in enumerate(x):
                _check("VClamp", f"{f}[{j}]", xj, ge=0 if f == "dur" else None)
        _check("VClamp", "gain", self.gain, ge=0)
        _check("VClamp", "rstim", self.rstim, gt=0)
        _check("VClamp", "tau1", self.tau1, ge=0)
        _check("VClamp", "tau2", self.tau2, ge=0)
        _check("VClamp", "fac", self.fac)


POINT_PROCESS_KINDS = {
    "IClamp": IClamp,
    "ExpSyn": ExpSyn,
    "Exp2Syn": Exp2Syn,
    "AlphaSynapse": AlphaSynapse,
    "SEClamp": SEClamp,
    "VClamp": VClamp,
}
"""The point-process classes by NEURON's name."""
