"""The models the benchmarks share, built for stable_ode, NEURON and Jaxley.

The forward cases (`COMPARTMENT`, `CABLE`: NEURON's `hh` at 6.3 °C, Ra = 100
Ω·cm, cm = 1 µF/cm², v_init = -65 mV with the gates at steady state, a 0.1 nA
step from 5 ms for 40 ms) are built by `build_ours`, `build_neuron` and
`build_jaxley` from one description (`describe`), and reused by `forward`,
`gradient`, `profile_batch` and `gpu`; `gpu`'s sizes (`build_cable`,
`build_compartment`, `build_tree`, `build_network` and their Jaxley twins) are
built here from the same cases, a binary tree of `benchmarks/branched.py`'s
branches, and `benchmarks/network.py`'s network. Nothing here imports
JAX at module level (the `gpu` driver process does not).
"""

import dataclasses


DT = 0.025  # ms
RA = 100.0  # Ω·cm
CM = 1.0  # µF/cm²
V_INIT = -65.0  # mV
AMPLITUDE, DELAY, DURATION = 0.1, 5.0, 40.0  # nA, ms, ms


@dataclasses.dataclass(frozen=True)
class Case:
    """One benchmark geometry (µm, ms) and the solver pairs it is timed with."""

    name: str
    length: float
    diameter: float
    n_compartments: int
    t_max: float
    stim_position: float
    record_positions: tuple[float, ...]
    solvers: tuple[tuple[str, str], ...]  # (our solver class name, Jaxley solver)


COMPARTMENT = Case(
    name="HH compartment, 100 ms",
    length=20.0,
    diameter=20.0,
    n_compartments=1,
    t_max=100.0,
    stim_position=0.5,
    record_positions=(0.5,),
    solvers=(
        ("BackwardEuler", "bwd_euler"),
        ("BackwardEuler+safe", "bwd_euler"),
        ("CrankNicolson", "crank_nicolson"),
        ("ExponentialEuler", "bwd_euler"),
    ),
)
CABLE = Case(
    name="HH cable, 100 comp., 50 ms",
    length=1000.0,
    diameter=2.0,
    n_compartments=100,
    t_max=50.0,
    stim_position=0.0,
    record_positions=(0.0, 1.0),
    solvers=(
        ("BackwardEuler", "bwd_euler"),
        ("BackwardEuler+safe", "bwd_euler"),
        ("CrankNicolson", "crank_nicolson"),
    ),
)


def describe(case: Case):
    """The stable_ode description of `case`: `(cells, stimuli, recordings)` (also
    what the NEURON model is made from)."""
    import stable_ode as so

    cell = so.Cell(
        "cell",
        [so.Section("sec", case.length, case.diameter, case.n_compartments)],
        [so.Insert(so.HH())],
        axial_resistivity=RA,
        capacitance=CM,
    )
    stim = so.StepCurrent(
        so.Site("cell", "sec", case.stim_position), AMPLITUDE, DELAY, DURATION
    )
    recs = [
        so.Recording(f"r{k}", so.Site("cell", "sec", x))
        for k, x in enumerate(case.record_positions)
    ]
    return [cell], [stim], recs


def build_ours(case: Case, dtype):
    """The stable_ode `MembraneModel` of `case`."""
    import stable_ode as so

    cells, stims, recs = describe(case)
    return so.build(cells, stims, recs, celsius=6.3, v_init=V_INIT, dtype=dtype)


def build_neuron(case: Case):
    """The NEURON model of `case` (`benchmarks._neuron.NeuronModel`), or `None`
    without NEURON."""
    from ._neuron import have_neuron, NeuronModel

    if not have_neuron():
        return None
    cells, stims, recs = describe(case)
    return NeuronModel(
        cells, stims, recs, t_stop=case.t_max, dt=DT, celsius=6.3, v_init=V_INIT
    )


def insert_hh(module, ra: float = RA, cm: float = CM, v_init: float = V_INIT):
    """Set a Jaxley `module` up as the benchmarks' cells: `ra` (Ω·cm), `cm`
    (µF/cm²), Jaxley's `HH` everywhere, `v_init` (mV) and the gates' steady state
    there."""
    from jaxley.channels import HH

    module.set("axial_resistivity", ra)
    module.set("capacitance", cm)
    module.insert(HH())
    module.set("v", v_init)
    module.init_states()


def with_hh_conductances(model, p):
    """`model` (one `hh` mechanism group first) with `gnabar`, `gkbar` and `gl`
    set to `p[0]`, `p[1]`, `p[2]` (S/cm²) in every compartment: the parameters of
    the cable gradient benchmarks."""
    import equinox as eqx
    import jax.numpy as jnp

    n = model.n_compartments
    hh = lambda m: m.mechanisms[0].mechanism  # noqa: E731
    return eqx.tree_at(
        lambda m: (hh(m).gnabar, hh(m).gkbar, hh(m).gl),
        model,
        (jnp.full(n, p[0]), jnp.full(n, p[1]), jnp.full(n, p[2])),
    )


def build_jaxley(case: Case):
    """The Jaxley module of `case` (dtype follows JAX's x64 flag)."""
    import jaxley as jx

    comp = jx.Compartment()
    module = comp if case.n_compartments == 1 else jx.Branch(comp, case.n_compartments)
    module.set("length", case.length / case.n_compartments)  # per compartment
    module.set("radius", case.diameter / 2)
    insert_hh(module)

    def comp_at(x):
        # NEURON's sec(x): compartment min(floor(x·n), n-1), as stable_ode uses.
        k = min(int(x * case.n_compartments), case.n_compartments - 1)
        return module if case.n_compartments == 1 else module.comp(k)

    current = jx.step_current(DELAY, DURATION, AMPLITUDE, DT, case.t_max)
    comp_at(case.stim_position).stimulate(current, verbose=False)
    for x in case.record_positions:
        comp_at(x).record("v", verbose=False)
    return module


