"""Disclosure classes as the audits use them: per-record and per-user counts of rare
features found in the release, computed once per run and shared through the context."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gate.audits.base import AuditContext
from gate.audits.registry import AuditUnavailableError
from gate.data.bundle import Bundle
from gate.features.ngram import ngram_disclosures
from gate.features.tokenize import split_corpus, tokenize
from gate.policy.models import NgramFeatures, StrictModel


@dataclass(frozen=True)
class SourceWitness:
    """A source row's strongest disclosed feature and a synthetic row that carries it."""

    source_row: int
    feature_text: str
    synthetic_row: int


@dataclass(frozen=True)
class ClassDisclosures:
    feature_class: str
    rare_features: int
    disclosed_features: int
    record_counts: np.ndarray  # per source row
    user_counts: np.ndarray  # per user code (Bundle.user_codes)
    witnesses: tuple[SourceWitness, ...]


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
    witnesses = tuple(
        SourceWitness(int(row), " ".join(source.tokens(int(pos), int(n))), int(syn))
        for row, pos, n, syn in zip(
            found.witness_record,
            found.witness_position,
            found.witness_length,
            found.witness_synthetic,
            strict=True,
        )
    )
    return ClassDisclosures(
        feature_class="ngram",
        rare_features=found.rare_features,
        disclosed_features=found.disclosed_features,
        record_counts=found.record_counts,
        user_counts=found.user_counts,
        witnesses=witnesses,
    )


CLASSES = {"ngram": _ngram}


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
        context.cache[key] = compute(bundle, config, context)  # type: ignore[arg-type]
    return context.cache[key]
