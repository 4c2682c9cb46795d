"""Every construct the importer does not translate is one clear error naming the
file, the line and the construct (snippets written for these tests)."""

import sys

import pytest

import stable_ode as so
from stable_ode.nmodl import load_nmodl, NmodlError


HEAD = """NEURON {
  SUFFIX snip
  NONSPECIFIC_CURRENT i
  RANGE g
}
PARAMETER { g = 0.001 (S/cm2) }
ASSIGNED { v (mV) i (mA/cm2) }
"""  # 7 lines


def load(tmp_path, body, name="snip.mod", head=HEAD):
    path = tmp_path / name
    path.write_text(head + body)
    return load_nmodl(path)


# (body after HEAD, construct in the message, line, words in the message)
CASES = {
    "verbatim": (
        "BREAKPOINT {\n  i = g*v\nVERBATIM\n  x = 1;\nENDVERBATIM\n}\n",
        "VERBATIM",
        10,
        "C code",
    ),
    "net_receive": (
        "BREAKPOINT { i = g*v }\nNET_RECEIVE (w) {\n  i = w\n}\n",
        "NET_RECEIVE",
        9,
        "SUFFIX",
    ),
    "random": (
        "BREAKPOINT {\n  i = g*v*normrand(0, 1)\n}\n",
        "normrand()",
        9,
        "random numbers",
    ),
    "printf": (
        'BREAKPOINT {\n  i = g*v\n  printf("i = %g\\n", i)\n}\n',
        "printf()",
        10,
        "printing from a .mod file is not supported",
    ),
    "linear_counts": (
        "STATE { a b }\nBREAKPOINT { SOLVE s METHOD cnexp i = g*a*v }\n"
        "INITIAL { SOLVE lin }\nDERIVATIVE s {\n  a' = -a\n  b' = -b\n}\n"
        "LINEAR lin {\n  ~ a + b = 1\n}\n",
        "LINEAR",
        15,
        "lin has 1 equations in 2 unknowns (a, b)",
    ),
    "linear_in_breakpoint": (
        "STATE { a }\nBREAKPOINT {\n  SOLVE lin\n  i = g*a*v\n}\n"
        "LINEAR lin {\n  ~ 2*a = 1\n}\n",
        "SOLVE",
        10,
        "LINEAR lin solved in BREAKPOINT",
    ),
    "linear_solvefor": (
        "STATE { a }\nINITIAL { SOLVE lin }\nBREAKPOINT { i = g*a*v }\n"
        "LINEAR lin SOLVEFOR a {\n  ~ 2*a = 1\n}\n",
        "SOLVEFOR",
        11,
        "SOLVEFOR on a LINEAR block",
    ),
    "while": (
        "BREAKPOINT {\n  i = 0\n  while (i < 1) { i = i + 1 }\n}\n",
        "while",
        10,
        "loops",
    ),
    "undeclared": (
        "BREAKPOINT {\n  i = g*(v - erev)\n}\n",
        "variable",
        9,
        "erev is not declared",
    ),
    "unknown_function": (
        "BREAKPOINT {\n  i = g*foo(v)\n}\n",
        "foo()",
        9,
        "neither a built-in",
    ),
    "dt": ("BREAKPOINT {\n  i = g*v*dt\n}\n", "dt", 9, "not available"),
    "method": (
        "STATE { a }\nBREAKPOINT {\n  SOLVE s METHOD runge\n  i = g*a*v\n}\n"
        "DERIVATIVE s { a' = -a }\n",
        "SOLVE",
        10,
        "METHOD runge",
    ),
    "no_equation": (
        "STATE { a b }\nBREAKPOINT {\n  SOLVE s METHOD cnexp\n"
        "  i = g*a*v\n}\nDERIVATIVE s { a' = -a }\n",
        "STATE",
        8,
        "b has no equation",
    ),
    "array_runtime_index": (
        "ASSIGNED { x[3] k }\nBREAKPOINT {\n  i = g*v*x[k]\n}\n",
        "array",
        10,
        "the index of x is 'k', which is not an integer constant",
    ),
    "array_out_of_range": (
        "ASSIGNED { x[3] }\nBREAKPOINT {\n  i = g*v*x[3]\n}\n",
        "array",
        10,
        "x[3]: index out of range (x has 3 elements)",
    ),
    "array_without_index": (
        "ASSIGNED { x[3] }\nBREAKPOINT {\n  i = g*v*x\n}\n",
        "array",
        10,
        "used without an index",
    ),
    "parameter_array": (
        "PARAMETER { w[2] }\nBREAKPOINT { i = g*v }\n",
        "array",
        8,
        "PARAMETER arrays are not supported",
    ),
    "from_runtime_bound": (
        "ASSIGNED { x[3] k }\nBREAKPOINT {\n  FROM j = 0 TO k {\n    x[j] = v\n"
        "  }\n  i = g*v\n}\n",
        "array",
        10,
        "FROM's end is 'k'",
    ),
    "array_derivative": (
        "STATE { a[2] }\nBREAKPOINT {\n  SOLVE s METHOD cnexp\n  i = g*v*a[0]\n}\n"
        "DERIVATIVE s {\n  a'[0] = -a[0]\n}\n",
        "DERIVATIVE",
        14,
        "array states",
    ),
    "assign_v": (
        "BREAKPOINT {\n  v = 3\n  i = g*v\n}\n",
        "assignment",
        9,
        "v cannot be assigned",
    ),
    "unit_factor": (
        "UNITS {\n  X = (furlong) (mile)\n}\nBREAKPOINT { i = g*v*X }\n",
        "UNITS",
        9,
        "not known",
    ),
    "syntax": ("BREAKPOINT {\n  i = = g\n}\n", "syntax", 9, "syntax error"),
    "steadystate": (
        "STATE { a }\nINITIAL {\n  SOLVE s STEADYSTATE sparse\n}\n"
        "BREAKPOINT { SOLVE s METHOD cnexp i = g*a*v }\n"
        "DERIVATIVE s { a' = -a*a + 1 }\n",
        "SOLVE STEADYSTATE",
        10,
        "not linear",
    ),
    "equation_in_if": (
        "STATE { a }\nBREAKPOINT { SOLVE s METHOD cnexp i = g*a*v }\n"
        "DERIVATIVE s {\n  if (v > 0) {\n    a' = -a\n  }\n}\n",
        "x' =",
        12,
        "inside if",
    ),
    "read_before_computed": (
        "STATE { a }\nASSIGNED { tau (ms) }\n"
        "BREAKPOINT { SOLVE s METHOD cnexp tau = 2*exp(v/100) i = g*a*v }\n"
        "DERIVATIVE s {\n  a' = -a/tau\n}\n",
        "ASSIGNED",
        12,
        "DERIVATIVE s reads tau before computing it",
    ),
    "initial_stale_read_into_state": (
        "STATE { a }\nASSIGNED { q ainf tau (ms) }\n"
        "BREAKPOINT { SOLVE s METHOD cnexp i = g*a*v }\n"
        "INITIAL {\n  rates()\n  a = ainf\n  q = 2\n}\n"
        "PROCEDURE rates() {\n  ainf = q\n  tau = 1/q\n}\n"
        "DERIVATIVE s {\n  rates()\n  a' = (ainf - a)/tau\n}\n",
        "ASSIGNED",
        12,
        "INITIAL reads q (on which a depends) before computing it",
    ),
}


