"""Reference traces from the code as it is: the bit-identity guard of refactors.

    python tests/reference/generate.py      # rewrites tests/data/reference/*.npz

Each case is a small model (HH cable, branched cell, network with a chemical
synapse and a gap junction), a solver and step control, in float32 and float64;
`test_reference.py` runs the same cases and compares every saved sample exactly.
Regenerate only when an issue says the numbers change, and say so in the commit,
on x86-64 with `XLA_FLAGS=--xla_cpu_max_isa=AVX2` (the code the traces hold, and
what `test_reference.py` compares against on a CPU with AVX-512).
"""

import sys
from pathlib import Path

import diffrax as dfx
import jax
import jax.numpy as jnp
import numpy as np


jax.config.update("jax_enable_x64", True)
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import stable_ode as so  # noqa: E402


DATA = Path(__file__).resolve().parents[1] / "data" / "reference"
T1 = 6.0
DT = 0.025


def cable(dtype):
    cell = so.Cell(
        "cable",
        [so.Section("axon", 200.0, 2.0, 8)],
        [so.Insert(so.HH())],
        axial_resistivity=100.0,
    )
    site = so.Site("cable", "axon", 0.0)
    return so.build([cell], [so.StepCurrent(site, 0.3, 1.0, 3.0)], dtype=dtype)


def branched(dtype):
    cell = so.Cell(
        "cell",
        [
            so.Section("soma", 20.0, 20.0, 1),
            so.Section("d1", 100.0, 1.5, 3, parent="soma", parent_position=1.0),
            so.Section("d2", 80.0, 1.0, 3, parent="soma", parent_position=1.0),
            so.Section("d3", 50.0, 0.8, 2, parent="d1", parent_position=0.5),
        ],
        [
            so.Insert(so.HH(), sections=("soma", "d1")),
            so.Insert(so.Passive(g=1e-4, e=-65.0), sections=("d2", "d3")),
        ],
        axial_resistivity=150.0,
        capacitance=1.2,
    )
    site = so.Site("cell", "soma", 0.5)
    return so.build(
        [cell], [so.StepCurrent(site, 0.5, 0.5, 4.0)], celsius=16.3, dtype=dtype
    )


def network(dtype):
    cells = [
        so.Cell(f"n{i}", [so.Section("soma", 20.0, 20.0)], [so.Insert(so.HH())])
        for i in range(3)
    ]
    sites = [so.Site(f"n{i}", "soma") for i in range(3)]
    conns = [
        so.Connections(so.IonotropicSynapse(gmax=5e-3), sites[:-1], sites[1:]),
        so.Connections(so.GapJunction(g=1e-3), [sites[0]], [sites[2]]),
    ]
    return so.build(
        cells, [so.StepCurrent(sites[0], 0.2, 0.5, 5.0)], [], conns, dtype=dtype
    )


MODELS = {"cable": cable, "branched": branched, "network": network}


def pid():
    return dfx.PIDController(rtol=1e-4, atol=1e-4)


SOLVES = {
    "exponential_euler_fixed": lambda: dict(solver=so.ExponentialEuler()),
    "backward_euler_fixed": lambda: dict(solver=so.BackwardEuler()),
    # The traces predate TR-BDF2 start-up steps (now the default): they hold
    # Rannacher's backward Euler start-up steps.
    "crank_nicolson_fixed": lambda: dict(solver=so.CrankNicolson(tr_bdf2=False)),
    "backward_euler_pid": lambda: dict(solver=so.BackwardEuler(), controller=pid()),
    "crank_nicolson_pid": lambda: dict(
        solver=so.CrankNicolson(tr_bdf2=False), controller=pid()
    ),
    "tsit5_pid": lambda: dict(solver=dfx.Tsit5(), controller=pid()),
}


def cases():
    """`(name, model builder, solve keywords, dtype)` for every reference case.
    Exponential Euler is for point neurons: it runs on the network only."""
    for model in MODELS:
        for solve in SOLVES:
            if solve.startswith("exponential") and model != "network":
                continue
            for dtype in ("float32", "float64"):
                yield f"{model}-{solve}-{dtype}", model, solve, dtype


def run(model: str, solve: str, dtype: str) -> np.ndarray:
    m = MODELS[model](jnp.dtype(dtype))
    kw = SOLVES[solve]()
    save_dt = 0.25 if "controller" in kw else None
    sim = so.simulate(m, T1, DT, save_dt=save_dt, **kw)
    return np.asarray(sim.recordings["v"])


if __name__ == "__main__":
    DATA.mkdir(parents=True, exist_ok=True)
    out = {name: run(model, solve, dtype) for name, model, solve, dtype in cases()}
    np.savez_compressed(DATA / "traces.npz", **out)
    print(f"{len(out)} reference traces written to {DATA / 'traces.npz'}")
