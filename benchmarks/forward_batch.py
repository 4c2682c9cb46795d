"""The batch of `benchmarks.forward` (`python -m benchmarks.forward` runs it):
copies of a model with `gnabar` evenly spaced, ours `jax.vmap` of `simulate`,
Jaxley's `jax.vmap` of `jx.integrate`, NEURON all the cells in one simulation;
also used by `profile_batch` and `sweep`."""

from ._models import build_jaxley, build_ours, Case, CM, describe, DT, RA, V_INIT


GNA_RANGE = (0.08, 0.16)  # S/cm², the batch's gnabar values (evenly spaced)


def run_batch(
    case: Case,
    n_batch: int,
    dtype_name: str,
    repeats: int,
    optimistic: bool | None = None,
) -> dict:
    """`n_batch` copies of `case` with `gnabar` evenly spaced over `GNA_RANGE`, all
    at once: ours `jax.vmap` of `simulate` over `gnabar`, Jaxley `jax.vmap` of
    `jx.integrate` over its `HH_gNa` parameter (`make_trainable`), NEURON all the
    cells in one simulation (`secondorder=0`). BackwardEuler / `bwd_euler`.

    **Returns:** one row (`compare`'s).
    """
    import equinox as eqx
    import jax
    import jax.numpy as jnp
    import numpy as np

    import stable_ode as so

    from ._common import have_jaxley
    from ._neuron import have_neuron, NeuronModel
    from .forward import _dtype, compare  # which imports this module

    dtype = _dtype(dtype_name)
    gna = np.linspace(*GNA_RANGE, n_batch)
    model = build_ours(case, dtype)
    names = [name for name, _ in model.layout.recordings]
    n = model.n_compartments

    @jax.jit
    def ours(m, g):
        def one(gi):
            mi = eqx.tree_at(
                lambda m: m.mechanisms[0].mechanism.gnabar, m, jnp.full(n, gi)
            )
            sim = so.simulate(
                mi, case.t_max, DT, solver=so.BackwardEuler(), optimistic=optimistic
            )
            return jnp.stack([sim.recordings[k] for k in names])

        return jax.vmap(one)(g)

    jaxley = None
    if have_jaxley():
        jaxley = ("vmap of bwd_euler", jaxley_batch(case), (jnp.asarray(gna, dtype),))
    nrn, neuron = None, None
    if have_neuron():
        cells, stims, recs = [], [], []
        for k, g in enumerate(gna):
            (cell,), (stim,), rk = describe(case)
            cell = so.Cell(
                f"c{k}", cell.sections, [so.Insert(so.HH(gnabar=float(g)))],
                axial_resistivity=RA, capacitance=CM,
            )  # fmt: skip
            cells.append(cell)
            site = so.Site(f"c{k}", "sec", stim.site.position)
            stims.append(
                so.StepCurrent(site, stim.amplitude, stim.delay, stim.duration)
            )
            recs += [
                so.Recording(f"{r.name}_{k}", so.Site(f"c{k}", "sec", r.site.position))
                for r in rk
            ]
        nrn = NeuronModel(
            cells, stims, recs, t_stop=case.t_max, dt=DT, celsius=6.3, v_init=V_INIT
        )
        n_rec = len(names)
        neuron = (
            f"{n_batch} cells, secondorder=0",
            lambda: nrn.run(0).reshape(n_batch, n_rec, -1),
        )
    try:
        return compare(
            f"{n_batch}× {case.name}, vmap over gNa", dtype_name,
            "vmap of BackwardEuler" + "+safe" * (optimistic is False), ours,
            (model, jnp.asarray(gna, dtype)),
            jaxley, neuron, repeats,
        )  # fmt: skip
    finally:
        if nrn is not None:
            nrn.close()


def jaxley_batch(case: Case):
    """Jaxley's `jax.vmap` of `jx.integrate` (`bwd_euler`) over the `HH_gNa` of
    `case` (made trainable): a jitted function of the batch of `gnabar` values."""
    import jax
    import jaxley as jx

    module = build_jaxley(case)
    module.make_trainable("HH_gNa", verbose=False)

    @jax.jit
    def theirs(g):
        def one(gi):
            return jx.integrate(
                module,
                params=[{"HH_gNa": gi[None]}],
                t_max=case.t_max,
                delta_t=DT,
                solver="bwd_euler",
            )

        return jax.vmap(one)(g)

    return theirs
