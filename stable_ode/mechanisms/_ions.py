"""Ions: NEURON's ion model (`USEION`), its constants and the Nernst and GHK helpers.

Names and units are NEURON's: concentrations in mM, reversal potentials in mV,
current densities in mA/cm² (outward positive), valences as integers.

**Public API** (exported from `stable_ode.mechanisms` and `stable_ode`):

- `UseIon(ion, read=(), write=(), valence=None)`: NMODL's `USEION ion READ ...
  WRITE ... VALENCE z`. A mechanism declares them in its class variable
  `ions: ClassVar[tuple[UseIon, ...]]`. `read` names any of `e<ion>`, `<ion>i`,
  `<ion>o`, `i<ion>`; `write` any of `i<ion>`, `<ion>i`, `<ion>o` (writing
  `e<ion>` is not supported). `valence=None`: the model's or the ion's known
  valence (na 1, k 1, ca 2).
- `IonView(inside, outside, reversal, current, valence)`: what a mechanism sees
  of an ion in its compartments (`env.ion("ca")`): `<ion>i`, `<ion>o` (mM),
  `e<ion>` (mV), `i<ion>` (mA/cm², the ion's total membrane current of every
  mechanism writing it, at the stage's states; zero in `init_states`, and in
  `current()` of a mechanism writing an ion current: such a mechanism may not
  read `i<ion>`, an error at build).
- `IonSpecies(inside=None, outside=None, reversal=None, valence=None)`: the
  model's settings for one ion (`build(..., ions={"ca": IonSpecies(...)})`).
- `IonSetting(ion, sections=None, inside=None, outside=None, reversal=None)`:
  per-section overrides (`Cell(..., ions=[IonSetting("k", ["soma"],
  reversal=-85.0)])`); `sections=None`: every section of the cell.
- `FARADAY` (C/mol) and `GAS_CONSTANT` (J/(mol·K)): the values NEURON 9 uses
  (`h.FARADAY`, `h.R`).
- `nernst(ci, co, valence, celsius)` (mV) and `ghk(v, ci, co, valence,
  celsius)` (NEURON's `nrn_ghk`, mA/cm² per cm/s of permeability).

**NEURON's rules** (`ion_style`), per compartment: where a mechanism WRITEs
`<ion>i` or `<ion>o`, that concentration is the writing mechanism's state of
exactly that name, initialised to the ion's initial concentration; where any
mechanism reads or writes a concentration of the ion, the reversal potential
follows Nernst at the model's `celsius` at every stage (with constant
concentrations it is constant); elsewhere the reversal potential is fixed (the
default or the user's). A `reversal` given by the user always fixes it (as
NEURON's `ion_style(..., e_style=1, einit=0, eadvance=0)`).
"""

import dataclasses
import math
from typing import NamedTuple

import equinox as eqx
import jax.numpy as jnp
from jaxtyping import Array, ArrayLike, Float

from .._math import x_over_expm1


FARADAY = 96485.33212331001
"""Faraday's constant, C/mol (NEURON 9's `h.FARADAY`)."""

GAS_CONSTANT = 8.31446261815324
"""The molar gas constant, J/(mol·K) (NEURON 9's `h.R`)."""


class UseIon(NamedTuple):
    """NMODL's `USEION ion READ ... WRITE ... VALENCE z` (see the module docstring)."""

    ion: str
    read: tuple[str, ...] = ()
    write: tuple[str, ...] = ()
    valence: int | None = None


class IonView(eqx.Module):
    """One ion in a mechanism's compartments (arrays of shape `(n,)`).

    **Fields:** `inside` (`<ion>i`, mM), `outside` (`<ion>o`, mM), `reversal`
    (`e<ion>`, mV), `current` (`i<ion>`, mA/cm², outward positive: the sum over
    every mechanism writing it), `valence` (static integer).
    """

    inside: Float[Array, " n"]
    outside: Float[Array, " n"]
    reversal: Float[Array, " n"]
    current: Float[Array, " n"]
    valence: int = eqx.field(static=True)


@dataclasses.dataclass(frozen=True)
class IonSpecies:
    """The model's settings for one ion (`build(..., ions={name: IonSpecies()})`).

    - `inside`, `outside`: initial (or constant) concentrations, mM (> 0).
    - `reversal`: a fixed reversal potential, mV (then never Nernst).
    - `valence`: the ion's charge number (needed for ions other than na, k, ca
      unless every mechanism's `UseIon` gives it).
    """

    inside: float | None = None
    outside: float | None = None
    reversal: float | None = None
    valence: int | None = None


@dataclasses.dataclass(frozen=True)
class IonSetting:
    """Per-section overrides of an ion's settings in a `Cell` (`ions=[...]`).

    - `ion`: the ion's name.
    - `sections`: section names of the cell (`None`: all).
    - `inside`, `outside` (mM), `reversal` (mV): as `IonSpecies`; `None` keeps
      the model's value.
    """

    ion: str
    sections: tuple[str, ...] | None = None
    inside: float | None = None
    outside: float | None = None
    reversal: float | None = None

    def __post_init__(self):
        if self.sections is not None:
            object.__setattr__(self, "sections", tuple(self.sections))


