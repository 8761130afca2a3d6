"""One atomic file writer for everything repdyn writes: a temporary file in the target's folder, flushed and
fsynced, then renamed into place. A reader sees the old file or the whole new one, never a partial one."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def atomic_write(path: str | os.PathLike[str], write: Callable[[BinaryIO], object]) -> Path:
    """Call ``write(handle)`` on a temporary binary file, then rename it to ``path`` (permissions as a plain
    ``open`` would give, not mkstemp's 0600, so a shared report stays readable)."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=target.suffix, dir=target.parent)
    try:
        os.fchmod(fd, 0o666 & ~_umask())
        with os.fdopen(fd, "wb") as handle:
            write(handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return target


def atomic_write_text(path: str | os.PathLike[str], text: str) -> Path:
    return atomic_write(path, lambda handle: handle.write(text.encode("utf-8")))
