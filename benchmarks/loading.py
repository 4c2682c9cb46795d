"""Loading and building model files: time per section must stay flat (issue 20).

    python -m benchmarks.loading [--quick | --smoke] [--sizes N ...] [--repeats R]

The model: one cell whose sections form a binary tree (section k hangs from
section (k-1)//2 at its 1 end), each 100 µm long, 1 µm in diameter, 2
compartments, `hh` everywhere, a step current and a recording at the root;
100 ms at dt = 0.025 ms (nothing is simulated). For each size, the best of
`--repeats` runs of `stable_ode.load_spec` on the parsed file (reading the file
into objects, then `stable_ode.build`), of the reading alone
(`stable_ode._spec.validate`), and of the same cell through the Python API
(`Section`s, `Cell`, `build`); wall and CPU seconds (CPU time is the less noisy
on a shared machine). The per-section columns divide by the number of sections:
flat columns mean linear loading; `growth` is the largest size's CPU µs per
section over the smallest's.

Sizes: full 1,000 to 100,000 sections (3 repeats); `--quick` 1,000, 10,000 and
100,000 (1 repeat); `--smoke` 20 and 80 (a test). The rows go to
`$BENCHMARKS_JSON` (`benchmark="loading"`) when the runner sets it.
"""

import argparse
import time


def chain_model(n_sections: int) -> dict:
    """A model file (parsed) of one cell with `n_sections` sections in a binary
    tree."""
    sections = [
        {"name": "s0", "length": 100.0, "diameter": 1.0, "n_compartments": 2}
    ] + [
        {
            "name": f"s{k}",
            "length": 100.0,
            "diameter": 1.0,
            "n_compartments": 2,
            "parent": f"s{(k - 1) // 2}",
        }
        for k in range(1, n_sections)
    ]
    return {
        "format": "stable_ode.model/1",
        "t_stop": 100.0,
        "cells": [{"name": "c", "sections": sections, "mechanisms": [{"name": "hh"}]}],
        "stimuli": [
            {
                "kind": "step",
                "cell": "c",
                "section": "s0",
                "amplitude": 0.1,
                "delay": 1.0,
                "duration": 50.0,
            }
        ],
        "record": [{"name": "root", "cell": "c", "section": "s0"}],
        "integration": {"dt": 0.025},
    }


def api_model(n_sections: int):
    """The model of `chain_model` built through the Python API."""
    import stable_ode as so

    sections = [so.Section("s0", 100.0, 1.0, 2)] + [
        so.Section(f"s{k}", 100.0, 1.0, 2, parent=f"s{(k - 1) // 2}")
        for k in range(1, n_sections)
    ]
    cell = so.Cell("c", sections, [so.Insert(so.HH())])
    site = so.Site("c", "s0")
    return so.build(
        [cell], [so.StepCurrent(site, 0.1, 1.0, 50.0)], [so.Recording("root", site)]
    )


SIZES = {
    "full": (1000, 4000, 16000, 100000),
    "quick": (1000, 10000, 100000),
    "smoke": (20, 80),
}
REPEATS = {"full": 3, "quick": 1, "smoke": 1}


def _best(fn, repeats: int) -> tuple[float, float]:
    """The least wall and the least CPU seconds of `repeats` calls of `fn`."""
    wall = cpu = float("inf")
    for _ in range(repeats):
        start, start_cpu = time.perf_counter(), time.process_time()
        fn()
        cpu = min(cpu, time.process_time() - start_cpu)
        wall = min(wall, time.perf_counter() - start)
    return wall, cpu


def run(sizes=(1000, 4000), repeats: int = 3) -> list[dict]:
    """Time loading for each number of sections in `sizes`.

    **Returns:** one row per size: `sections`, `compartments`, `seconds` (load and
    build, wall), `cpu_seconds`, `read_seconds` (reading alone), `api_seconds`
    (the Python API), and each per section (µs); every row also has `growth`,
    the last size's load CPU µs per section over the first's.
    """
    import stable_ode as so
    from stable_ode._spec import validate

    rows = []
    for n in sizes:
        raw = chain_model(n)
        model = so.load_spec(raw).model  # warm up (imports, JAX's first arrays)
        seconds, cpu = _best(lambda raw=raw: so.load_spec(raw), repeats)
        read, _ = _best(lambda raw=raw: validate(raw, "<dict>"), repeats)
        api, _ = _best(lambda n=n: api_model(n), repeats)
        rows.append(
            {
                "sections": n,
                "compartments": int(model.n_compartments),
                "seconds": seconds,
                "cpu_seconds": cpu,
                "read_seconds": read,
                "api_seconds": api,
                "us_per_section": 1e6 * seconds / n,
                "cpu_us_per_section": 1e6 * cpu / n,
                "read_us_per_section": 1e6 * read / n,
                "api_us_per_section": 1e6 * api / n,
            }
        )
    growth = rows[-1]["cpu_us_per_section"] / rows[0]["cpu_us_per_section"]
    return [dict(r, growth=growth) for r in rows]


def main(argv=None) -> None:
    p = argparse.ArgumentParser(prog="python -m benchmarks.loading")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--quick", action="store_true", help="1 repeat, to 100,000")
    mode.add_argument("--smoke", action="store_true", help="20 and 80 sections")
    p.add_argument("--sizes", type=int, nargs="+", help="numbers of sections")
    p.add_argument("--repeats", type=int, help="timed runs per size (the best)")
    args = p.parse_args(argv)
    name = "smoke" if args.smoke else "quick" if args.quick else "full"
    sizes = args.sizes or SIZES[name]
    repeats = args.repeats or REPEATS[name]
    print(
        "sections  compartments  load+build s  CPU s  read s  API s  "
        "µs/section  CPU µs/section  read µs/section  API µs/section"
    )
    rows = run(sizes, repeats)
    for r in rows:
        print(
            f"{r['sections']:>8}  {r['compartments']:>12}  {r['seconds']:>11.3f}  "
            f"{r['cpu_seconds']:>5.2f}  {r['read_seconds']:>6.3f}  "
            f"{r['api_seconds']:>5.2f}  {r['us_per_section']:>10.1f}  "
            f"{r['cpu_us_per_section']:>14.1f}  {r['read_us_per_section']:>15.1f}  "
            f"{r['api_us_per_section']:>14.1f}"
        )
    print(f"growth (CPU µs/section, largest / smallest size): {rows[0]['growth']:.2f}")
    from ._common import emit

    emit("loading", rows)


if __name__ == "__main__":
    main()
