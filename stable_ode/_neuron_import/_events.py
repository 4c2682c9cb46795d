"""Reading NEURON's point processes and NetCons: `IClamp`s become `stimuli`;
`ExpSyn`, `Exp2Syn`, `AlphaSynapse` and `SEClamp` become `point_processes`;
NetCons from a `NetStim` become `netcons`."""

POINT_PROCESSES = {
    "ExpSyn": ("tau", "e"),
    "Exp2Syn": ("tau1", "tau2", "e"),
    "AlphaSynapse": ("onset", "tau", "gmax", "e"),
    "SEClamp": ("rs", "dur1", "amp1", "dur2", "amp2", "dur3", "amp3"),
}
"""NEURON's point processes stable_ode has (besides `IClamp`), with their
parameters."""

_TARGETS = ("ExpSyn", "Exp2Syn")  # point processes that receive NetCon events


def _kind(obj) -> str:
    return obj.hname().split("[", 1)[0]


def _free_end(h, sec, x: float) -> bool:
    """Whether the end node of `sec` at `x` (0 or 1) joins nothing else: the 1 end
    with no child attached there, or the 0 end of a root with none."""
    if x <= 0.0 and h.SectionRef(sec=sec).has_parent():
        return False
    for child in sec.children():
        if abs(float(child.parentseg().x) - x) < 1e-12:
            return False
    return True


def _site(h, pp, owner: dict, problems: list) -> dict | None:
    """`{cell, section, position}` of a point process (`owner`: NEURON section →
    `(cell name, section name)`), or `None` if it cannot be placed. An `IClamp`
    at a free end node (no membrane, joined only to its section's end
    compartment) injects into that compartment, as here at position 0 or 1."""
    seg = pp.get_segment()
    where = owner.get(seg.sec)
    if where is None:
        return None
    x = float(seg.x)
    if _kind(pp) == "IClamp" and (x <= 0.0 or x >= 1.0) and _free_end(h, seg.sec, x):
        return {"cell": where[0], "section": where[1], "position": x}
    if x <= 0.0 or x >= 1.0:
        problems.append(
            f"{pp.hname()} at {seg.sec.name()}({x:g}): a point process at a "
            f"section's end node (which has no membrane and no compartment here; "
            f"only an IClamp at an end that joins no other section converts); "
            f"place it inside the section"
        )
        return None
    return {"cell": where[0], "section": where[1], "position": x}


def point_processes(h, trees, problems: list):
    """`(stimuli, point_processes, kinds)` of the point processes in the trees'
    sections; `kinds`: NEURON object name → kind, for the NetCons."""
    owner = {s: (t.name, t.names[s]) for t in trees for s in t.sections}
    stimuli, processes, kinds = [], [], {}
    seen = set()
    for tree in trees:
        for sec in tree.sections:
            for seg in sec.allseg():  # the end nodes too
                for pp in seg.point_processes():
                    if pp.hname() in seen:
                        continue
                    seen.add(pp.hname())
                    kind = _kind(pp)
                    if kind != "IClamp" and kind not in POINT_PROCESSES:
                        problems.append(
                            f"point process {pp.hname()} in {sec.name()}: "
                            f"{kind} is not supported (supported: IClamp, "
                            f"{', '.join(POINT_PROCESSES)})"
                        )
                        continue
                    site = _site(h, pp, owner, problems)
                    if site is None:
                        continue
                    if kind == "IClamp":
                        stimuli.append(
                            {
                                "kind": "step",
                                **site,
                                "amplitude": float(pp.amp),
                                "delay": float(getattr(pp, "del")),
                                "duration": float(pp.dur),
                            }
                        )
                        continue
                    params = {p: float(getattr(pp, p)) for p in POINT_PROCESSES[kind]}
                    processes.append(
                        {"name": pp.hname(), "kind": kind, **site, "params": params}
                    )
                    kinds[pp.hname()] = kind
    return stimuli, processes, kinds


def _netstim(ns, label: str, problems: list) -> dict | None:
    noise = float(ns.noise)
    if noise > 0:
        problems.append(
            f"{label}: its source {ns.hname()} has noise > 0 (its random stream "
            f"cannot be read from NEURON)"
        )
        return None
    return {
        "netstim": {
            "interval": float(ns.interval),
            "number": float(ns.number),
            "start": float(ns.start),
            "noise": noise,
        }
    }


def netcons(h, kinds: dict, problems: list) -> list[dict]:
    """The `netcons` entries of every `NetCon` whose target is a converted
    point process."""
    out = []
    ncs = h.List("NetCon")
    for i in range(int(ncs.count())):
        nc = ncs.o(i)
        label = f"NetCon[{i}]"
        target = nc.syn()
        if target is None:
            problems.append(
                f"{label}: a NetCon without a target (spike recording, "
                f"NetCon.record) is not supported"
            )
            continue
        name = target.hname()
        if name not in kinds:
            if _kind(target) in POINT_PROCESSES or _kind(target) == "IClamp":
                continue  # its point process is outside the converted cells
            problems.append(
                f"{label}: its target {name} is not a supported point process"
            )
            continue
        if kinds[name] not in _TARGETS:
            problems.append(
                f"{label}: its target {name} is a {kinds[name]}, which receives no "
                f"events here"
            )
            continue
        pre = nc.pre()
        if pre is None:
            what = (
                "a cell's voltage (a threshold source) is not supported yet"
                if nc.preseg() is not None
                else "no source (events sent with NetCon.event cannot be read)"
            )
            problems.append(f"{label} -> {name}: {what}")
            continue
        if _kind(pre) != "NetStim":
            problems.append(
                f"{label} -> {name}: its source {pre.hname()} is not supported "
                f"(only NetStim; a VecStim's times cannot be read from NEURON)"
            )
            continue
        source = _netstim(pre, label, problems)
        if source is None:
            continue
        weights = int(nc.wcnt())
        if weights > 1 and any(float(nc.weight[j]) != 0.0 for j in range(1, weights)):
            problems.append(f"{label}: weights beyond weight[0] are not supported")
        out.append(
            {
                "source": source,
                "target": name,
                "delay": float(nc.delay),
                "weight": float(nc.weight[0]),
            }
        )
    return out