def test_initial_may_read_an_assigned_early_into_values_it_drops(tmp_path):
    """As dbbs' `Cav3_1`: `INITIAL` calls `rates()` before it sets `q`; the
    `tau` it computes from the stale `q` is not kept (the state takes
    `ainf`, which does not depend on `q`), so the file imports and `a`
    starts at `ainf`."""
    body = (
        "STATE { a }\nASSIGNED { q ainf tau (ms) }\n"
        "BREAKPOINT { SOLVE s METHOD cnexp i = g*a*v }\n"
        "INITIAL {\n  rates()\n  a = ainf\n  q = 2\n}\n"
        "PROCEDURE rates() {\n  ainf = 1/(1 + exp(-v/10))\n"
        "  if (v < -200) {\n    tau = 1\n  } else {\n    tau = 1/q\n  }\n}\n"
        "DERIVATIVE s {\n  rates()\n  a' = (ainf - a)/tau\n}\n"
    )
    snip = load(tmp_path, body)["snip"]
    cell = so.Cell("c", [so.Section("s", 10.0, 10.0)], [so.Insert(snip())])
    model = so.build([cell], v_init=-20.0)
    a0 = float(model.init_state().groups[0]["a"][0])
    assert a0 == pytest.approx(1 / (1 + 2.718281828459045**2.0), rel=1e-12)


@pytest.mark.parametrize("case", list(CASES))
def test_unsupported_construct(tmp_path, case):
    body, construct, line, words = CASES[case]
    with pytest.raises(NmodlError) as e:
        load(tmp_path, body)
    err = e.value
    assert (err.construct, err.line) == (construct, line), str(err)
    assert words in str(err)
    assert str(err).startswith(f"{tmp_path / 'snip.mod'}:{line}: {construct}: ")


