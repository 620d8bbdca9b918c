"""Redaction of witnesses: the evidence store is less protected than the data it audits."""

from __future__ import annotations

import functools
import hashlib
import hmac
import os
import re

_TOKEN = re.compile(r"\S+")


def witness_key() -> bytes:
    """Key of the witness hashes: ``GATE_WITNESS_KEY`` if set, else random per process.

    A keyed hash, not a plain sha256: with a plain hash anyone holding the report could
    confirm a guessed phone number or name. Owners who want hashes comparable across runs
    set ``GATE_WITNESS_KEY`` and keep it secret.
    """
    env = os.environ.get("GATE_WITNESS_KEY")
    return env.encode("utf-8") if env else _process_key()


@functools.cache
def _process_key() -> bytes:
    return os.urandom(32)


def feature_hash(text: str, *, key: bytes | None = None) -> str:
    digest = hmac.new(key or witness_key(), text.encode("utf-8"), hashlib.sha256)
    return "hmac-sha256:" + digest.hexdigest()[:32]


def user_hash(user_id: str, *, key: bytes | None = None) -> str:
    """A witness's user id when witnesses are redacted: users may be defined by an
    identifying column (``gate split --by email``), and the record id already finds the
    record. Keyed like :func:`feature_hash`, in a domain of its own, so a user id never
    hashes like a feature with the same text."""
    digest = hmac.new(key or witness_key(), b"user\x00" + user_id.encode("utf-8"), hashlib.sha256)
    return "hmac-sha256:" + digest.hexdigest()[:32]


def release_record_hash(record_id: str, *, key: bytes | None = None) -> str:
    """A witness's release record id when witnesses are redacted: whoever holds the
    candidate release (a CI log's readers do) could otherwise read the copied span in the
    named record, and learn that it is a private record's text (a review recovered all 20
    of the example's witnesses so). Keyed like :func:`feature_hash`, in a domain of its
    own; the data owner who sets ``GATE_WITNESS_KEY`` finds the record by hashing the
    release's ids."""
    digest = hmac.new(
        key or witness_key(), b"release\x00" + record_id.encode("utf-8"), hashlib.sha256
    )
    return "hmac-sha256:" + digest.hexdigest()[:32]


def mask(text: str, *, max_tokens: int = 8) -> str:
    """Each token as a fixed ``***``: ``John Smith`` -> ``*** ***``.

    Only the number of tokens is kept, up to ``max_tokens``; beyond them an ellipsis says
    that the text goes on, not how far. Lengths were dropped first (with them a masked
    name or e-mail address was unique among a bundle's users), then initials: a review
    matched the initials of every witness of the example to the one span of the release
    that has them, and so read the copied private text."""
    tokens = _TOKEN.findall(text)
    masked = ["***"] * min(len(tokens), max_tokens)
    if len(tokens) > max_tokens:
        masked.append("…")
    return " ".join(masked)
