"""Write files so that a reader never sees a half-written one: temp file, fsync, rename."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path


def atomic_write(path: str | Path, write: Callable[[Path], None], *, private: bool = False) -> Path:
    """Call ``write(tmp_path)``, then rename the temp file to ``path`` (same directory),
    readable as the umask allows, or by its owner only if ``private``."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        write(tmp)
        os.chmod(tmp, 0o600 if private else 0o666 & ~current_umask())
        with open(tmp, "rb+") as handle:
            os.fsync(handle.fileno())
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return target


def current_umask() -> int:
    """The process's umask, read where the system shows it: setting it to read it, as
    ``os.umask`` does, makes files another thread creates meanwhile world-writable (a
    review)."""
    shown = _umask_shown()
    if shown is not None:
        return shown
    current = os.umask(0o077)  # not Linux: the briefest, and the safest, value to set
    os.umask(current)
    return current


def _umask_shown() -> int | None:
    """The ``Umask:`` line of ``/proc/self/status`` (Linux), or None."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            umask = [line.split()[1] for line in status if line.startswith("Umask:")]
    except OSError:
        return None
    return int(umask[0], 8) if umask else None


def atomic_write_bytes(path: str | Path, data: bytes, *, private: bool = False) -> Path:
    def write(tmp: Path) -> None:
        tmp.write_bytes(data)

    return atomic_write(path, write, private=private)


def atomic_write_text(path: str | Path, text: str, *, private: bool = False) -> Path:
    return atomic_write_bytes(path, text.encode("utf-8"), private=private)