def test_linear_block_sets_the_initial_states(tmp_path):
    """`LINEAR` solved in `INITIAL` (dbbs' `Nav1_1` sets its 13-state scheme's
    equilibrium so): two equations in two states, one through a `LOCAL` and
    a parameter, per compartment, and differentiable."""
    import jax
    import jax.numpy as jnp

    body = (
        "STATE { a b }\nPARAMETER { k = 3 }\n"
        "BREAKPOINT { SOLVE s METHOD cnexp i = g*a*v }\n"
        "INITIAL { SOLVE lin }\nDERIVATIVE s {\n  a' = -a\n  b' = -b\n}\n"
        "LINEAR lin { LOCAL q\n  q = k*v\n  ~ a*q + b = 1\n  ~ a - 2*b = k\n}\n"
    )
    snip = load(tmp_path, body)["snip"]
    v = jnp.array([-65.0, -20.0])

    def start(k):
        from nmodl_support import FakeEnv

        s = snip(k=k).init_states(v, FakeEnv(2))
        return s["a"], s["b"]

    a, b = start(3.0)
    q = 3.0 * v  # a·q + b = 1, a - 2b = 3
    want_a = (1 + 1.5) / (q + 0.5)
    assert jnp.allclose(a, want_a, rtol=1e-13) and jnp.allclose(b, (a - 3) / 2)
    da = jax.grad(lambda k: start(k)[0][1])(3.0)
    fd = (start(3.0 + 1e-6)[0][1] - start(3.0 - 1e-6)[0][1]) / 2e-6
    assert jnp.isfinite(da) and abs(da - fd) < 1e-6 * abs(fd)


def test_pointer(tmp_path):
    head = "NEURON {\n  SUFFIX p\n  POINTER q\n}\n"
    with pytest.raises(NmodlError, match=r"p\.mod:3: POINTER: POINTER variables"):
        load(tmp_path, "ASSIGNED { q }\n", "p.mod", head)


def test_artificial_cell(tmp_path):
    head = "NEURON {\n  ARTIFICIAL_CELL Gen\n}\n"
    with pytest.raises(
        NmodlError,
        match=r"ac\.mod:2: ARTIFICIAL_CELL: an artificial cell without NET_RECEIVE",
    ):
        load(tmp_path, "ASSIGNED { x }\n", "ac.mod", head)


def test_missing_file(tmp_path):
    with pytest.raises(NmodlError, match=r"nope\.mod: path: no such file"):
        load_nmodl(tmp_path / "nope.mod")


def test_empty_folder(tmp_path):
    with pytest.raises(NmodlError, match="folder has no .mod files"):
        load_nmodl(tmp_path)


def test_duplicate_suffix_names_both_files(tmp_path):
    a, b = tmp_path / "a.mod", tmp_path / "b.mod"
    body = "BREAKPOINT { i = g*v }\n"
    a.write_text(HEAD + body)
    b.write_text(HEAD + body)
    with pytest.raises(NmodlError) as e:
        load_nmodl([a, b])
    assert str(e.value) == (f"{b}:2: SUFFIX: snip is also defined in {a}")


def test_duplicate_point_process_names_the_keyword(tmp_path):
    a, b = tmp_path / "a.mod", tmp_path / "b.mod"
    text = (
        "NEURON {\n  POINT_PROCESS Syn\n  NONSPECIFIC_CURRENT i\n}\n"
        "ASSIGNED { i (nA) }\nBREAKPOINT { i = 0 }\n"
    )
    a.write_text(text)
    b.write_text(text)
    with pytest.raises(NmodlError) as e:
        load_nmodl([a, b])
    assert str(e.value) == (f"{b}:2: POINT_PROCESS: Syn is also defined in {a}")


def test_useion_of_an_unknown_ion_without_valence(tmp_path):
    head = "NEURON {\n  SUFFIX clleak\n  USEION cl READ ecl WRITE icl\n}\n"
    body = (
        "ASSIGNED { v (mV) ecl (mV) icl (mA/cm2) }\n"
        "BREAKPOINT { icl = 1e-3*(v - ecl) }\n"
    )
    mech = load(tmp_path, body, "cl.mod", head)["clleak"]
    cell = so.Cell("c", [so.Section("s", 10.0, 10.0, 1)], [so.Insert(mech())])
    with pytest.raises(
        ValueError,
        match=r"ion 'cl' \(used by \['clleak'\]\) has no "
        "valence",
    ):
        so.build([cell])
    # the model may give it
    so.build([cell], ions={"cl": so.IonSpecies(valence=-1)})
    # or the file
    head = head.replace("WRITE icl", "WRITE icl VALENCE -1")
    mech = load(tmp_path, body, "cl.mod", head)["clleak"]
    assert mech.ions[0].valence == -1


