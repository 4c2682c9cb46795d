"""Model-file cells read from files: `"swc"` (NEURON's `Import3d` sections and
3-D geometry under `load_swc`'s names) and `"morphology"` (`load_morphology`).
Functions of a `CellReader` (`_cells.py`)."""

from .._errors import InvalidArgument
from ..morphology import load_morphology, load_swc, MorphologyError
from ..morphology._swc_names import load_swc_geometry
from ._reader import key, one_line


_SWC_HINT = (
    "; an SWC file's sections are named soma (or soma_k), axon_k, dend_k, apic_k "
    "and type{t}_k, k counting the sections of a type in file order"
)


def swc_cell(reader, raw, where, cell_where, name, kwargs):
    """The `Cell` of an SWC file (path relative to the model file): `load_swc`'s
    section names with NEURON's `Import3d` sections and 3-D geometry (as a
    `"morphology"` cell's). The file is checked by `load_swc` first, so a
    malformed one is a `SpecError` at `where` quoting its message (SWC file
    and line); what only `Import3d` rejects quotes `Import3d`'s rule."""
    r = reader.r
    path = (reader.directory / r.string(raw, where)).resolve()  # absolute stay
    soma = kwargs.pop("soma")
    try:
        load_swc(path, soma=soma, n_compartments=1)  # its checks and messages
        cell = load_swc_geometry(path, soma=soma, name=name, **kwargs)
    except InvalidArgument as e:
        if e.owner.startswith("Cell"):  # the mechanisms or the cell's values
            problem = e.problem + (_SWC_HINT if "unknown section" in e.problem else "")
            r.fail(key(cell_where, e.argument), problem)
        r.fail(where, f"{path}: {one_line(e)}")
    except FileNotFoundError:
        r.fail(where, f"no such SWC file: {path}")
    except UnicodeDecodeError as e:
        r.fail(where, f"{path}: not a text file ({e.reason} at byte {e.start})")
    except OSError as e:
        r.fail(where, f"cannot read SWC file {path}: {e.strerror or e}")
    except (ValueError, ArithmeticError) as e:
        r.fail(where, one_line(e, 1000))
    reader._count(sum(s.n_compartments for s in cell.sections), where)
    return cell, path


def morphology_cell(reader, raw, where, cell_where, name, kwargs):
    """The `Cell` of a morphology file (path relative to the model file); a
    malformed or missing file is a `SpecError` at `where`."""
    r = reader.r
    path = (reader.directory / r.string(raw, where)).resolve()
    if not path.is_file():
        r.fail(where, f"file not found: {path}")
    try:
        cell = load_morphology(path, name=name, **kwargs)
    except MorphologyError as e:
        r.fail(where, one_line(e, 1000))
    except InvalidArgument as e:
        if e.owner.startswith("Cell"):  # the mechanisms or the cell's values
            r.fail(key(cell_where, e.argument), e.problem)
        r.fail(where, f"{path}: {one_line(e)}")
    except UnicodeDecodeError as e:
        r.fail(where, f"{path}: not a text file ({e.reason} at byte {e.start})")
    except OSError as e:
        r.fail(where, f"cannot read {path}: {e.strerror or e}")
    reader._count(sum(s.n_compartments for s in cell.sections), where)
    return cell, path
