"""Reading NEURON's point processes and NetCons: `IClamp`s become `stimuli`;
`ExpSyn`, `Exp2Syn`, `AlphaSynapse`, `SEClamp` and the `POINT_PROCESS`es of the
`--nmodl` files become `point_processes`; NetCons from a `NetStim` or a
cell's voltage become `netcons`; NetCons without a target that watch a voltage
(spike recordings) become `spikes`."""

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


def _imported(classes: dict, kind: str):
    """The `--nmodl` class of point process `kind`, or `None`."""
    cls = (classes or {}).get(kind)
    return cls if hasattr(cls, "make_point_process_group") else None


def _imported_params(h, pp, kind: str, cls, problems: list) -> dict | None:
    """The PARAMETER values of an imported point process (RANGE ones from the
    instance, GLOBAL ones as NEURON's `name_KIND`), by field."""
    out = {}
    for field, name in cls.group_class.spec.fields.items():
        if hasattr(pp, name):
            out[field] = float(getattr(pp, name))
        elif hasattr(h, f"{name}_{kind}"):
            out[field] = float(getattr(h, f"{name}_{kind}"))
        else:
            problems.append(f"point process {pp.hname()}: cannot read {name}")
            return None
    return out


def point_processes(h, trees, problems: list, classes: dict | None = None):
    """`(stimuli, point_processes, kinds)` of the point processes in the trees'
    sections (`classes`: the `--nmodl` classes by name, for imported point
    processes); `kinds`: NEURON object name → kind, for the NetCons."""
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
                    imported = _imported(classes, kind)
                    known = kind == "IClamp" or kind in POINT_PROCESSES
                    if not known and imported is None:
                        problems.append(
                            f"point process {pp.hname()} in {sec.name()}: "
                            f"{kind} is not supported (supported: IClamp, "
                            f"{', '.join(POINT_PROCESSES)} and the --nmodl "
                            "files' POINT_PROCESSes)"
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
                    if imported is not None:
                        params = _imported_params(h, pp, kind, imported, problems)
                        if params is None:
                            continue
                    else:
                        params = {
                            p: float(getattr(pp, p)) for p in POINT_PROCESSES[kind]
                        }
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


def _set_by_initial(cls) -> set[int]:
    """Which elements of an imported point process's weight vector the
    INITIAL block inside its NET_RECEIVE sets (recomputed here at the start
    of a run, whatever NEURON's values)."""
    module = cls.group_class.spec.module
    blk = module.net_receive_initial
    if blk is None:
        return set()
    from stable_ode.nmodl._analysis import walk  # (the runner is its own package)

    args = module.net_receive.params
    targets = {getattr(s, "target", None) for s in walk(blk.body)}
    return {j for j, a in enumerate(args) if a in targets}


def _voltage_source(h, nc, owner: dict, label: str, problems: list) -> dict | None:
    """`{cell, section, position}` of the segment whose voltage a NetCon
    watches (NEURON's `NetCon(sec(x)._ref_v, ...)`), or `None` (a problem
    noted) where it is outside the converted cells or at an end node that
    joins other sections (only a free end's voltage equals its end
    compartment's)."""
    seg = nc.preseg()
    where = owner.get(seg.sec)
    x = float(seg.x)
    if where is None:
        problems.append(
            f"{label}: its source {seg} is outside the cells being converted"
        )
        return None
    if (x <= 0.0 or x >= 1.0) and not _free_end(h, seg.sec, x):
        problems.append(
            f"{label}: its source {seg} is an end node joining other sections "
            f"(no compartment here); watch the voltage inside the section"
        )
        return None
    return {"cell": where[0], "section": where[1], "position": x}


def _spike_recording(h, nc, owner: dict, label: str, problems: list) -> dict | None:
    """The `spikes` entry of a NetCon without a target that watches a
    voltage (NEURON's way to record spike times, `NetCon.record`), named
    after the NetCon; `None` for one whose source is outside the converted
    cells (it records another cell)."""
    if nc.preseg() is None:
        problems.append(
            f"{label}: a NetCon without a target whose source is not a voltage "
            f"({nc.pre().hname() if nc.pre() is not None else 'none'}) is not "
            "supported"
        )
        return None
    if nc.preseg().sec not in owner:
        return None
    site = _voltage_source(h, nc, owner, label, problems)
    if site is None:
        return None
    return {"name": label, **site, "threshold": float(nc.threshold)}


def netcons(
    h, trees, kinds: dict, problems: list, classes: dict | None = None
) -> tuple[list[dict], list[dict]]:
    """`(netcons, spikes)`: the `netcons` entries of every `NetCon` whose
    target is a converted point process (`classes`: the `--nmodl` classes,
    for imported ones), from a `NetStim` or a voltage in the converted cells
    (a threshold source), and the `spikes` entries of the NetCons without a
    target that watch a voltage there (`NetCon.record`; named `NetCon[i]`,
    NEURON's name of the NetCon)."""
    owner = {s: (t.name, t.names[s]) for t in trees for s in t.sections}
    out, spikes = [], []
    ncs = h.List("NetCon")
    for i in range(int(ncs.count())):
        nc = ncs.o(i)
        label = f"NetCon[{i}]"
        target = nc.syn()
        if target is None:
            entry = _spike_recording(h, nc, owner, label, problems)
            if entry is not None:
                spikes.append(entry)
            continue
        name = target.hname()
        if name not in kinds:
            if _kind(target) in POINT_PROCESSES or _kind(target) == "IClamp":
                continue  # its point process is outside the converted cells
            problems.append(
                f"{label}: its target {name} is not a supported point process"
            )
            continue
        imported = _imported(classes, kinds[name])
        receives = imported is not None and imported.receives_events
        if kinds[name] not in _TARGETS and not receives:
            problems.append(
                f"{label}: its target {name} is a {kinds[name]}, which receives no "
                f"events here"
            )
            continue
        pre = nc.pre()
        extra_keys: dict = {}
        if pre is None and nc.preseg() is not None:  # a cell's voltage
            source = _voltage_source(h, nc, owner, label, problems)
            if source is None:
                continue
            if not float(nc.delay) > 0.0:
                problems.append(
                    f"{label} -> {name}: delay {float(nc.delay):g} ms from a "
                    "cell's voltage (stable_ode needs delay > 0 there)"
                )
                continue
            extra_keys = {"threshold": float(nc.threshold)}
        elif pre is None:
            problems.append(
                f"{label} -> {name}: no source (events sent with NetCon.event "
                "cannot be read)"
            )
            continue
        elif _kind(pre) != "NetStim":
            problems.append(
                f"{label} -> {name}: its source {pre.hname()} is not supported "
                f"(only NetStim and a cell's voltage; a VecStim's times cannot "
                "be read from NEURON)"
            )
            continue
        else:
            source = _netstim(pre, label, problems)
            if source is None:
                continue
        weights = int(nc.wcnt())
        recomputed = _set_by_initial(imported) if imported is not None else set()
        extra = [j for j in range(1, weights) if j not in recomputed]
        if any(float(nc.weight[j]) != 0.0 for j in extra):
            problems.append(
                f"{label}: weight vector elements {extra} are not 0 (only "
                "weight[0] converts; the elements a NET_RECEIVE INITIAL block "
                "sets are recomputed)"
            )
        out.append(
            {
                "source": source,
                **extra_keys,
                "target": name,
                "delay": float(nc.delay),
                "weight": float(nc.weight[0]),
            }
        )
    return out, spikes
