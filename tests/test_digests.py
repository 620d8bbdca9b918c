"""Digests of files and trees on hand-made files."""

from __future__ import annotations

import hashlib
from pathlib import Path

from gate.digests import sha256_file, sha256_tree


def test_a_files_digest_is_sha256_of_its_bytes(tmp_path: Path) -> None:
    (tmp_path / "f").write_bytes(b"abc")
    assert sha256_file(tmp_path / "f") == (
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    )


def test_a_trees_digest_is_its_paths_and_file_digests(tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "x").write_bytes(b"abc")
    (tmp_path / "a").write_bytes(b"")
    expected = hashlib.sha256(
        b"a\0" + hashlib.sha256(b"").digest() + b"d/x\0" + hashlib.sha256(b"abc").digest()
    ).hexdigest()
    assert sha256_tree(tmp_path) == expected


def test_trees_that_concatenate_alike_differ(tmp_path: Path) -> None:
    """A file ``a`` holding ``bc`` and a file ``ab`` holding ``c``: names and contents
    written back to back would be the same bytes."""
    first, second = tmp_path / "1", tmp_path / "2"
    first.mkdir()
    second.mkdir()
    (first / "a").write_bytes(b"bc")
    (second / "ab").write_bytes(b"c")
    assert sha256_tree(first) != sha256_tree(second)
