"""SHA-256 digests of files and of directory trees (fingerprints in the evidence, keys
of the detection cache)."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from pathlib import Path


def sha256_file(path: str | Path) -> str:
    """Hex SHA-256 of a file's bytes, read in blocks (a model's weights can be large)."""
    with open(path, "rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


def sha256_tree(root: Path, files: Iterable[Path] | None = None) -> str:
    """Hex SHA-256 of ``files`` under ``root`` (default: every file below it, in path
    order): each file's path relative to ``root``, a NUL byte and its contents' SHA-256,
    so no two different trees (a file ``a`` holding ``bc``, a file ``ab`` holding ``c``)
    give the same bytes to hash."""
    if files is None:
        files = sorted(p for p in root.rglob("*") if p.is_file())
    digest = hashlib.sha256()
    for path in files:
        digest.update(str(path.relative_to(root)).encode("utf-8") + b"\0")
        digest.update(bytes.fromhex(sha256_file(path)))
    return digest.hexdigest()
