"""The ``local`` engine: this process; in memory up to ``engine.memory_mb`` of text, else in
chunks through hash partitions on disk (peak memory set by ``engine.chunk_mb``)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from gate.engines.base import Engine
from gate.errors import InputError
from gate.features.ngram import NgramDisclosures, ngram_disclosures
from gate.features.ngram_spill import spilled_ngram_disclosures
from gate.features.tokenize import split_corpus, tokenize
from gate.plugins import ENGINES
from gate.policy.models import NgramFeatures
from gate.progress import Progress


def text_size(texts: Sequence[str]) -> int:
    """Characters of ``texts`` (one more per record, for the separator)."""
    sizes = pd.Series(texts, dtype=object).str.len().fillna(0)
    return int(sizes.sum()) + len(texts)


@ENGINES.register("local")
class LocalEngine(Engine):
    name = "local"

    def ngram_disclosures(
        self,
        source_texts: Sequence[str],
        synthetic_texts: Sequence[str],
        *,
        users: np.ndarray,
        config: NgramFeatures,
        progress: Progress,
    ) -> NgramDisclosures:
        in_memory = self.settings.memory_mb * 2**20
        chunk = max(1, int(self.settings.chunk_mb * 2**20))
        options = {
            "tokenizer": config.tokenizer,
            "lowercase": config.lowercase,
            "strip_punctuation": config.strip_punctuation,
        }
        if text_size(source_texts) + text_size(synthetic_texts) <= in_memory:
            corpus = tokenize(list(source_texts) + list(synthetic_texts), **options)  # type: ignore[arg-type]
            source, synthetic = split_corpus(corpus, len(source_texts))
            return ngram_disclosures(
                source,
                synthetic,
                users=users,
                n_min=config.n_min,
                n_max=config.n_max,
                max_users=config.max_users,
                progress=progress,
            )
        workdir = self.settings.workdir
        if workdir is not None and not Path(workdir).is_dir():
            raise InputError(f"engine.workdir: {workdir} is not a directory")
        return spilled_ngram_disclosures(
            source_texts,
            synthetic_texts,
            users=users,
            n_min=config.n_min,
            n_max=config.n_max,
            max_users=config.max_users,
            chunk_chars=chunk,
            workdir=workdir,
            progress=progress,
            **options,  # type: ignore[arg-type]
        )
