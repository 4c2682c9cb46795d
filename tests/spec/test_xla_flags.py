"""`set_cpu_small_loop_bytes` and `set_cpu_concurrent_schedule`: the XLA_FLAGS
they write, their errors, the command line's defaults, and that XLA compiles a
small-model loop into one function after the first (in a fresh process)."""

import os
import subprocess
import sys
import textwrap

import jax
import pytest

import stable_ode as so
from stable_ode._xla import _with_small_loop_bytes


KEY = "xla_cpu_small_while_loop_byte_threshold"
SCHEDULER = "--xla_cpu_enable_concurrency_optimized_scheduler"


@pytest.mark.parametrize(
    "before, after",
    [
        ("", f"--xla_backend_extra_options={KEY}=4096"),
        (
            "--xla_force_host_platform_device_count=4",
            f"--xla_force_host_platform_device_count=4 "
            f"--xla_backend_extra_options={KEY}=4096",
        ),
        (
            "--xla_backend_extra_options=foo=1,bar",
            f"--xla_backend_extra_options=foo=1,bar,{KEY}=4096",
        ),
        (
            f"--xla_backend_extra_options={KEY}=10,foo=1 --xla_cpu_max_isa=AVX",
            f"--xla_backend_extra_options=foo=1,{KEY}=4096 --xla_cpu_max_isa=AVX",
        ),
    ],
)
def test_flags_merged(before, after):
    assert _with_small_loop_bytes(before, 4096) == after


@pytest.mark.parametrize("bad", [0, -5, 1.5, True, "4096", None])
def test_bad_max_bytes(bad):
    with pytest.raises(ValueError, match="max_bytes must be a positive int"):
        so.set_cpu_small_loop_bytes(bad)


def test_too_late_is_an_error(monkeypatch):
    jax.devices()  # this process has initialised its backends
    monkeypatch.setenv("XLA_FLAGS", "--xla_cpu_max_isa=AVX")
    with pytest.raises(RuntimeError, match="before JAX runs anything"):
        so.set_cpu_small_loop_bytes(65536)
    assert os.environ["XLA_FLAGS"] == "--xla_cpu_max_isa=AVX"  # untouched


_PROBE = textwrap.dedent(
    """
    import sys
    import jax
    import jax.numpy as jnp
    import stable_ode as so

    if sys.argv[1] == "set":
        so.set_cpu_small_loop_bytes(65536)
    jax.config.update("jax_enable_x64", True)
    model = so.build(
        [so.Cell("c", [so.Section("s", 20.0, 20.0, 1)], [so.Insert(so.HH())])],
        [so.StepCurrent(so.Site("c", "s", 0.5), 0.1, 1.0, 2.0)],
        [so.Recording("v", so.Site("c", "s", 0.5))],
    )
    fn = jax.jit(
        lambda m: so.simulate(m, 5.0, 0.025, optimistic=False).recordings["v"]
    )
    text = fn.lower(model).compile().as_text()
    print("small_call" if "xla_cpu_small_call" in text else "thunks")
    """
)


def _probe(mode):
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    r = subprocess.run(
        [sys.executable, "-c", _PROBE, mode],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr
    return r.stdout.split()[-1]


@pytest.mark.slow
def test_safe_compartment_loop_becomes_one_function():
    # The safe fixed-step loop on one HH compartment accesses ~1.2-1.3 kB per
    # step: above XLA's default threshold (1,024), below the raised one.
    assert _probe("default") == "thunks"
    assert _probe("set") == "small_call"


def test_command_line_default(monkeypatch):
    # `python -m stable_ode` raises the threshold and orders loop bodies for
    # one thread before JAX starts, unless the user's XLA_FLAGS already names
    # them (their values win, e.g. XLA's 1024).
    from stable_ode import _xla

    monkeypatch.setattr(_xla, "_backends_initialised", lambda: False)
    monkeypatch.setenv("XLA_FLAGS", "--xla_cpu_max_isa=AVX")
    _xla._command_line_default()
    assert os.environ["XLA_FLAGS"] == (
        f"--xla_cpu_max_isa=AVX --xla_backend_extra_options={KEY}=65536 "
        f"{SCHEDULER}=false"
    )
    mine = f"--xla_backend_extra_options={KEY}=1024 {SCHEDULER}=true"
    monkeypatch.setenv("XLA_FLAGS", mine)
    _xla._command_line_default()
    assert os.environ["XLA_FLAGS"] == mine
    # Called in-process after JAX started (e.g. by a test): left alone.
    monkeypatch.setattr(_xla, "_backends_initialised", lambda: True)
    monkeypatch.delenv("XLA_FLAGS")
    _xla._command_line_default()
    assert "XLA_FLAGS" not in os.environ


@pytest.mark.parametrize(
    "before, concurrent, after",
    [
        ("", False, f"{SCHEDULER}=false"),
        ("--xla_cpu_max_isa=AVX", True, f"--xla_cpu_max_isa=AVX {SCHEDULER}=true"),
        (
            f"{SCHEDULER}=true --xla_cpu_max_isa=AVX",
            False,
            f"--xla_cpu_max_isa=AVX {SCHEDULER}=false",
        ),
    ],
)
def test_schedule_flag_merged(monkeypatch, before, concurrent, after):
    from stable_ode import _xla

    monkeypatch.setattr(_xla, "_backends_initialised", lambda: False)
    monkeypatch.setenv("XLA_FLAGS", before)
    so.set_cpu_concurrent_schedule(concurrent)
    assert os.environ["XLA_FLAGS"] == after


def test_schedule_errors(monkeypatch):
    with pytest.raises(ValueError, match="concurrent must be a bool"):
        so.set_cpu_concurrent_schedule("false")
    jax.devices()  # this process has initialised its backends
    monkeypatch.setenv("XLA_FLAGS", "--xla_cpu_max_isa=AVX")
    with pytest.raises(RuntimeError, match="before JAX runs anything"):
        so.set_cpu_concurrent_schedule(False)
    assert os.environ["XLA_FLAGS"] == "--xla_cpu_max_isa=AVX"  # untouched


def test_unknown_jax_internals_do_not_break_the_setting(monkeypatch):
    # If JAX's private backend query moves, the setting still applies (and the
    # command line still starts) instead of failing.
    from jax._src import xla_bridge

    from stable_ode import _xla

    monkeypatch.delattr(xla_bridge, "backends_are_initialized")
    assert _xla._backends_initialised() is False
    monkeypatch.setenv("XLA_FLAGS", "")
    so.set_cpu_small_loop_bytes(2048)
    assert os.environ["XLA_FLAGS"] == f"--xla_backend_extra_options={KEY}=2048"


def test_entry_points_apply_the_command_line_default():
    # `python -m stable_ode` and the `stable-ode` console script both go through
    # `_cli.command_line`, which sets the threshold and the schedule before JAX
    # starts.
    import pathlib
    import tomllib

    root = pathlib.Path(__file__).resolve().parents[2]
    scripts = tomllib.loads((root / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts["stable-ode"] == "stable_ode._cli:command_line"
    assert "command_line()" in (root / "stable_ode" / "__main__.py").read_text()
    code = (
        "import os, sys\n"
        "sys.argv = ['stable-ode', '--version']\n"
        "from stable_ode._cli import command_line\n"
        "rc = command_line()\n"
        "print(rc, os.environ['XLA_FLAGS'])\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    r = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env,
        timeout=120,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert r.stdout.split()[-2:] == [
        f"--xla_backend_extra_options={KEY}=65536",
        f"{SCHEDULER}=false",
    ]
