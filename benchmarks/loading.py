"""Loading and building model files: time per section must stay flat (issue 20).

    python -m benchmarks.loading [--sizes 1000 4000 16000] [--repeats 3]

The model: one cell whose sections form a binary tree (section k hangs from
section (k-1)//2 at its 1 end), each 100 µm long, 1 µm in diameter, 2
compartments, `hh` everywhere, a step current and a recording at the root;
100 ms at dt = 0.025 ms (nothing is simulated). For each size, the best of
`--repeats` runs of `stable_ode.load_spec` on the parsed file (reading the file
into objects, then `stable_ode.build`), of the reading alone
(`stable_ode._spec.validate`), and of the same cell through the Python API
(`Section`s, `Cell`, `build`); the per-section columns divide by the number of
sections: flat columns mean linear loading.
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


def _best(fn, repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def run(sizes=(1000, 4000), repeats: int = 3) -> list[dict]:
    """Time loading for each number of sections in `sizes`.

    **Returns:** one row per size: `sections`, `compartments`, `seconds` (load and
    build), `read_seconds` (reading alone) and both per section.
    """
    import stable_ode as so
    from stable_ode._spec import validate

    rows = []
    for n in sizes:
        raw = chain_model(n)
        model = so.load_spec(raw).model  # warm up (imports, JAX's first arrays)
        seconds = _best(lambda raw=raw: so.load_spec(raw), repeats)
        read = _best(lambda raw=raw: validate(raw, "<dict>"), repeats)
        api = _best(lambda n=n: api_model(n), repeats)
        rows.append(
            {
                "sections": n,
                "compartments": int(model.n_compartments),
                "seconds": seconds,
                "read_seconds": read,
                "api_seconds": api,
                "us_per_section": 1e6 * seconds / n,
                "read_us_per_section": 1e6 * read / n,
                "api_us_per_section": 1e6 * api / n,
            }
        )
    return rows


def main(argv=None) -> None:
    p = argparse.ArgumentParser(prog="python -m benchmarks.loading")
    p.add_argument("--sizes", type=int, nargs="+", default=[1000, 4000])
    p.add_argument("--repeats", type=int, default=3)
    args = p.parse_args(argv)
    print(
        "sections  compartments  load+build s  read s  API s  µs/section  "
        "read µs/section  API µs/section"
    )
    for r in run(args.sizes, args.repeats):
        print(
            f"{r['sections']:>8}  {r['compartments']:>12}  {r['seconds']:>11.3f}  "
            f"{r['read_seconds']:>6.3f}  {r['api_seconds']:>5.2f}  "
            f"{r['us_per_section']:>10.1f}  {r['read_us_per_section']:>15.1f}  "
            f"{r['api_us_per_section']:>14.1f}"
        )


if __name__ == "__main__":
    main()
