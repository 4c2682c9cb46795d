"""NEURON's order of the state updates within a `BackwardEuler` step
(`stable_ode/_solver/_ordered.py`): mechanisms advanced by `mechanism_type`,
a mechanism reading a concentration that an earlier one writes sees this
step's value, one before the writer the value of the step's start. (Against
NEURON: `tests/nmodl/test_kinetic.py`, cases `kca` and `rel`; gradients and
float32 through this path: `test_ions.py`.)"""

from typing import ClassVar

import jax.numpy as jnp
import numpy as np
from ion_mechanisms import CaChan1, CaGatedK, CaPool

import stable_ode as so
from stable_ode._solver._ordered import neuron_order


class EarlyCaGatedK(CaGatedK):
    """`CaGatedK` placed before `CaPool` in NEURON's order."""

    mechanism_type: ClassVar[int] = CaPool.mechanism_type - 1


def _model(mechs):
    cell = so.Cell("c", [so.Section("soma", 20.0, 20.0)], [so.Insert(m) for m in mechs])
    site = so.Site("c", "soma", 0.5)
    return so.build([cell], [so.StepCurrent(site, 0.3, 0.0, 5.0)], [])


def test_mechanism_types():
    assert (so.Passive.mechanism_type, so.HH.mechanism_type) == (2, 7)  # NEURON's
    assert 100 <= CaChan1.mechanism_type < CaPool.mechanism_type
    assert CaPool.mechanism_type < CaGatedK.mechanism_type


def test_neuron_order():
    # groups in insertion order: the reader first, HH last
    m = _model([CaGatedK(), CaChan1(), CaPool(), so.HH()])
    order, readers = neuron_order(m)
    assert order == (3, 1, 2, 0) and readers == {0}
    # CaChan1 reads cai too, but comes before the pool: no reader
    assert neuron_order(_model([EarlyCaGatedK(), CaChan1(), CaPool()])) is None
    assert neuron_order(_model([so.HH(), so.Passive()])) is None


def _step(mechs, dt=0.1):
    m = _model(mechs)
    y0 = m.init_state()
    groups = list(y0.groups)
    groups[1] = {"cai": jnp.full(1, 2e-3)}  # the pool, far from cainf
    y0 = so.State(v=y0.v, groups=tuple(groups))
    y1, *_ = so.BackwardEuler().step(so.MembraneTerm(m), 0.0, dt, y0, None, None, False)
    return y0, y1


def test_reader_sees_the_concentration_of_this_step():
    dt, gate, out = 0.1, CaGatedK(), {}
    for cls, which in ((CaGatedK, 1), (EarlyCaGatedK, 0)):
        y0, y1 = out[cls] = _step([CaChan1(imax=0.01), CaPool(), cls()], dt)
        cai = (y0.groups[1]["cai"], y1.groups[1]["cai"])[which]
        inf = cai / (cai + gate.kd)
        want = so.Relaxation(inf=inf, rate=jnp.full(1, gate.k)).update(
            y0.groups[2]["q"], dt
        )
        np.testing.assert_allclose(y1.groups[2]["q"], want, rtol=1e-14, atol=0)
    (_, late), (_, early) = out[CaGatedK], out[EarlyCaGatedK]
    assert abs(float(late.groups[1]["cai"][0]) - 2e-3) > 1e-6  # cai moved
    # the pool, the channel and v do not depend on the reader's place
    for k, name in ((0, "S"), (1, "cai")):
        np.testing.assert_array_equal(late.groups[k][name], early.groups[k][name])
    np.testing.assert_array_equal(late.v, early.v)
    q_late, q_early = float(late.groups[2]["q"][0]), float(early.groups[2]["q"][0])
    assert abs(q_late - q_early) > 1e-9 * abs(q_late)  # the order matters
