"""Hostile model files: every broken file is one clean `SpecError` at its key (exit
code 2 from the command line), never a traceback, a hang or an allocation; output
files are written whole or not at all."""

import copy
import json
import math
from pathlib import Path

import numpy as np
import pytest
from helpers import set_key
from hypothesis import given, HealthCheck, settings, strategies as st
from spec_helpers import MODELS, TINY

import stable_ode as so
import stable_ode._cli as cli
import stable_ode._cli._interrupt as cli_interrupt
import stable_ode._cli._output as cli_output
import stable_ode._cli._solve as cli_solve
from stable_ode._spec import Limits, SpecError, validate


def _f32(edit):
    def both(raw):
        raw["integration"]["dtype"] = "float32"
        edit(raw)

    return both


def _adaptive(**integration):
    def edit(raw):
        raw["integration"].update(
            controller={"kind": "pid", "rtol": 1e-3, "atol": 1e-3}, **integration
        )

    return edit


SEC = ("cells", 0, "sections")
MECH = ("cells", 0, "mechanisms")
# (id, edit, key path, a fragment of the one-line message)
HOSTILE = [
    (
        "400-digit length",
        set_key((*SEC, 0, "length"), 10**400),
        "cells[0].sections[0].length",
        "must be finite, got integer of 401 digits",
    ),
    (
        "huge diameter",
        set_key((*SEC, 0, "diameter"), 1e308),
        "cells[0].sections[0].diameter",
        "not a finite non-zero number",
    ),
    (
        "tiny diameter",
        set_key((*SEC, 0, "diameter"), 1e-300),
        "cells[0].sections[0].diameter",
        "axial resistance",
    ),
    (
        "subnormal diameter",
        set_key((*SEC, 0, "diameter"), 5e-324),
        "cells[0].sections[0].diameter",
        "not a finite non-zero number",
    ),
    (
        "infinite capacitance",
        set_key(("cells", 0, "capacitance"), math.inf),
        "cells[0].capacitance",
        "must be finite",
    ),
    (
        "subnormal dt",
        set_key(("integration", "dt"), 5e-324),
        "integration.dt",
        "fixed steps, more than the limit",
    ),
    (
        "dt 1e-300",
        set_key(("integration", "dt"), 1e-300),
        "integration.dt",
        "fixed steps, more than the limit",
    ),
    (
        "t_stop 1e308",
        set_key(("t_stop",), 1e308),
        "integration.dt",
        "fixed steps, more than the limit",
    ),
    (
        "10**12 compartments",
        set_key((*SEC, 1, "n_compartments"), 10**12),
        "cells[0].sections[1].n_compartments",
        "more than the limit of 10,000,000",
    ),
    (
        "too many samples",
        _adaptive(save_dt=1e-9),
        "integration.save_dt",
        "samples, more than the limit",
    ),
    (
        "v_init 1e39 float32",
        _f32(set_key(("v_init",), 1e39)),
        "v_init",
        "does not fit float32",
    ),
    (
        "gnabar 1e39 float32",
        _f32(set_key((*MECH, 0, "params"), {"gnabar": 1e39})),
        "cells[0].mechanisms[0].params.gnabar",
        "does not fit float32",
    ),
    (
        "amplitude 1e39 float32",
        _f32(set_key(("stimuli", 0, "amplitude"), 1e39)),
        "stimuli[0].amplitude",
        "does not fit float32",
    ),
    (
        "float32 tiny compartments",
        _f32(set_key((*SEC, 0, "diameter"), 1e-20)),
        "cells[0].sections[0].diameter",
        "does not fit float32",
    ),
    (
        "SemiImplicitEuler",
        set_key(("integration", "solver"), "SemiImplicitEuler"),
        "integration.solver",
        "a model is one term",
    ),
    (
        "ItoMilstein",
        set_key(("integration", "solver"), "ItoMilstein"),
        "integration.solver",
        "solver 'ItoMilstein'",
    ),
    (
        "KenCarp4",
        set_key(("integration", "solver"), "KenCarp4"),
        "integration.solver",
        "solver 'KenCarp4'",
    ),
    (
        "Kvaerno5 fixed steps",
        set_key(("integration", "solver"), "Kvaerno5"),
        "integration.solver",
        "needs an adaptive controller",
    ),
    (
        "save_dt beyond t_stop",
        _adaptive(save_dt=10.0),
        "integration.save_dt",
        "must divide t_stop = 5.0 ms",
    ),
    (
        "save_dt not dividing t_stop",
        set_key(("integration", "save_dt"), 2.0),
        "integration.save_dt",
        "must divide t_stop = 5.0 ms",
    ),
    (
        "empty trace",
        set_key(
            ("stimuli", 0),
            {"kind": "trace", "cell": "c", "section": "soma", "values": [], "dt": 0.1},
        ),
        "stimuli[0].values",
        "at least one sample",
    ),
    (
        "empty mechanism sections",
        set_key((*MECH, 0, "sections"), []),
        "cells[0].mechanisms[0].sections",
        "at least one section",
    ),
    (
        "section listed twice",
        set_key((*MECH, 0, "sections"), ["soma", "soma"]),
        "cells[0].mechanisms[0].sections[1]",
        "listed twice",
    ),
]


