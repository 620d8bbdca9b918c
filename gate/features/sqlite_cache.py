"""One SQLite file of values keyed by a text's sha256: the store under the embedding and
the PII detection caches.

What such a cache holds is derived from private records, so a new file is created
readable by its owner only (a new directory too). Any failure of the file is one
:class:`~gate.errors.InputError` naming it, never a silent miss.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Any

from gate.errors import InputError

LOCK_TIMEOUT = 60.0  # seconds to wait for another process writing the same file
_BATCH = 900  # keys per query (SQLite's default limit of host parameters is 999)


def text_keys(texts: Sequence[str]) -> list[bytes]:
    """sha256 of each text's UTF-8 bytes (an unpaired surrogate encoded as it stands)."""
    return [hashlib.sha256(t.encode("utf-8", "surrogatepass")).digest() for t in texts]


class SqliteCache:
    """A table ``key BLOB PRIMARY KEY, <column> <column_type>`` in the file ``path``."""

    def __init__(self, path: Path, *, table: str, column: str, column_type: str) -> None:
        self.path = path
        self._table, self._column = table, column
        with self._errors():
            if not path.parent.is_dir():
                path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            os.close(os.open(path, os.O_CREAT | os.O_RDWR, 0o600))
        with self._connect() as db, db:
            db.execute(
                f"CREATE TABLE IF NOT EXISTS {table} (key BLOB PRIMARY KEY, {column} {column_type})"
            )

    def unusable(
        self, reason: str, *, advice: str = "delete the file or set another cache_dir"
    ) -> InputError:
        """The error for this file: ``reason`` and what to do."""
        return InputError(f"cache file {self.path}: {reason}; {advice}")

    @contextmanager
    def _errors(self) -> Iterator[None]:
        try:
            yield
        except (sqlite3.ProgrammingError, sqlite3.InterfaceError):
            raise  # the gate's own mistake, not the file's
        except sqlite3.OperationalError as exc:
            if "locked" in str(exc):
                raise self.unusable(
                    f"locked by another process for more than {LOCK_TIMEOUT:.0f} s ({exc})",
                    advice="wait for the other run or set another cache_dir",
                ) from exc
            raise self.unusable(f"not a usable cache ({exc})") from exc
        except (OSError, sqlite3.DatabaseError) as exc:
            raise self.unusable(f"not a usable cache ({exc})") from exc

    @contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        with self._errors(), closing(sqlite3.connect(self.path, timeout=LOCK_TIMEOUT)) as db:
            yield db

    def get(self, keys: Sequence[bytes]) -> dict[bytes, Any]:
        """The stored value of each of ``keys`` the file holds."""
        found: dict[bytes, Any] = {}
        with self._connect() as db:
            for start in range(0, len(keys), _BATCH):
                chunk = list(keys[start : start + _BATCH])
                marks = ",".join("?" * len(chunk))
                query = f"SELECT key, {self._column} FROM {self._table} WHERE key IN ({marks})"
                found.update(db.execute(query, chunk).fetchall())
        return found

    def put(self, rows: Sequence[tuple[bytes, Any]]) -> None:
        """Store ``(key, value)`` rows in one transaction."""
        if not rows:
            return
        with self._connect() as db, db:
            db.executemany(f"INSERT OR REPLACE INTO {self._table} VALUES (?, ?)", rows)
