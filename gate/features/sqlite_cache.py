"""One SQLite file of values keyed by a text's sha256: the store under the embedding and
the PII detection caches.

What such a cache holds is derived from private records, so a new file is created
readable by its owner only (a new directory too). Every row is sealed for its text and
its file: an HMAC-SHA256 of the file's name and the value, keyed by a second digest of the
text that the row's key does not give away, under ``GATE_CACHE_KEY`` if it is set (a
secret; the file's name then carries an id of the key). Without the key, a row altered,
moved from another text or another cache file, or written by anyone who does not hold
the text is refused, but whoever holds a text (the release's author holds the release's,
and any source record it copies) can seal a row for it; with the key, only its holder
can. Any failure of the file is one :class:`~gate.errors.InputError` naming it, never a
silent miss.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Any, NamedTuple

from gate.errors import InputError

CACHE_FORMAT = 2  # rows sealed for their text (1: unsealed, no version in the file name)
KEY_CHARACTERS = 16  # the fewest characters of a cache key
LOCK_TIMEOUT = 60.0  # seconds to wait for another process writing the same file
_BATCH = 900  # keys per query (SQLite's default limit of host parameters is 999)
_SEAL_DOMAIN = b"gate cache seal\x00"


class TextKey(NamedTuple):
    """A text's row key and the key that seals its row."""

    lookup: bytes  # sha256 of the text: the row's key
    seal: bytes  # a digest of a fixed prefix and the text (keyed by the cache key, if any)


def cache_key() -> bytes | None:
    """The secret that keys the rows' seals: ``GATE_CACHE_KEY``, None if unset.

    Raises:
        InputError: the variable is set but holds fewer than :data:`KEY_CHARACTERS`
            characters (not white space): a CI system sets an unavailable secret to an
            empty string, and the unkeyed file, which the release's author can write,
            must not be read instead.
    """
    env = os.environ.get("GATE_CACHE_KEY")
    if env is None:
        return None
    if len(env.strip()) < KEY_CHARACTERS:
        raise InputError(
            f"GATE_CACHE_KEY must be a random secret of at least {KEY_CHARACTERS} characters "
            f"(not white space); found {len(env.strip())}: set it to the data owner's "
            "secret, or unset it to read the cache unkeyed"
        )
    return env.encode("utf-8", "surrogatepass")


def text_keys(texts: Sequence[str], *, secret: bytes | None = None) -> list[TextKey]:
    """The :class:`TextKey` of each text, from its UTF-8 bytes (an unpaired surrogate
    encoded as it stands); the seal keys are HMAC-SHA256 under ``secret`` if given, else
    SHA-256."""
    keys = []
    sealing = (
        hmac.new(secret, _SEAL_DOMAIN, hashlib.sha256)
        if secret is not None
        else hashlib.sha256(_SEAL_DOMAIN)
    )
    for text in texts:
        data = text.encode("utf-8", "surrogatepass")
        seal = sealing.copy()
        seal.update(data)
        keys.append(TextKey(hashlib.sha256(data).digest(), seal.digest()))
    return keys


def cache_file(directory: str | Path, stem: str) -> Path:
    """The file of the cache named ``stem`` in ``directory``, under the current
    ``GATE_CACHE_KEY``."""
    return Path(directory) / _file_name(stem, cache_key())


def _file_name(stem: str, secret: bytes | None) -> str:
    """``stem``, the row format and, under a key, an id of the key: a file of another
    format, or of rows sealed under another key (or none), is another file."""
    if secret is None:
        return f"{stem}-v{CACHE_FORMAT}.sqlite"
    key_id = hmac.new(secret, b"gate cache key id", hashlib.sha256).hexdigest()[:12]
    return f"{stem}-v{CACHE_FORMAT}-k{key_id}.sqlite"


class SqliteCache:
    """A table ``key BLOB PRIMARY KEY, <column> <column_type>, seal BLOB`` in the file
    :func:`cache_file` names; values are ``bytes`` or ``str``."""

    def __init__(
        self, directory: str | Path, stem: str, *, table: str, column: str, column_type: str
    ) -> None:
        self._secret = cache_key()
        path = Path(directory) / _file_name(stem, self._secret)
        self.path = path
        self._table, self._column = table, column
        with self._errors():
            if not path.parent.is_dir():
                path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            os.close(os.open(path, os.O_CREAT | os.O_RDWR, 0o600))
        with self._connect() as db, db:
            db.execute(
                f"CREATE TABLE IF NOT EXISTS {table} "
                f"(key BLOB PRIMARY KEY, {column} {column_type}, seal BLOB)"
            )

    def keys(self, texts: Sequence[str]) -> list[TextKey]:
        """The :class:`TextKey` of each text, sealed as this file's rows are."""
        return text_keys(texts, secret=self._secret)

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

    def get(self, keys: Sequence[TextKey]) -> dict[TextKey, bytes | str]:
        """The stored value of each of ``keys`` the file holds.

        Raises:
            InputError: a row of one of ``keys`` is not sealed for its text in this file.
        """
        by_lookup = {key.lookup: key for key in keys}
        rows: list[tuple[bytes, Any, Any]] = []
        with self._connect() as db:
            lookups = list(by_lookup)
            for start in range(0, len(lookups), _BATCH):
                chunk = lookups[start : start + _BATCH]
                marks = ",".join("?" * len(chunk))
                query = (
                    f"SELECT key, {self._column}, seal FROM {self._table} WHERE key IN ({marks})"
                )
                rows.extend(db.execute(query, chunk).fetchall())
        found: dict[TextKey, bytes | str] = {}
        for lookup, value, seal in rows:
            key = by_lookup[lookup]
            if not (
                isinstance(value, bytes | str)
                and isinstance(seal, bytes)
                and hmac.compare_digest(seal, self._seal(key, value))
            ):
                raise self.unusable(
                    "holds a row that is not sealed for its text in this file (altered, "
                    "moved from another text or cache file, or written by another program)"
                )
            found[key] = value
        return found

    def put(self, rows: Sequence[tuple[TextKey, bytes | str]]) -> None:
        """Store ``(key, value)`` rows, each sealed, in one transaction."""
        if not rows:
            return
        sealed = [(key.lookup, value, self._seal(key, value)) for key, value in rows]
        with self._connect() as db, db:
            db.executemany(f"INSERT OR REPLACE INTO {self._table} VALUES (?, ?, ?)", sealed)

    def _seal(self, key: TextKey, value: bytes | str) -> bytes:
        """HMAC-SHA256 of this file's name and ``value``, keyed by the text's seal key."""
        data = value.encode("utf-8", "surrogatepass") if isinstance(value, str) else value
        message = self.path.name.encode("utf-8", "surrogatepass") + b"\x00" + data
        return hmac.new(key.seal, message, hashlib.sha256).digest()
