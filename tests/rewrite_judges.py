"""Judges for the distinguishability audit's ``judge`` attack (``module:function``)."""

from __future__ import annotations

from collections.abc import Sequence


def shared_words(rewrite: str, candidates: Sequence[str]) -> list[float]:
    """Words the rewrite shares with each candidate."""
    words = set(rewrite.lower().split())
    return [float(len(words & set(c.lower().split()))) for c in candidates]


def wrong_length(rewrite: str, candidates: Sequence[str]) -> list[float]:
    return [0.0]