def test_steady_state_initial(tmp_path):
    """`SOLVE s STEADYSTATE sparse` in INITIAL: each relaxation's `inf`."""
    import jax.numpy as jnp

    body = (
        "STATE { a }\nINITIAL { SOLVE s STEADYSTATE sparse }\n"
        "BREAKPOINT { SOLVE s METHOD cnexp i = g*a*v }\n"
        "DERIVATIVE s { a' = (1 - a)*exp(v/10) - a }\n"
    )
    snip = load(tmp_path, body)["snip"]
    v = jnp.array([-20.0, 0.0, 30.0])
    env = so.Environment(celsius=6.3)
    a = snip(g=jnp.full(3, 0.001)).init_states(v, env)["a"]
    e = jnp.exp(v / 10)
    assert jnp.allclose(a, e / (1 + e), rtol=1e-14)


def test_folder_and_table_accepted(tmp_path):
    body = (
        "BREAKPOINT { i = g*f(v) }\n"
        "FUNCTION f(x) {\n  TABLE DEPEND g FROM -100 TO 100 WITH 200\n  f = x\n}\n"
    )
    load(tmp_path, body)
    mechs = load_nmodl(tmp_path)
    assert list(mechs) == ["snip"] and mechs["snip"].nmodl.tables == ("f",)


def test_features(tmp_path):
    """GLOBAL and keyword-named parameters, CONSTANT, unit factors (NEURON 9's
    FARADAY and R), diam and area (µm²), celsius, if / else if / else, a
    PROCEDURE writing ASSIGNEDs, a FUNCTION whose branch is chosen by a
    constant argument, names clashing with Python: each as NEURON means it."""
    import jax.numpy as jnp
    from nmodl_support import FakeEnv, per_compartment

    text = """NEURON {
  SUFFIX feat
  NONSPECIFIC_CURRENT i
  RANGE lambda, copy
  GLOBAL k
}
UNITS { FARADAY = (faraday) (coulomb) R = (k-mole) (joule/degC) }
CONSTANT { c0 = 2 }
PARAMETER { lambda = 0.5  k = 3 (1)  copy = 1 }
ASSIGNED { v (mV) i (mA/cm2) diam (um) area (um2) celsius (degC) a b }
BREAKPOINT {
  setab(v)
  i = a + b*f(v, 0) + f(v, 1) + lambda*k*c0 + copy
}
PROCEDURE setab(x) {
  if (x < -50) {
    a = 1
  } else if (x < 0) {
    a = 2
  } else {
    a = 3
  }
  b = FARADAY/R*diam/area*celsius
}
FUNCTION f(x, j) {
  if (j == 0) {
    f = x
  } else {
    f = -x
  }
}
"""
    (tmp_path / "feat.mod").write_text(text)
    feat = load_nmodl(tmp_path / "feat.mod")["feat"]
    assert feat().lambda_ == 0.5 and feat().copy == 1.0 and feat().k == 3.0
    v = jnp.array([-70.0, -10.0, 20.0])
    env = FakeEnv(3, celsius=16.3)
    i = per_compartment(feat(), 3).current(v, {}, env)
    area_um2 = env.area * 1e8
    b = 96485.33212331001 / 8.31446261815324 * env.diam / area_um2 * 16.3
    a = jnp.array([1.0, 2.0, 3.0])
    expect = a + b * v - v + 0.5 * 3 * 2 + 1
    assert jnp.allclose(i, expect, rtol=1e-14)
    # the branch on the constant argument is taken statically: no select
    import jax

    from stable_ode.nmodl._runtime import Vars

    f = feat.nmodl.functions["fn_f"]
    jaxpr = str(jax.make_jaxpr(lambda x: f(Vars(), x, 0.0))(v))
    assert "select" not in jaxpr
    assert "select" in str(jax.make_jaxpr(lambda x, j: f(Vars(), x, j))(v, v))


def test_without_neuron(tmp_path, monkeypatch):
    """Without NEURON installed: one clear error naming the extra."""
    path = tmp_path / "snip.mod"
    path.write_text(HEAD + "BREAKPOINT { i = g*v }\n")
    monkeypatch.setitem(sys.modules, "neuron", None)
    monkeypatch.setitem(sys.modules, "neuron.nmodl", None)
    with pytest.raises(ImportError, match=r"pip install stable_ode\[nmodl\]"):
        load_nmodl(path)


def test_ion_variable_declared_constant(tmp_path):
    """An ion variable that a CONSTANT block redeclares (dbbs' cdp5 files'
    `cao = 2`): NEURON's nrnivmodl refuses it, and so does the importer,
    naming the CONSTANT's line."""
    path = tmp_path / "c.mod"
    path.write_text(
        "NEURON { SUFFIX c USEION ca READ cao WRITE ica }\n"
        "CONSTANT { cao = 2 (mM) }\n"
        "ASSIGNED { v (mV) ica (mA/cm2) }\n"
        "BREAKPOINT { ica = 1e-3*(v - cao) }\n"
    )
    with pytest.raises(NmodlError) as e:
        load_nmodl(path)
    assert (e.value.construct, e.value.line) == ("CONSTANT", 2), str(e.value)
    assert "cao" in str(e.value)
