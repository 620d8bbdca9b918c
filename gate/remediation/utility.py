"""Utility of a round's release: the generator's perplexity on holdout records, distinct-2
of the release, and the Fréchet distance between MiniLM embeddings of the release and of
the holdout records (docs/methods.md §10). The formulas are in :mod:`gate.stats.utility`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from gate.errors import missing_dependency_message
from gate.generators.base import Generator
from gate.stats.utility import distinct_n, frechet_distance


@dataclass(frozen=True)
class ReleaseUtility:
    """Utility figures of one release (None: not measurable here, with ``notes`` saying why)."""

    holdout_perplexity: float | None
    distinct_2: float
    frechet_embedding_distance: float | None
    notes: tuple[str, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        return {
            "holdout_perplexity": self.holdout_perplexity,
            "distinct_2": self.distinct_2,
            "frechet_embedding_distance": self.frechet_embedding_distance,
            "notes": list(self.notes),
        }


class UtilityMeter:
    """Measures releases against one holdout set (its embeddings are computed once)."""

    def __init__(
        self,
        holdout_texts: Sequence[str],
        *,
        embedding_model: str | None = None,
        cache_dir: str | None = None,
    ) -> None:
        self.holdout_texts = list(holdout_texts)
        self.embedding_model = embedding_model
        self.cache_dir = cache_dir
        self._holdout_embeddings: np.ndarray | None = None
        self._embedding_problem: str | None = None

    def _embed(self, texts: Sequence[str]) -> np.ndarray | None:
        if self._embedding_problem is not None:
            return None
        try:
            from gate.features.embeddings import encode

            return encode(texts, model=self.embedding_model, cache_dir=self.cache_dir)
        except ImportError as exc:
            self._embedding_problem = missing_dependency_message(
                exc, needed_by="the Fréchet embedding distance"
            )
            return None

    def measure(self, texts: Sequence[str], generator: Generator[Any]) -> ReleaseUtility:
        notes: list[str] = []
        perplexity = generator.perplexity(self.holdout_texts)
        if perplexity is None:
            notes.append(f"generator {generator.name!r} does not report a perplexity")
        if self._holdout_embeddings is None:
            self._holdout_embeddings = self._embed(self.holdout_texts)
        frechet = None
        release = self._embed(texts) if self._holdout_embeddings is not None else None
        if release is not None and self._holdout_embeddings is not None:
            frechet = frechet_distance(a=release, b=self._holdout_embeddings)
        elif self._embedding_problem:
            notes.append(self._embedding_problem)
        return ReleaseUtility(
            holdout_perplexity=perplexity,
            distinct_2=distinct_n(texts, n=2),
            frechet_embedding_distance=frechet,
            notes=tuple(notes),
        )
