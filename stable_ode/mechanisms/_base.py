"""The mechanism (channel) interface.

A mechanism is an `eqx.Module` whose fields are its parameters (conductances in
S/cm², reversal potentials in mV, ...). It declares how its states move through
`kinetics(v, states, env)`, returning one `AbstractKinetics` per state (a
`Relaxation` for a gate, a `RateEquation` for anything else), and its membrane
current through `current(v, states, env)`. Both see the membrane potential, the
mechanism's own states and an `Environment` (temperature and the compartments'
geometry). The stiff solvers update each state with its kinetics' own `update`
for frozen voltage; vector-field solvers use `rhs`.
"""

import abc
import itertools
from typing import ClassVar

import equinox as eqx
from jaxtyping import Array, ArrayLike, Float

from ._env import Environment
from ._ions import UseIon
from ._kinetics import AbstractKinetics, Relaxation
from ._scheme import MarkovScheme


def steady_states(owner, kinetics: dict[str, AbstractKinetics], like=None):
    """`inf` of every `Relaxation` in `kinetics`, the steady state of every
    `MarkovScheme` (at the shape of `like`, the voltages); a clear error for
    the rest."""
    out = {}
    for name, kin in kinetics.items():
        if isinstance(kin, MarkovScheme) and like is not None:
            out.update(zip(kin.states, kin.steady_state(like)))
            continue
        if not isinstance(kin, Relaxation):
            raise TypeError(
                f"{type(owner).__name__}: state {name!r} has {type(kin).__name__} "
                "kinetics, which have no built-in steady state; implement "
                f"{type(owner).__name__}.init_states(v, env)"
            )
        out[name] = kin.inf
    return out


def _kinetics_without_states(owner, v, env):
    try:
        return owner.kinetics(v, {}, env)
    except KeyError as e:
        raise TypeError(
            f"{type(owner).__name__}.kinetics reads state {e.args[0]!r}, so the "
            "default initial states (each gate's steady state at v, computed "
            f"without states) do not apply; implement "
            f"{type(owner).__name__}.init_states(v, env)"
        ) from None


# NEURON numbers mechanism types in the order it registers them: its built-ins
# first (`pas` is 2, `hh` 7), then every loaded mechanism in load order. Other
# mechanism classes take their place after NEURON's built-ins, in the order
# they are defined (`load_nmodl` defines its classes in the order of its files).
_MECHANISM_TYPES = itertools.count(100)