@pytest.mark.parametrize(
    "edit,where,fragment", [c[1:] for c in HOSTILE], ids=[c[0] for c in HOSTILE]
)
def test_hostile_file_one_line_exit_2(
    tmp_path, capsys, monkeypatch, edit, where, fragment
):
    raw = copy.deepcopy(TINY)
    edit(raw)
    file = tmp_path / "m.json"
    file.write_text(json.dumps(raw))  # Python's json writes inf as Infinity
    with pytest.raises(SpecError) as info:
        so.load_spec(file)
    assert (info.value.file, info.value.where) == (str(file), where), str(info.value)
    assert fragment in info.value.problem, str(info.value)
    monkeypatch.setattr(cli_solve, "solve", lambda *a, **k: pytest.fail("solved"))
    assert cli.main(["run", str(file), "-o", str(tmp_path / "o.npz")]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line == f"{cli.PROG}: error: {file}: {where}: {info.value.problem}"
    assert not (tmp_path / "o.npz").exists()


@pytest.mark.parametrize(
    "name,text,fragment",
    [
        ("deep.json", "[" * 100_000 + "]" * 100_000, "invalid JSON: nested too deeply"),
        ("deep.toml", "a = " + "[" * 5_000 + "]" * 5_000 + "\n", "nested too deeply"),
    ],
)
def test_deeply_nested_file(tmp_path, name, text, fragment):
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(SpecError, match=fragment) as info:
        so.load_spec(path)
    assert str(info.value).startswith(f"{path}: ")


def test_mechanism_module_that_exits_at_import(tmp_path, capsys):
    (tmp_path / "exits_at_import.py").write_text("import sys\nsys.exit(0)\n")
    raw = copy.deepcopy(TINY)
    raw["cells"][0]["mechanisms"][0]["name"] = "exits_at_import:Leak"
    file = tmp_path / "m.json"
    file.write_text(json.dumps(raw))
    with pytest.raises(SpecError, match="raised SystemExit") as info:
        so.load_spec(file)
    assert info.value.where == "cells[0].mechanisms[0].name"
    assert cli.main(["run", str(file), "-o", str(tmp_path / "o.npz")]) == 2
    assert "raised SystemExit" in capsys.readouterr().err


def test_saved_values_bound_gives_the_estimate():
    raw = copy.deepcopy(TINY)
    with pytest.raises(SpecError) as info:
        validate(raw, "m.json", limits=Limits(saved_values=300))
    assert info.value.where == "integration.save_dt"
    assert "201 samples × 2 recordings = 402 values" in info.value.problem


def test_python_api_accepts_what_files_accept():
    # The bounds live in the classes: the same values fail from Python.
    with pytest.raises(ValueError, match="diameter"):
        so.Section("s", 10.0, 1e-300)
    with pytest.raises(ValueError, match="position must be in"):
        so.Site("c", "soma", 1.5)
    with pytest.raises(ValueError, match="delay must be >= 0"):
        so.StepCurrent(so.Site("c", "soma"), 0.1, -1.0, 1.0)
    with pytest.raises(
        ValueError, match="sections\\[1\\].parent: sections form a cycle: a -> b -> a"
    ):
        so.Cell(
            "c",
            [
                so.Section("soma", 10.0, 10.0),
                so.Section("a", 1.0, 1.0, parent="b"),
                so.Section("b", 1.0, 1.0, parent="a"),
            ],
        )


# ---------------------------------------------------------------------------
# Random mutations of a valid file: a clean SpecError or a success, nothing else.

_LEAVES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**30), max_value=10**30),
    st.sampled_from([0, -1, 10**400, 10**12]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([5e-324, 1e-300, 1e308, 1e39, -0.0]),
    st.text(max_size=8),
    st.sampled_from(["soma", "dend", "c", "hh", "pas", "Kvaerno5", "step"]),
)
_VALUES = st.recursive(
    _LEAVES,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(st.text(max_size=6), inner, max_size=3),
    ),
    max_leaves=6,
)


