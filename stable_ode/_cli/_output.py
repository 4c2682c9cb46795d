"""Output files, written whole or not at all.

Each file is written under a temporary name in its own folder and then renamed
over the target with `os.replace` (atomic on POSIX and Windows), so a reader
never sees a partial file and an interrupted or failed write leaves the previous
file intact.
"""

import contextlib
import json
import os
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from .. import _plot
from ._args import UsageError


def check_output(path: Path, option: str, model: str | None = None) -> None:
    """Fail before solving if `path` cannot be written, or is the model file."""
    if model is not None and path.exists() and Path(model).exists():
        if os.path.samefile(path, model):
            raise UsageError(f"{option} {path}: is the model file; give another name")
    if path.is_dir():
        raise UsageError(f"{option} {path}: is a folder; give a file name")
    folder = path.parent
    if folder.exists() and not folder.is_dir():
        raise UsageError(f"{option} {path}: {str(folder)!r} is not a folder")
    if not folder.is_dir():
        raise UsageError(f"{option} {path}: folder {str(folder)!r} does not exist")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise UsageError(f"{option} {path}: folder {str(folder)!r} is not writable")
    if path.exists() and not os.access(path, os.W_OK):
        raise UsageError(f"{option} {path}: the file is not writable")


def check_plot_path(path: Path, model: str | None = None) -> None:
    if not _plot.have_matplotlib():
        raise UsageError(f"--plot: {_plot.NO_MATPLOTLIB}")
    formats = _plot.image_formats()
    suffix = path.suffix[1:].lower()
    if suffix not in formats:
        raise UsageError(
            f"--plot {path}: unknown image format {path.suffix or '(no suffix)'!r}; "
            f"use one of {', '.join('.' + f for f in sorted(formats))}"
        )
    check_output(path, "--plot", model)


@contextlib.contextmanager
def replacing(path: str | os.PathLike) -> Iterator[Path]:
    """A temporary path next to `path` (same suffix), renamed onto `path` when the
    block ends normally and removed when it raises (Ctrl-C included).

    **Raises:** `UsageError` if the file cannot be created or renamed.
    """
    path = Path(path)
    try:
        fd, tmp = tempfile.mkstemp(
            prefix=f".{path.name}.", suffix=f".part{path.suffix}", dir=path.parent
        )
    except OSError as e:
        raise UsageError(f"cannot write {path}: {e.strerror or e}") from e
    os.close(fd)
    tmp = Path(tmp)
    try:
        yield tmp
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # as `open` would have made it
        os.replace(tmp, path)
    except OSError as e:
        raise UsageError(f"cannot write {path}: {e.strerror or e}") from e
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()


def save_npz(path: str | os.PathLike, t, stats: Mapping[str, Any], recordings) -> None:
    """`t`, `stats` (as a JSON string) and the recordings into the `.npz` file
    `path`, atomically (see `replacing`)."""
    with replacing(path) as tmp:
        with open(tmp, "wb") as f:
            np.savez(f, t=t, stats=np.asarray(json.dumps(stats)), **recordings)
