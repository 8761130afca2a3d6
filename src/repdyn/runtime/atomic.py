"""One atomic file writer for everything repdyn writes: a temporary file in the target's folder, flushed and
fsynced, then renamed into place. A reader sees the old file or the whole new one, never a partial one.

A write that fails (a full disk, a quota, a read-only folder) removes its temporary file and raises
:class:`WriteError`, an ``OSError`` whose message names the folder, so the user knows where space is missing."""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, BinaryIO

TEMP_PREFIX = ".tmp-"


class WriteError(OSError):
    """A file could not be written (e.g. ENOSPC); nothing partial was left behind."""


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def temp_prefix(target: Path) -> str:
    """Temporary files are named ``.tmp-<stem>-<random><suffix>``, so a cleaner can tell whose they are."""
    return f"{TEMP_PREFIX}{target.stem}-"


def atomic_write(path: str | os.PathLike[str], write: Callable[[BinaryIO], object]) -> Path:
    """Call ``write(handle)`` on a temporary binary file, then rename it to ``path`` (permissions as a plain
    ``open`` would give, not mkstemp's 0600, so a shared report stays readable)."""
    target = Path(path)
    tmp = None
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=temp_prefix(target), suffix=target.suffix, dir=target.parent)
        os.fchmod(fd, 0o666 & ~_umask())
        with os.fdopen(fd, "wb") as handle:
            write(handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, target)
    except BaseException as error:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)
        if isinstance(error, OSError) and not isinstance(error, WriteError):
            raise WriteError(error.errno, f"cannot write {target.name} in the folder {target.parent}: "
                                          f"{error.strerror or error}") from error
        raise
    return target


def atomic_write_text(path: str | os.PathLike[str], text: str) -> Path:
    return atomic_write(path, lambda handle: handle.write(text.encode("utf-8")))


def write_json_atomic(path: str | os.PathLike[str], data: Any) -> Path:
    """``data`` as indented JSON with sorted keys (anything else by its ``str``), written atomically."""
    return atomic_write_text(path, json.dumps(data, indent=2, sort_keys=True, default=str))
