"""`python -m stable_ode from-neuron SCRIPT [--nmodl PATH ...] -o model.json`."""

import json
import os
import sys
from pathlib import Path

from . import FromNeuronError, run_in_subprocess


def command(args) -> int:
    """Run SCRIPT in a fresh NEURON and write its model to `args.output`; exit
    code 1, with every problem on stderr and nothing written, if some part of
    the model cannot be converted."""
    from .._cli._args import UsageError
    from .._cli._output import check_output, replacing

    out = Path(args.output)
    check_output(out, "-o")
    script = Path(args.script)
    if not script.is_file():
        raise UsageError(f"SCRIPT {script}: no such file")
    nmodl = [Path(p) for p in args.nmodl or ()]
    for p in nmodl:
        if not p.exists():
            raise UsageError(f"--nmodl {p}: no such file or folder")
    try:
        model = run_in_subprocess(script, [p.resolve() for p in nmodl])
    except FromNeuronError as e:
        print(f"{script}: cannot convert it; nothing written:", file=sys.stderr)
        for problem in e.problems:
            print(f"  - {problem}", file=sys.stderr)
        return 1
    if "nmodl" in model:  # relative to the model file, as the format reads them
        folder = out.resolve().parent
        model["nmodl"] = [_relative(p, folder) for p in model["nmodl"]]
    with replacing(out) as tmp:
        tmp.write_text(json.dumps(model, indent=1) + "\n")
    n = sum(len(c["sections"]) for c in model["cells"])
    print(f"wrote {out} ({len(model['cells'])} cell(s), {n} section(s))")
    return 0


def _relative(path: str, folder: Path) -> str:
    """`path` relative to `folder` if it lies inside it, else absolute."""
    try:
        rel = os.path.relpath(path, folder)
    except ValueError:  # another drive (Windows)
        return path
    return path if rel.startswith("..") else rel
