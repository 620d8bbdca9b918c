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


def mask(text: str, *, max_tokens: int = 8) -> str:
    """Keep each token's first character and mask the rest: ``John Smith`` -> ``J*** S****``."""
    tokens = _TOKEN.findall(text)
    masked = [t[0] + "*" * (len(t) - 1) for t in tokens[:max_tokens]]
    if len(tokens) > max_tokens:
        masked.append(f"…(+{len(tokens) - max_tokens} tokens)")
    return " ".join(masked)