class AbstractMechanism(eqx.Module):
    """A membrane mechanism: states and a transmembrane current.

    Subclasses are final `eqx.Module`s whose floating-point fields are parameters;
    when inserted into `n` compartments each field becomes an array of shape `(n,)`,
    so every compartment's parameter is a trainable leaf. All methods act
    elementwise on arrays of compartments.

    Implement:

    - `kinetics(v, states, env) -> dict[str, AbstractKinetics]` (may be empty):
      how each state moves, with `v` the membrane potential (mV), `states` the
      mechanism's states (a dict of arrays; `{}` when `init_states` is the
      default) and `env` an `Environment` (`celsius` °C, `area` cm², `diam` and
      `length` µm, `volume` µm³). Gates are `Relaxation`s (`alpha_beta_gate`,
      `inf_tau_gate`); any other state is a `RateEquation`.
    - `current(v, states, env) -> current density` in mA/cm², outward
      positive (NEURON's convention). It may be any differentiable function of
      `v`: implicit solvers linearise it exactly with `jax.jvp`.
    - optionally `init_states(v, env)`: the initial value of every state. The
      default is each `Relaxation`'s steady state at `v` (NEURON's
      `finitialize`), with `kinetics` called with `states={}`; a mechanism with
      a `RateEquation` state, or whose kinetics read its states, implements it.
    - optionally `range_variables(v, states, env)`: its `RANGE` variables that
      are not states (conductances, currents, parameters), recordable as
      `"<name>_<suffix>"` (default: none).

    Ions (NEURON's `USEION`): declare them in the class variable `ions`, a
    tuple of `UseIon`s (default: none). The mechanism then sees each ion as
    `env.ion(name)` (an `IonView`: `inside`, `outside` mM, `reversal` mV,
    `current` mA/cm²); a mechanism writing `<ion>i` (or `<ion>o`) has a state of
    exactly that name (`cai`), the ion's concentration in its compartments, or
    names the state that holds it in the class variable `concentration_states`
    (`{"cai": "ca"}`, as `load_nmodl` does for `cai = ca` in a `KINETIC`
    block; default: none); a mechanism writing `i<ion>` returns from `current`
    a dict `{ion: density, ..., "nonspecific": density}` (mA/cm²) whose sum is
    its membrane current. A mechanism that reads `i<ion>` sees the ion's total
    current in `kinetics`, its own share included when it writes it too.

    Every state's kinetics are evaluated at the states of the start of a stage
    and vary only in the state's own value (see `AbstractKinetics`).

    `mechanism_type` (a class variable) is the mechanism's place in NEURON's
    mechanism list: NEURON's type index for the built-ins (`Passive` 2, `HH`
    7), and for every other class a number above NEURON's built-ins, in the
    order the classes are defined (`load_nmodl`: in the order of its files,
    as `nrnivmodl` registers them). `BackwardEuler` advances the mechanisms
    that write a concentration first, the highest `mechanism_type` first, as
    NEURON does (see `docs/ions.md`); a subclass may set it.

    A mechanism written for the former interface, `gates(v, celsius) ->
    dict[str, Gate]` and `current(v, states, celsius)`, still works: the
    default `kinetics` calls `gates(v, env.celsius)`, and `current` receives
    the `Environment` in place of `celsius`.

    Use `stable_ode.safe_exp`, `vtrap`, `x_over_expm1` in rate functions so that
    no voltage can make them overflow or divide 0 by 0.
    """

    ions: ClassVar[tuple[UseIon, ...]] = ()
    concentration_states: ClassVar[dict[str, str]] = {}
    mechanism_type: ClassVar[int] = 0

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if "mechanism_type" not in cls.__dict__:
            cls.mechanism_type = next(_MECHANISM_TYPES)

    def kinetics(
        self,
        v: Float[Array, " n"],
        states: dict[str, Float[Array, " n"]],
        env: Environment,
    ) -> dict[str, AbstractKinetics]:
        """Kinetics of every state at membrane potential `v` (mV)."""
        del states
        return self.gates(v, env.celsius)

    def gates(
        self, v: Float[Array, " n"], celsius: Float[ArrayLike, ""]
    ) -> dict[str, Relaxation]:
        """The former interface (gates depending on `v` and `celsius` only)."""
        raise TypeError(
            f"{type(self).__name__} defines no kinetics: implement "
            f"kinetics(v, states, env) (or the former gates(v, celsius)), "
            "returning {} for a mechanism without states"
        )

    @abc.abstractmethod
    def current(
        self,
        v: Float[Array, " n"],
        states: dict[str, Float[Array, " n"]],
        env: Environment,
    ) -> Float[Array, " n"] | dict[str, Float[Array, " n"]]:
        """Outward current density, mA/cm² (or a dict of them by ion, see the
        class docstring)."""

    def range_variables(
        self,
        v: Float[Array, " n"],
        states: dict[str, Float[Array, " n"]],
        env: Environment,
    ) -> dict[str, Float[Array, " n"]]:
        """The mechanism's `RANGE` variables that are not states, by their NEURON
        names without the suffix (`hh`'s `gna`, NEURON's `seg.gna_hh`), at
        membrane potential `v` (mV), states `states` and `env`: what a recording
        `"<name>_<suffix>"` reads. Conductances in S/cm², currents in mA/cm²,
        potentials in mV, as NEURON. Default: none."""
        del v, states, env
        return {}

    def init_states(
        self, v: Float[Array, " n"], env: Environment
    ) -> dict[str, Float[Array, " n"]]:
        """Initial states: each gate's steady state at `v` (NEURON's
        `finitialize`)."""
        return steady_states(self, _kinetics_without_states(self, v, env), like=v)
