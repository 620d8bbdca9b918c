"""Membership signals of canaries computed from a release alone (Meeus et al., 2025,
*The Canary's Echo*, §3.1.2 and Appendix A): the 2-gram log-probability, the mean of the
top-k Jaccard similarities and the mean of the top-k embedding cosine similarities."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from gate.features.embeddings import encode, knn_inner_product
from gate.features.tokenize import tokenize
from gate.progress import Progress
from gate.stats.canary import bigram_log_probabilities, token_set_matrix, top_k_mean_jaccard


@dataclass(frozen=True)
class ReleaseSignals:
    """One value per canary and signal (higher = more likely a member), and the release
    record most similar to each canary (Jaccard)."""

    values: dict[str, np.ndarray]
    nearest_record: np.ndarray


def release_signals(
    canaries: Sequence[str],
    release: Sequence[str],
    *,
    signals: Sequence[str],
    top_k: int,
    embedding_model: str | None = None,
    embedding_cache_dir: str | None = None,
    progress: Progress | None = None,
) -> ReleaseSignals:
    """The requested signals of every canary against ``release``.

    Tokens are lower-cased whitespace tokens of release and canaries together; the 2-gram
    model's vocabulary size V is the number of their distinct tokens.
    """
    if not release:
        raise ValueError("the release is empty")
    corpus = tokenize([*release, *canaries], tokenizer="whitespace", lowercase=True)
    vocabulary = len(corpus.vocab)
    ids = corpus.ids - 1  # tokenize numbers tokens from 1
    cut = int(corpus.starts[len(release)])
    release_ids, release_starts = ids[:cut], corpus.starts[: len(release) + 1]
    canary_ids, canary_starts = ids[cut:], corpus.starts[len(release) :] - cut
    values: dict[str, np.ndarray] = {}
    if "bigram" in signals:
        values["bigram"] = bigram_log_probabilities(
            corpus_ids=release_ids,
            corpus_starts=release_starts,
            query_ids=canary_ids,
            query_starts=canary_starts,
            vocabulary=vocabulary,
        )
    jaccard = top_k_mean_jaccard(
        token_set_matrix(canary_ids, canary_starts, vocabulary=vocabulary),
        token_set_matrix(release_ids, release_starts, vocabulary=vocabulary),
        k=top_k,
    )
    if "jaccard" in signals:
        values["jaccard"] = jaccard.mean
    if "embedding" in signals:
        vectors = encode(
            [*canaries, *release],
            model=embedding_model,
            cache_dir=embedding_cache_dir,
            progress=progress,
            description="canary and release embeddings",
        )
        sims, _ = knn_inner_product(vectors[: len(canaries)], vectors[len(canaries) :], k=top_k)
        values["embedding"] = sims.astype(np.float64).mean(axis=1)
    return ReleaseSignals(values=values, nearest_record=jaccard.best)
