"""Building events is linear in the number of point processes and NetCons.

The duplicate-name check of `build_events` was `names.count` per name
(quadratic): 100,000 unnamed `Exp2Syn`s, each the target of a threshold
NetCon, took over a minute to build; now about 5 CPU-s on 1,000 cells
(measured, x86-64; the objects themselves take about as long to make).
"""

import math
import time

import numpy as np

import stable_ode as so


CELLS = [
    so.Cell(
        f"c{k}", [so.Section("soma", length=20.0, diameter=20.0)], [so.Insert(so.HH())]
    )
    for k in range(10)
]
SITES = [so.Site(c.name, "soma", 0.5) for c in CELLS]


def _per_netcon(n):
    rng = np.random.default_rng(0)
    pre, post = rng.integers(0, len(SITES), (2, n))
    delay = rng.uniform(1.0, 5.0, n)
    syns = [so.Exp2Syn(SITES[b], tau1=0.5, tau2=3.0) for b in post]
    ncs = [
        so.NetCon(SITES[a], syns[j], float(delay[j]), 1e-4, threshold=-20.0)
        for j, a in enumerate(pre)
    ]
    best = math.inf
    for _ in range(3):
        start = time.process_time()
        model = so.build(CELLS, point_processes=syns, netcons=ncs)
        best = min(best, time.process_time() - start)
    (group,) = [g for g in model.point_processes if g.kind == "Exp2Syn"]
    assert group.cell.source.shape == (n,)
    return best / n


def test_build_is_linear_in_the_number_of_netcons():
    # CPU seconds per (synapse, NetCon) at 16,000 against 2,000 (the larger
    # pays less of the fixed cost); the quadratic name check made it about
    # 3.5x. CPU time, the best of 3: robust to a loaded machine.
    small, large = _per_netcon(2000), _per_netcon(16000)
    print(f"build, CPU-s per NetCon: {small:.3g} at 2,000, {large:.3g} at 16,000")
    assert large < 2.0 * small, (small, large)
