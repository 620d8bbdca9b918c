"""An on-disk cache of PII detections: a text's entity spans, keyed by its sha256.

A release is gated against the same train and holdout again and again (each candidate
release in CI, each round of ``gate remediate``); with a cache their detections are
computed once. The cache holds no text and no entity: each row is a text's sha256 and
its spans (entity type, start, end), which mean something only next to the text. It is
still derived from private records (a guessed text can be confirmed by its hash), so it
belongs where the corpus is kept.

One SQLite file per detector: the engine, the spaCy pipeline and its version, the entity
types, the score threshold, and the versions of Presidio, phonenumbers, spaCy and the gate
(whose recognizers scan windows) name the file, so a change to any of them starts an
empty one.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections.abc import Sequence
from contextlib import closing
from importlib import metadata
from pathlib import Path
from typing import Any

from gate._version import __version__
from gate.errors import InputError

Detection = tuple[str, int, int]  # entity type, start, end
_BATCH = 900  # keys per query (SQLite's default limit of host parameters is 999)


def _version(distribution: str) -> str | None:
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return None


def detector_key(
    *,
    engine: str,
    pipeline: dict[str, Any] | None,
    entities: Sequence[str],
    score_threshold: float,
) -> str:
    """The identity of a detector (16 hex digits): what its detections depend on.

    Args:
        engine: ``"spacy"`` or ``"patterns"``.
        pipeline: the spaCy pipeline's ``meta`` (name, version, …), None for ``patterns``.
        entities: the entity types searched, in the policy's order.
        score_threshold: the minimum Presidio score.
    """
    identity = {
        "engine": engine,
        "pipeline": None
        if pipeline is None
        else {k: pipeline.get(k) for k in ("lang", "name", "version")},
        "entities": list(entities),
        "score_threshold": float(score_threshold),
        "versions": {
            "gate": __version__,
            **{d: _version(d) for d in ("presidio-analyzer", "phonenumbers", "spacy")},
        },
    }
    encoded = json.dumps(identity, sort_keys=True).encode("utf-8")
    return hashlib.sha256(encoded).hexdigest()[:16]


class DetectionCache:
    """SQLite file per detector: sha256(text) -> the text's detections."""

    def __init__(self, directory: str | Path, detector: str) -> None:
        self.path = Path(directory) / f"pii-{detector}.sqlite"
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with closing(sqlite3.connect(self.path)) as db, db:
                db.execute(
                    "CREATE TABLE IF NOT EXISTS detections (key BLOB PRIMARY KEY, spans TEXT)"
                )
        except (OSError, sqlite3.DatabaseError) as exc:
            raise self._unusable(exc) from exc

    def _unusable(self, exc: Exception) -> InputError:
        return InputError(
            f"pii cache_dir: {self.path} cannot be used as a detection cache ({exc}); "
            "delete the file or set another cache_dir"
        )

    @staticmethod
    def keys(texts: Sequence[str]) -> list[bytes]:
        return [hashlib.sha256(t.encode("utf-8")).digest() for t in texts]

    def get(self, keys: list[bytes]) -> dict[bytes, list[Detection]]:
        """The detections of those ``keys`` the cache holds."""
        found: dict[bytes, list[Detection]] = {}
        try:
            with closing(sqlite3.connect(self.path)) as db:
                for start in range(0, len(keys), _BATCH):
                    chunk = keys[start : start + _BATCH]
                    marks = ",".join("?" * len(chunk))
                    for key, spans in db.execute(
                        f"SELECT key, spans FROM detections WHERE key IN ({marks})", chunk
                    ):
                        found[key] = [(str(t), int(s), int(e)) for t, s, e in json.loads(spans)]
        except (sqlite3.DatabaseError, ValueError, TypeError) as exc:
            raise self._unusable(exc) from exc
        return found

    def put(self, keys: list[bytes], detections: list[list[Detection]]) -> None:
        """Store the detections of each key (one transaction)."""
        rows = [
            (key, json.dumps([list(d) for d in found]))
            for key, found in zip(keys, detections, strict=True)
        ]
        try:
            with closing(sqlite3.connect(self.path)) as db, db:
                db.executemany("INSERT OR REPLACE INTO detections VALUES (?, ?)", rows)
        except sqlite3.DatabaseError as exc:
            raise self._unusable(exc) from exc