KNOWN_VALENCE = {"na": 1, "k": 1, "ca": 2}
"""Valences NEURON knows without a `VALENCE` statement."""

DEFAULT_INSIDE = {"na": 10.0, "k": 54.4, "ca": 5e-5}
DEFAULT_OUTSIDE = {"na": 140.0, "k": 2.5, "ca": 2.0}
DEFAULT_REVERSAL = {"na": 50.0, "k": -77.0, "ca": 12.5 * math.log(2.0 / 5e-5)}
"""NEURON's defaults (mM, mV); other ions 1 mM inside and outside, e = 0 mV.
`eca`'s default is NEURON's `DEF_eca = 12.5·log(cao/cai)` (132.46 mV), used where
no mechanism reads or writes a calcium concentration."""


def ion_value_problems(setting) -> list[tuple[str, str]]:
    """`(field, problem)` for each bad value of an `IonSpecies` or
    `IonSetting`: concentrations (`inside`, `outside`) must be numbers > 0,
    `reversal` a finite number (`None`: not set)."""
    out = []
    for key in ("inside", "outside", "reversal"):
        x = getattr(setting, key)
        if x is None:
            continue
        ok = isinstance(x, (int, float)) and math.isfinite(x)
        if ok and key != "reversal":
            ok = x > 0
        if not ok:
            what = "a finite number" if key == "reversal" else "a number > 0"
            out.append((key, f"must be {what}, got {x!r}"))
    return out


def ion_defaults(ion: str) -> tuple[float, float, float]:
    """NEURON's default `(inside, outside, reversal)` of `ion` (mM, mM, mV)."""
    return (
        DEFAULT_INSIDE.get(ion, 1.0),
        DEFAULT_OUTSIDE.get(ion, 1.0),
        DEFAULT_REVERSAL.get(ion, 0.0),
    )


def _rt_over_f(celsius) -> Float[Array, ""]:
    """`1000·R·T/F`, mV (NEURON's `ktf`)."""
    return 1e3 * GAS_CONSTANT * (jnp.asarray(celsius) + 273.15) / FARADAY


def nernst(
    ci: Float[ArrayLike, "*shape"],
    co: Float[ArrayLike, "*shape"],
    valence: int,
    celsius: Float[ArrayLike, ""],
) -> Float[Array, "*shape"]:
    """The Nernst potential `1000·R·(celsius + 273.15)/(z·F)·log(co/ci)`, mV, of
    concentrations `ci`, `co` (mM) at `celsius` (°C) for valence `z` (NEURON's
    `nrn_nernst`). Concentrations are clipped at the dtype's smallest normal
    number, so a zero concentration gives a large finite potential."""
    ci = jnp.asarray(ci)
    co = jnp.asarray(co, ci.dtype)
    tiny = jnp.finfo(ci.dtype).tiny
    ratio = jnp.log(jnp.maximum(co, tiny)) - jnp.log(jnp.maximum(ci, tiny))
    return _rt_over_f(celsius).astype(ci.dtype) / valence * ratio


def ghk(
    v: Float[ArrayLike, "*shape"],
    ci: Float[ArrayLike, "*shape"],
    co: Float[ArrayLike, "*shape"],
    valence: int,
    celsius: Float[ArrayLike, ""],
) -> Float[Array, "*shape"]:
    """The Goldman–Hodgkin–Katz current factor, NEURON's `ghk(v, ci, co)`
    (`nrn_ghk`): `1e-3·z·F·(ci·efun(-u) - co·efun(u))` with `u = z·v/ktf`,
    `ktf = 1000·R·(celsius + 273.15)/F` (mV) and `efun(x) = x/(exp(x) - 1)`.

    Units: mA/cm² per cm/s of permeability (`v` mV, `ci`, `co` mM); outward
    positive. Multiply by a permeability (cm/s) for a current density. Finite and
    smooth, with finite gradients, at `v = 0` (the removable singularity of
    `efun`) and at zero concentrations.
    """
    v = jnp.asarray(v)
    u = valence * v / _rt_over_f(celsius).astype(v.dtype)
    return (
        1e-3
        * valence
        * FARADAY
        * (jnp.asarray(ci) * x_over_expm1(-u) - jnp.asarray(co) * x_over_expm1(u))
    )


def ion_variable(variable: str, ions) -> tuple[str, str] | None:
    """`(kind, ion)` of an ion variable name (`"cai"` → `("inside", "ca")`,
    `"cao"` → outside, `"eca"` → reversal, `"ica"` → current) among the ion
    names `ions`; `None` if it names none."""
    for ion in sorted(ions, key=len, reverse=True):
        for kind, name in (
            ("inside", f"{ion}i"),
            ("outside", f"{ion}o"),
            ("reversal", f"e{ion}"),
            ("current", f"i{ion}"),
        ):
            if variable == name:
                return kind, ion
    return None
