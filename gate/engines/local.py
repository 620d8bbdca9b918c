"""The ``local`` engine: this process; in memory up to ``engine.memory_mb`` of text, else in
chunks through hash partitions on disk (peak memory set by ``engine.chunk_mb``)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa

from gate.engines.base import Engine
from gate.errors import InputError
from gate.features.ngram import NgramDisclosures, ngram_disclosures
from gate.features.ngram_spill import spilled_ngram_disclosures, text_sizes
from gate.features.tokenize import Texts, arrow_texts, split_corpus, tokenize
from gate.plugins import ENGINES
from gate.policy.models import NgramFeatures
from gate.progress import Progress


@ENGINES.register("local")
class LocalEngine(Engine):
    name = "local"

    def ngram_disclosures(
        self,
        source_texts: Texts,
        synthetic_texts: Texts,
        *,
        users: np.ndarray,
        config: NgramFeatures,
        progress: Progress,
    ) -> NgramDisclosures:
        in_memory = self.settings.memory_mb * 2**20
        chunk = max(1, int(self.settings.chunk_mb * 2**20))
        options = config.tokenizer_options()
        source_texts, synthetic_texts = arrow_texts(source_texts), arrow_texts(synthetic_texts)
        size = int(text_sizes(source_texts).sum() + text_sizes(synthetic_texts).sum())
        if size <= in_memory:
            both = pa.chunked_array(source_texts.chunks + synthetic_texts.chunks, pa.large_string())
            corpus = tokenize(both, **options)
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
            **options,
        )