def _paths(node, prefix=()):
    yield prefix
    if isinstance(node, dict):
        for k, v in node.items():
            yield from _paths(v, (*prefix, k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _paths(v, (*prefix, i))


_ALL_PATHS = [p for p in _paths(TINY) if p]


@settings(
    max_examples=40,
    deadline=10_000,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(
    path=st.sampled_from(_ALL_PATHS),
    action=st.sampled_from(["replace", "delete", "add"]),
    value=_VALUES,
)
def test_mutated_files_fail_cleanly(path, action, value):
    raw = copy.deepcopy(TINY)
    *head, last = path
    node = raw
    for k in head:
        node = node[k]
    if action == "replace":
        node[last] = value
    elif action == "delete":
        del node[last]
    elif isinstance(node[last], dict):
        node[last]["extra_key"] = value
    elif isinstance(node[last], list):
        node[last].append(value)
    else:
        node[last] = [node[last], value]
    try:
        spec = validate(raw, "mutated.json")
    except SpecError as e:
        assert "\n" not in str(e) and str(e).startswith("mutated.json: ")
        return
    assert spec.t_stop > 0 and all(isinstance(c, so.Cell) for c in spec.cells)


# ---------------------------------------------------------------------------
# Loading is linear in the number of sections (timed in benchmarks/loading.py,
# smoke-tested in tests/repo/test_benchmarks.py).


def test_loading_is_linear_in_the_number_of_sections():
    # CPU seconds per section of `load_spec` at 8,000 sections against 1,000 (the
    # larger pays less of the fixed cost): quadratic loading made it 8x and more
    # (2,000 sections took 20 s). CPU time, the best of 3: robust to a loaded
    # machine, and the margin is wide.
    import importlib.util
    import time

    path = Path(__file__).parents[2] / "benchmarks" / "loading.py"
    spec = importlib.util.spec_from_file_location("loading_benchmark", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)

    def per_section(n):
        raw = bench.chain_model(n)
        best = math.inf
        for _ in range(3):
            start = time.process_time()
            model = so.load_spec(raw).model
            best = min(best, time.process_time() - start)
        assert model.n_compartments == 2 * n
        return best / n

    small, large = per_section(1000), per_section(8000)
    assert large < 2.5 * small, (small, large)


@pytest.mark.parametrize(
    "args",
    [
        ("a", 10.0, 2.0, 3, "p", 0.5),
        ("r", 1.0, 1.0, 1, None, 1.0),
        ("i", 5, 2, 2, "p", 0),
    ],
)
def test_the_loaders_cylinder_is_the_section(args):
    # The loader builds sections without equinox's per-instance machinery: the
    # same object, fields, pytree and checks as `Section(...)`.
    import jax

    from stable_ode._spec._sections import cylinder

    got, want = cylinder(*args), so.Section(*args)
    assert type(got) is so.Section and got == want and hash(got) == hash(want)
    assert vars(got) == vars(want)
    assert jax.tree_util.tree_flatten(got) == jax.tree_util.tree_flatten(want)
    bad = ("b", 10.0, -1.0, 2, None, 1.0)
    with pytest.raises(ValueError) as e_cyl:
        cylinder(*bad)
    with pytest.raises(ValueError) as e_sec:
        so.Section(*bad)
    assert str(e_cyl.value) == str(e_sec.value)


def test_a_non_finite_parameter_names_its_section():
    # Entry j of an inserted mechanism is named by its section (computed only
    # for the error), also when the listed sections are not in the cell's order.
    secs = [so.Section("a", 10.0, 1.0, 2), so.Section("b", 10.0, 1.0, 3, "a")]
    g = [1e-4, 1e-4, 1e-4, float("nan"), 1e-4]  # b's 3, then a's 2
    cell = so.Cell("c", secs, [so.Insert(so.Passive(g=g), ["b", "a"])])
    with pytest.raises(ValueError, match="is nan in section 'a'"):
        so.build([cell])


# ---------------------------------------------------------------------------
# Output files: written whole or not at all.


def _stub_solved():
    t = np.linspace(0.0, 5.0, 201)
    stats = {
        "num_steps": 200,
        "num_accepted": 200,
        "num_rejected": 0,
        "num_nonfinite_rejected": 0,
        "t_fail": None,
        "wall_s": 0.01,
        "compile_s": 1.0,
        "result": "successful",
    }
    v = np.full(201, -65.0)
    return cli.Solved(t, {"soma": v, "tip": v}, stats, None)


def test_interrupted_write_keeps_the_previous_output(tmp_path, monkeypatch, capsys):
    out = tmp_path / "o.npz"
    monkeypatch.setattr(cli_solve, "solve", lambda loaded, **k: _stub_solved())
    assert cli.main(["run", str(MODELS / "tiny.json"), "-o", str(out)]) == 0
    good = out.read_bytes()

    def savez(f, **arrays):  # half a file, then Ctrl-C
        f.write(b"PK\x03\x04 partial")
        f.flush()
        # what a reader polling the output sees meanwhile: the previous file
        assert out.read_bytes() == good
        raise KeyboardInterrupt

    monkeypatch.setattr(cli_output.np, "savez", savez)
    assert cli.main(["run", str(MODELS / "tiny.json"), "-o", str(out)]) == 130
    assert "interrupted" in capsys.readouterr().err
    assert out.read_bytes() == good
    assert sorted(p.name for p in tmp_path.iterdir()) == ["o.npz"]  # no partial file


def test_output_onto_the_model_file_is_refused(tmp_path, capsys, monkeypatch):
    model = tmp_path / "m.json"
    model.write_text(json.dumps(TINY))
    monkeypatch.setattr(cli_solve, "solve", lambda *a, **k: pytest.fail("solved"))
    assert cli.main(["run", str(model), "-o", str(model)]) == 2
    assert "is the model file" in capsys.readouterr().err
    assert json.loads(model.read_text()) == TINY


def test_lost_ctrl_c_is_still_honoured(tmp_path, monkeypatch, capsys):
    # An interrupt raised inside a garbage-collector callback is printed and
    # dropped by Python; the recorded request still ends the run, writing nothing.
    def solve(loaded, **kwargs):
        try:
            cli_interrupt._handler(2, None)
        except KeyboardInterrupt:
            pass  # lost, as in a gc callback
        return _stub_solved()

    monkeypatch.setattr(cli_solve, "solve", solve)
    out = tmp_path / "o.npz"
    assert cli.main(["run", str(MODELS / "tiny.json"), "-o", str(out)]) == 130
    assert capsys.readouterr().err == f"{cli.PROG}: interrupted\n"
    assert not out.exists()
