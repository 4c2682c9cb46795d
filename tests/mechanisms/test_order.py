"""NEURON's order of the state updates within a `BackwardEuler` step
(`stable_ode/_solver/_ordered.py`): mechanisms that write a concentration
first, the last registered (highest `mechanism_type`) first, then the
others; a mechanism reading a concentration sees this step's value when its
writer comes before it, else the step's start's. (Against NEURON:
`tests/nmodl/test_kinetic.py`, cases `kca`, `kcab` and `rel`, and
`tests/nmodl/test_order_neuron.py`; gradients and float32 through this path:
`test_ions.py`.)"""

from typing import ClassVar

import jax.numpy as jnp
import numpy as np
import pytest
from ion_mechanisms import CaChan1, CaGatedK, CaPool

import stable_ode as so
from stable_ode._solver._ordered import neuron_order


class EarlyCaGatedK(CaGatedK):
    """`CaGatedK` registered before `CaPool`."""

    mechanism_type: ClassVar[int] = CaPool.mechanism_type - 1


class NaPool(so.AbstractMechanism):
    """Writes `nai` and reads `cai`: `nai' = (10 + 1e4·cai - nai)/tau`
    (registered after `CaPool`, so NEURON advances it before the pool)."""

    ions: ClassVar = (so.UseIon("na", write=("nai",)), so.UseIon("ca", read=("cai",)))
    tau: float = 2.0

    def kinetics(self, v, states, env):
        inf = 10.0 + 1e4 * env.ion("ca").inside
        return {"nai": so.Relaxation(inf=inf, rate=1.0 / self.tau + 0 * v)}

    def current(self, v, states, env):
        return jnp.zeros_like(v)

    def init_states(self, v, env):
        return {"nai": jnp.full_like(v, 10.0)}


class EarlyNaPool(NaPool):
    """`NaPool` registered before `CaPool`: advanced after it."""

    mechanism_type: ClassVar[int] = CaPool.mechanism_type - 1


def _model(mechs):
    cell = so.Cell("c", [so.Section("soma", 20.0, 20.0)], [so.Insert(m) for m in mechs])
    site = so.Site("c", "soma", 0.5)
    return so.build([cell], [so.StepCurrent(site, 0.3, 0.0, 5.0)], [])


def test_mechanism_types():
    assert (so.Passive.mechanism_type, so.HH.mechanism_type) == (2, 7)  # NEURON's
    assert 100 <= CaChan1.mechanism_type < CaPool.mechanism_type
    assert CaPool.mechanism_type < CaGatedK.mechanism_type < NaPool.mechanism_type


def test_neuron_order():
    # groups in insertion order; the pool first, then by mechanism_type
    m = _model([CaGatedK(), CaChan1(), CaPool(), so.HH()])
    assert neuron_order(m) == ((2, 3, 1, 0), {0, 1})  # (CaChan1 reads cai too)
    order, readers = neuron_order(_model([EarlyCaGatedK(), CaPool()]))
    assert order == (1, 0) and readers == {0}
    # writers: the last registered first
    assert neuron_order(_model([CaPool(), NaPool()])) is None  # sees the start's
    assert neuron_order(_model([CaPool(), EarlyNaPool()])) == ((0, 1), {1})
    assert neuron_order(_model([so.HH(), so.Passive()])) is None


def _step(mechs, dt):
    m = _model(mechs)
    y0 = m.init_state()
    groups = list(y0.groups)
    groups[1] = {"cai": jnp.full(1, 2e-3)}  # the pool, far from cainf
    y0 = so.State(v=y0.v, groups=tuple(groups))
    y1, *_ = so.BackwardEuler().step(so.MembraneTerm(m), 0.0, dt, y0, None, None, False)
    return y0, y1


# reader class -> (its state, whether it sees this step's cai)
READERS = {
    CaGatedK: ("q", True),
    EarlyCaGatedK: ("q", True),
    NaPool: ("nai", False),
    EarlyNaPool: ("nai", True),
}


def _expected(cls, cai, x0, dt):
    if issubclass(cls, CaGatedK):
        g = cls()
        inf, rate = cai / (cai + g.kd), g.k
    else:
        inf, rate = 10.0 + 1e4 * cai, 1.0 / cls().tau
    return so.Relaxation(inf=inf, rate=jnp.full(1, rate)).update(x0, dt)


@pytest.mark.parametrize("cls", list(READERS), ids=lambda c: c.__name__)
def test_reader_sees_the_concentration_of_its_turn(cls):
    dt, (state, new) = 0.1, READERS[cls]
    y0, y1 = _step([CaChan1(imax=0.01), CaPool(), cls()], dt)
    cai0, cai1 = y0.groups[1]["cai"], y1.groups[1]["cai"]
    assert abs(float(cai1[0] - cai0[0])) > 1e-6  # cai moved
    x0, x1 = y0.groups[2][state], y1.groups[2][state]
    np.testing.assert_allclose(x1, _expected(cls, cai1 if new else cai0, x0, dt),
                               rtol=1e-14, atol=0)  # fmt: skip
    other = _expected(cls, cai0 if new else cai1, x0, dt)
    assert abs(float(x1[0] - other[0])) > 1e-9 * abs(float(x1[0]))
