"""Disclosure classes as the audits use them: per-record and per-user counts of rare
features found in the release, computed once per run and shared through the context."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from gate.audits.base import AuditContext
from gate.audits.registry import AuditUnavailableError
from gate.data.bundle import Bundle
from gate.features.matching import CodedDisclosures, coded_disclosures
from gate.features.ngram import NgramDisclosures, ngram_disclosures
from gate.features.tokenize import split_corpus, tokenize
from gate.policy.models import NgramFeatures, PiiFeatures, SemanticFeatures, StrictModel


@dataclass(frozen=True)
class WitnessCandidates:
    """For each source row with a disclosure: the row, a synthetic row carrying its
    strongest disclosed feature, and a score (disclosed features in the row, or the
    similarity of a semantic pair). ``feature_text(i)`` gives candidate ``i``'s feature;
    it runs only for the few witnesses that are reported."""

    source_rows: np.ndarray
    synthetic_rows: np.ndarray
    scores: np.ndarray
    feature_text: Callable[[int], str]


@dataclass(frozen=True)
class ClassDisclosures:
    feature_class: str
    rare_features: int
    disclosed_features: int
    record_counts: np.ndarray  # per source row
    user_counts: np.ndarray  # per user code (Bundle.user_codes)
    candidates: WitnessCandidates


def _counted(
    feature_class: str,
    found: NgramDisclosures | CodedDisclosures,
    feature_text: Callable[[int], str],
) -> ClassDisclosures:
    """A counted class (ngram, pii): witness candidates scored by disclosures per record."""
    return ClassDisclosures(
        feature_class=feature_class,
        rare_features=found.rare_features,
        disclosed_features=found.disclosed_features,
        record_counts=found.record_counts,
        user_counts=found.user_counts,
        candidates=WitnessCandidates(
            source_rows=found.witness_record,
            synthetic_rows=found.witness_synthetic,
            scores=found.record_counts[found.witness_record].astype(np.float64),
            feature_text=feature_text,
        ),
    )


def _ngram(bundle: Bundle, config: NgramFeatures, context: AuditContext) -> ClassDisclosures:
    source_texts = bundle.source["text"].tolist()
    corpus = tokenize(
        source_texts + bundle.synthetic["text"].tolist(),
        tokenizer=config.tokenizer,
        lowercase=config.lowercase,
        strip_punctuation=config.strip_punctuation,
    )
    source, synthetic = split_corpus(corpus, len(source_texts))
    found = ngram_disclosures(
        source,
        synthetic,
        users=bundle.user_codes,
        n_min=config.n_min,
        n_max=config.n_max,
        max_users=config.max_users,
        progress=context.progress,
    )
    return _counted(
        "ngram",
        found,
        lambda i: " ".join(
            source.tokens(int(found.witness_position[i]), int(found.witness_length[i]))
        ),
    )


def _pii(bundle: Bundle, config: PiiFeatures, context: AuditContext) -> ClassDisclosures:
    from gate.features.pii import PiiOccurrences, detect_pii

    def detect(texts: list[str], description: str) -> PiiOccurrences:
        return detect_pii(
            texts,
            engine=config.engine,
            spacy_model=config.spacy_model,
            entities=config.entities,
            score_threshold=config.score_threshold,
            normalize=config.normalize,
            progress=context.progress,
            description=description,
        )

    source = detect(bundle.source["text"].tolist(), "PII in source")
    release = detect(bundle.synthetic["text"].tolist(), "PII in release")
    codes, values = pd.factorize(pd.Series(source.values + release.values, dtype=object))
    n_source = len(source.values)
    found = coded_disclosures(
        source_docs=source.docs,
        source_codes=codes[:n_source],
        synthetic_docs=release.docs,
        synthetic_codes=codes[n_source:],
        users=bundle.user_codes,
        max_users=config.max_users,
    )
    surface: dict[str, str] = {}
    for value, raw in zip(source.values, source.raw, strict=True):
        surface.setdefault(value, raw)
    return _counted("pii", found, lambda i: surface[values[int(found.witness_code[i])]])


@dataclass(frozen=True)
class SemanticIndex:
    """Embeddings of the source and the release, and each source record's nearest
    release records (shared by the semantic class and the embedding scorer)."""

    source: np.ndarray
    release: np.ndarray
    nearest_similarity: np.ndarray  # (n_source, k), descending
    nearest_release: np.ndarray  # (n_source, k)


def semantic_index(
    bundle: Bundle,
    *,
    model: str | None,
    batch_size: int,
    cache_dir: str | None,
    k: int,
    context: AuditContext,
) -> SemanticIndex:
    from gate.features.embeddings import encode, knn_inner_product

    key = ("semantic-index", model, cache_dir)
    cached = context.cache.get(key)
    if cached is not None and cached.nearest_similarity.shape[1] >= min(k, cached.release.shape[0]):
        return cached

    def embed(texts: list[str], description: str) -> np.ndarray:
        return encode(
            texts,
            model=model,
            batch_size=batch_size,
            cache_dir=cache_dir,
            progress=context.progress,
            description=description,
        )

    source = embed(bundle.source["text"].tolist(), "embed source")
    release = embed(bundle.synthetic["text"].tolist(), "embed release")
    with context.progress.step("nearest release records"):
        sims, ids = knn_inner_product(source, release, k=k)
    index = SemanticIndex(source, release, sims, ids)
    context.cache[key] = index
    return index


def rare_records(
    index: SemanticIndex, *, neighbours: int, quantile: float, context: AuditContext
) -> np.ndarray:
    """Semantic rarity: a record's mean cosine similarity to its nearest ``neighbours``
    records of D is in the lowest ``quantile`` (METHODS §1)."""
    from gate.features.embeddings import neighbour_density

    key = ("density", id(index.source), neighbours)
    if key not in context.cache:
        with context.progress.step("neighbour density of source records"):
            context.cache[key] = neighbour_density(index.source, neighbours=neighbours)
    density = context.cache[key]
    return density <= np.quantile(density, quantile)


def _semantic(bundle: Bundle, config: SemanticFeatures, context: AuditContext) -> ClassDisclosures:
    index = semantic_index(
        bundle,
        model=config.model,
        batch_size=config.batch_size,
        cache_dir=config.cache_dir,
        k=1,
        context=context,
    )
    rare = rare_records(
        index, neighbours=config.neighbours, quantile=config.rare_quantile, context=context
    )
    nearest = index.nearest_similarity[:, 0]
    disclosed = rare & (nearest >= config.similarity_threshold)
    users = bundle.user_codes
    record_counts = disclosed.astype(np.int64)
    rows = np.nonzero(disclosed)[0]
    texts = bundle.source["text"].to_numpy()
    return ClassDisclosures(
        feature_class="semantic",
        rare_features=int(rare.sum()),
        disclosed_features=int(disclosed.sum()),
        record_counts=record_counts,
        user_counts=np.bincount(users, weights=record_counts, minlength=users.max() + 1).astype(
            np.int64
        ),
        candidates=WitnessCandidates(
            source_rows=rows,
            synthetic_rows=index.nearest_release[rows, 0],
            scores=nearest[rows].astype(np.float64),
            feature_text=lambda i: str(texts[rows[i]]),
        ),
    )


CLASSES: dict[str, Callable[[Bundle, Any, AuditContext], ClassDisclosures]] = {
    "ngram": _ngram,
    "pii": _pii,
    "semantic": _semantic,
}


def class_disclosures(
    bundle: Bundle, config: StrictModel, context: AuditContext
) -> ClassDisclosures:
    """Disclosures of one class under ``config``; computed once per run and config."""
    name = config.feature_class  # type: ignore[attr-defined]
    compute = CLASSES.get(name)
    if compute is None:
        raise AuditUnavailableError(
            f"disclosure class {name!r} is not available in this version of gate "
            f"(available: {sorted(CLASSES)})"
        )
    key = ("disclosures", config)
    if key not in context.cache:
        context.cache[key] = compute(bundle, config, context)
    return context.cache[key]
