"""An on-disk cache of PII detections: a text's entity spans, keyed by its sha256.

A release is gated against the same train and holdout again and again (each candidate
release in CI, each round of ``gate remediate``); with a cache their detections are
computed once. The cache holds no text and no entity: each row is a text's sha256 and
its spans (entity type, start, end), which mean something only next to the text (they
do tell each record's entity types and lengths), sealed for the text and the file
(:mod:`gate.features.sqlite_cache`). It is derived from private records (a guessed text
can be confirmed by its hash), and whoever holds a text (the release's author holds the
release's) can write a row that hides its detections unless ``GATE_CACHE_KEY`` keys the
seals, so it belongs where the corpus is kept.

One SQLite file per detector (:func:`detector_key`): a change to anything the detections
depend on starts an empty file. A row not sealed for its text, or not a detection of it
(malformed, out of the text, an entity type not searched), is an error naming the file,
never a silent miss.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
from collections.abc import Sequence
from functools import cache
from pathlib import Path

from gate._version import __version__
from gate.digests import sha256_tree
from gate.environment import distribution_version
from gate.features.sqlite_cache import SqliteCache, TextKey

Detection = tuple[str, int, int]  # entity type, start, end
# the gate's own detection code: Presidio's recognizers subclassed to scan windows, the
# two-pass spaCy analysis, the gate's own recognizers (e-mail addresses written out)
_DETECTION_CODE = (
    "pii.py",
    "pii_windows.py",
    "pii_recognizers.py",
    "email_forms.py",
    "phone_forms.py",
)
_VERSIONED = ("presidio-analyzer", "phonenumbers", "spacy", "thinc", "tldextract", "regex")


@cache
def detection_code_digest() -> str:
    """sha256 of the gate's own detection modules."""
    here = Path(__file__).parent
    return sha256_tree(here, [here / name for name in _DETECTION_CODE])


@cache
def pipeline_digest(spacy_model: str) -> str:
    """sha256 of the files of the installed spaCy pipeline package ``spacy_model`` (its
    weights, vocabulary and ``meta.json``; compiled Python left out)."""
    spec = importlib.util.find_spec(spacy_model)
    if spec is None or spec.origin is None:
        raise ModuleNotFoundError(f"spaCy pipeline {spacy_model!r} is not installed")
    root = Path(spec.origin).parent
    if spec.submodule_search_locations is None:  # a module, not a package: its file alone
        return sha256_tree(root, [Path(spec.origin)])
    files = sorted(
        p for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.relative_to(root).parts
    )
    return sha256_tree(root, files)


def detector_key(
    *,
    engine: str,
    spacy_model: str | None,
    entities: Sequence[str],
    score_threshold: float,
) -> str:
    """The identity of a detector (16 hex digits): what its detections depend on.

    Args:
        engine: ``"spacy"`` or ``"patterns"``.
        spacy_model: the spaCy pipeline package (its files are digested), None for
            ``"patterns"``.
        entities: the entity types searched, in the policy's order.
        score_threshold: the minimum Presidio score.

    The identity also holds the versions of Presidio, phonenumbers, spaCy, thinc,
    tldextract and regex, the gate's version and a digest of its detection code, and the
    Public Suffix List source Presidio's e-mail recognizer is given
    (``TLDEXTRACT_PUBLIC_SUFFIX_LIST_URLS``: its URLs, not the contents they serve).
    """
    identity = {
        "engine": engine,
        "pipeline": None
        if spacy_model is None
        else {"package": spacy_model, "files": pipeline_digest(spacy_model)},
        "entities": list(entities),
        "score_threshold": float(score_threshold),
        "versions": {"gate": __version__, **{d: distribution_version(d) for d in _VERSIONED}},
        "detection_code": detection_code_digest(),
        "suffix_lists": os.environ.get("TLDEXTRACT_PUBLIC_SUFFIX_LIST_URLS", ""),
    }
    encoded = json.dumps(identity, sort_keys=True).encode("utf-8")
    return hashlib.sha256(encoded).hexdigest()[:16]


def _detections(spans: object, text: str, entities: frozenset[str]) -> list[Detection] | None:
    """The spans of a row as detections of ``text``, or None if they cannot be."""
    if not isinstance(spans, list):
        return None
    found: list[Detection] = []
    for span in spans:
        if not (isinstance(span, list) and len(span) == 3):
            return None
        kind, start, end = span
        if not (
            isinstance(kind, str)
            and kind in entities
            and type(start) is int
            and type(end) is int
            and 0 <= start <= end <= len(text)
        ):
            return None
        found.append((kind, start, end))
    return found


class DetectionCache:
    """SQLite file per detector: sha256(text) -> the text's detections (JSON spans)."""

    def __init__(self, directory: str | Path, detector: str) -> None:
        self._store = SqliteCache(
            directory,
            f"pii-{detector}",
            table="detections",
            column="spans",
            column_type="TEXT",
        )
        self.path = self._store.path

    def lookup(
        self, texts: Sequence[str], *, entities: Sequence[str]
    ) -> list[list[Detection] | None]:
        """The cached detections of each text, None where the cache has none.

        Raises:
            InputError: a row for one of ``texts`` is not sealed for it in this file, or
                is not a detection of it.
        """
        keys = self._store.keys(texts)
        rows = self._store.get(keys)
        searched = frozenset(entities)
        found: list[list[Detection] | None] = []
        for key, text in zip(keys, texts, strict=True):
            if key not in rows:
                found.append(None)
                continue
            try:
                spans = json.loads(rows[key])
            except (ValueError, RecursionError):
                spans = None
            detections = _detections(spans, text, searched)
            if detections is None:
                raise self._store.unusable(
                    "holds a row that is not a detection of its text (spans out of the text, "
                    "malformed, or of an entity type not searched)"
                )
            found.append(detections)
        return found

    def store(self, texts: Sequence[str], detections: Sequence[Sequence[Detection]]) -> None:
        """Store the detections of each text (one transaction)."""
        if len(texts) != len(detections):
            raise ValueError(
                f"texts and detections must have one entry each; found {len(texts)} and "
                f"{len(detections)}"
            )
        rows: list[tuple[TextKey, bytes | str]] = [
            (key, json.dumps([list(d) for d in found]))
            for key, found in zip(self._store.keys(texts), detections, strict=True)
        ]
        self._store.put(rows)