def build_cable(n: int, dtype):
    """The HH cable of `benchmarks/forward.py` with `n` compartments (recordings
    `r0`, `r1` at its ends)."""
    return build_ours(dataclasses.replace(CABLE, n_compartments=n), dtype)


def build_compartment(dtype):
    """The HH compartment of `benchmarks/forward.py` (recording `r0`)."""
    return build_ours(COMPARTMENT, dtype)


TREE_BRANCH = (80.0, 2.0, 4)  # µm long, µm in diameter, compartments per branch


def tree_parents(n_branches: int) -> list[int]:
    """A binary tree of `n_branches` branches, Jaxley's `parents` list: branch
    `k > 0` hangs from branch `(k - 1) // 2`."""
    return [-1] + [(k - 1) // 2 for k in range(1, n_branches)]


def describe_tree(
    n_branches: int, per_branch: int = TREE_BRANCH[2], amplitude: float = AMPLITUDE
):
    """One HH cell whose branches (80 µm × 2 µm, `per_branch` compartments, by
    default `TREE_BRANCH`'s 4) form a binary tree, each child at its parent's 1
    end; a step current of `amplitude` nA from 5 ms for 40 ms into the root's 0
    end; recordings `r0` there and `r1` at the 1 end of the last branch (a leaf).
    `(cells, stimuli, recordings)`. Also `benchmarks/branched.py`'s cell."""
    import stable_ode as so

    length, diameter, _ = TREE_BRANCH
    sections = [
        so.Section(
            f"b{k}", length, diameter, per_branch, None if p < 0 else f"b{p}", 1.0
        )
        for k, p in enumerate(tree_parents(n_branches))
    ]
    cell = so.Cell(
        "cell", sections, [so.Insert(so.HH())], axial_resistivity=RA, capacitance=CM
    )
    stim = so.StepCurrent(so.Site("cell", "b0", 0.0), amplitude, DELAY, DURATION)
    last = f"b{n_branches - 1}"
    recs = [
        so.Recording("r0", so.Site("cell", "b0", 0.0)),
        so.Recording("r1", so.Site("cell", last, 1.0)),
    ]
    return [cell], [stim], recs


def build_tree(n_branches: int, dtype):
    """The binary-tree cell of `describe_tree` (`n_branches · 4` compartments)."""
    import stable_ode as so

    cells, stims, recs = describe_tree(n_branches)
    return so.build(cells, stims, recs, celsius=6.3, v_init=V_INIT, dtype=dtype)


def build_tree_jaxley(
    n_branches: int,
    t_max: float,
    per_branch: int = TREE_BRANCH[2],
    amplitude: float = AMPLITUDE,
):
    """The Jaxley cell of `describe_tree(n_branches, per_branch, amplitude)`, run
    for `t_max` ms (dtype follows JAX's x64 flag)."""
    import jaxley as jx

    length, diameter, _ = TREE_BRANCH
    n = per_branch
    cell = jx.Cell(jx.Branch(jx.Compartment(), n), parents=tree_parents(n_branches))
    cell.set("length", length / n)  # per compartment
    cell.set("radius", diameter / 2)
    insert_hh(cell)
    current = jx.step_current(DELAY, DURATION, amplitude, DT, t_max)
    cell.branch(0).comp(0).stimulate(current, verbose=False)
    cell.branch(0).comp(0).record("v", verbose=False)
    cell.branch(n_branches - 1).comp(n - 1).record("v", verbose=False)
    return cell


def network_pairs(n_cells: int, syn_per_cell: int, seed: int = 0):
    """`(pre, post)` cell indices: every cell sends `syn_per_cell` synapses to
    distinct other cells chosen at random (no self-connection, no duplicate)."""
    import numpy as np

    if not 1 <= syn_per_cell <= n_cells - 1:
        raise ValueError(
            f"syn_per_cell must be in [1, cells - 1] = [1, {n_cells - 1}], "
            f"got {syn_per_cell}"
        )
    rng = np.random.default_rng(seed)
    pre = np.repeat(np.arange(n_cells), syn_per_cell)
    post = np.concatenate(
        [
            (i + 1 + rng.choice(n_cells - 1, syn_per_cell, replace=False)) % n_cells
            for i in range(n_cells)
        ]
    )
    return pre, post


def build_network(n_cells: int, syn_per_cell: int, dtype):
    """`benchmarks/network.py`'s network with `n_cells` HH point neurons and the
    `n_cells · syn_per_cell` synapses of `network_pairs`, saving every cell's
    voltage as one array (`"v"`)."""
    from .network import build_ours

    pre, post = network_pairs(n_cells, syn_per_cell)
    return build_ours(n_cells, pre.size, dtype, connections=(pre, post), record=False)


def build_cable_jaxley(n: int, t_max: float):
    """The Jaxley module of `build_cable(n, ...)`, run for `t_max` ms."""
    case = dataclasses.replace(CABLE, n_compartments=n, t_max=t_max)
    return build_jaxley(case)


def build_network_jaxley(n_cells: int, syn_per_cell: int, t_max: float, s_init: float):
    """The Jaxley network of `build_network(n_cells, syn_per_cell, ...)`, run for
    `t_max` ms, synapse states starting at `s_init`."""
    from .network import build_jaxley

    pre, post = network_pairs(n_cells, syn_per_cell)
    return build_jaxley(s_init, n_cells, pre.size, t_max, (pre, post))
