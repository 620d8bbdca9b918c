"""Judges for the distinguishability audit's ``judge`` attack (``module:function``)."""

from __future__ import annotations

from collections.abc import Sequence


def shared_words(rewrite: str, candidates: Sequence[str]) -> list[float]:
    """Words the rewrite shares with each candidate."""
    words = set(rewrite.lower().split())
    return [float(len(words & set(c.lower().split()))) for c in candidates]


def wrong_length(rewrite: str, candidates: Sequence[str]) -> list[float]:
    return [0.0]


def returns_candidates(rewrite: str, candidates: Sequence[str]) -> list[str]:
    """A buggy judge: the candidates' texts instead of scores."""
    return list(candidates)


def raises_with_the_rewrite(rewrite: str, candidates: Sequence[str]) -> list[float]:
    """A judge whose library error quotes the text it failed on."""
    raise ValueError(f"cannot parse {rewrite!r}")
