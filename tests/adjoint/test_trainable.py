"""Selecting trainable parameters per mechanism, section and synapse group."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import stable_ode as so


def small_model():
    soma = so.Section("soma", 20.0, 20.0, 1)
    dend = so.Section("dend", 100.0, 1.0, 3, parent="soma")
    axon = so.Section("axon", 100.0, 1.0, 2, parent="soma", parent_position=0.0)
    cells = [
        so.Cell(
            "a",
            [soma, dend, axon],
            [so.Insert(so.HH(), ["soma", "axon"]), so.Insert(so.Passive(), ["dend"])],
        ),
        so.Cell("b", [so.Section("soma", 20.0, 20.0, 1)], [so.Insert(so.HH())]),
    ]
    sa, sb = so.Site("a", "soma"), so.Site("b", "soma")
    return so.build(
        cells,
        [so.StepCurrent(sa, 0.3, 1.0, 20.0)],
        [so.Recording("b", sb)],
        [so.Connections(so.IonotropicSynapse(gmax=[1e-3, 2e-3]), [sa, sa], [sb, sb])],
    )


def test_selection_shapes_and_round_trip():
    model = small_model()
    spec = (
        so.Trainable()
        .mechanism(so.HH, "gnabar", per="section")
        .mechanism(so.HH, "gkbar", sections=[("a", "axon")], per="compartment")
        .mechanism(so.Passive, "g")
        .synapses("IonotropicSynapse", "gmax")
    )
    p = spec.init(model)
    # HH sections: a/soma, a/axon, b/soma; two axon compartments; one pas value.
    assert [x.shape for x in p] == [(3,), (2,), (1,), (2,)]
    np.testing.assert_allclose(p[3], [1e-3, 2e-3])
    same = spec.apply(model, p)
    assert jax.tree_util.tree_all(
        jax.tree_util.tree_map(lambda a, b: bool(jnp.all(a == b)), same, model)
    )
    new = spec.apply(model, (jnp.asarray([0.1, 0.2, 0.3]),) + p[1:])
    g = np.asarray(new.mechanisms[0].mechanism.gnabar)
    comps = [model.layout.compartments[int(c)] for c in model.mechanisms[0].index]
    expect = {("a", "soma"): 0.1, ("a", "axon"): 0.2, ("b", "soma"): 0.3}
    np.testing.assert_allclose(g, [expect[(c.cell, c.section)] for c in comps])


def test_gradient_of_tied_parameter_is_sum_over_compartments():
    model = small_model()
    per_comp = so.Trainable().mechanism(so.HH, "gkbar", per="compartment")
    shared = so.Trainable().mechanism(so.HH, "gkbar")

    def loss(spec, p):
        sol = so.simulate(spec.apply(model, p), 5.0, 0.05)
        return jnp.mean(sol.recordings["b"])

    g_comp = jax.grad(lambda p: loss(per_comp, p))(per_comp.init(model))[0]
    g_shared = jax.grad(lambda p: loss(shared, p))(shared.init(model))[0]
    np.testing.assert_allclose(g_shared, [np.sum(g_comp)], rtol=1e-10)


def test_selection_errors():
    model = small_model()
    with pytest.raises(ValueError, match="no parameter"):
        so.Trainable().mechanism(so.HH, "gbar").init(model)
    with pytest.raises(ValueError, match="no"):
        so.Trainable().synapses("Nope", "gmax").init(model)
    with pytest.raises(ValueError, match="per must be"):
        so.Trainable().mechanism(so.HH, "gnabar", per="cell")
