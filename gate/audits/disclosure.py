"""Disclosure audit (Phantoms paper ``001`` §2-5; METHODS §1-2).

Per disclosure class: rare features of the source records, those the release discloses,
train disclosures T and holdout disclosures H (phantoms), the phantom-adjusted excess
with its bounds, and the feature-match test (Hoeffding and exact tails).
"""

from __future__ import annotations

import numpy as np

from gate.audits.base import Audit, AuditContext, AuditResult, Witness
from gate.audits.registry import AuditUnavailableError, register_audit
from gate.data.bundle import Bundle
from gate.evidence.redaction import feature_hash, mask
from gate.features.ngram import ngram_disclosures
from gate.features.tokenize import split_corpus, tokenize
from gate.policy.models import DisclosureAudit, NgramFeatures
from gate.stats.excess import phantom_excess
from gate.stats.feature_match import feature_match_test


class ClassDisclosures:
    """What a disclosure class found: ``c_i`` per source record and witness candidates."""

    def __init__(
        self,
        *,
        rare_features: int,
        disclosed_features: int,
        record_counts: np.ndarray,
        witnesses: list[tuple[int, str, int]],
    ) -> None:
        self.rare_features = rare_features
        self.disclosed_features = disclosed_features
        self.record_counts = record_counts
        self.witnesses = witnesses  # (source row, feature text, synthetic row)


def ngram_class(bundle: Bundle, config: NgramFeatures, context: AuditContext) -> ClassDisclosures:
    source_texts = bundle.source["text"].tolist()
    corpus = tokenize(
        source_texts + bundle.synthetic["text"].tolist(),
        tokenizer=config.tokenizer,
        lowercase=config.lowercase,
        strip_punctuation=config.strip_punctuation,
    )
    source, synthetic = split_corpus(corpus, len(source_texts))
    users = bundle.source["user_id"].factorize()[0]
    found = ngram_disclosures(
        source,
        synthetic,
        users=users,
        n_min=config.n_min,
        n_max=config.n_max,
        max_users=config.max_users,
        progress=context.progress,
    )
    witnesses = [
        (int(row), " ".join(source.tokens(int(pos), int(n))), int(syn))
        for row, pos, n, syn in zip(
            found.witness_record,
            found.witness_position,
            found.witness_length,
            found.witness_synthetic,
            strict=True,
        )
    ]
    return ClassDisclosures(
        rare_features=found.rare_features,
        disclosed_features=found.disclosed_features,
        record_counts=found.record_counts,
        witnesses=witnesses,
    )


CLASS_RUNNERS = {"ngram": ngram_class}


@register_audit("disclosure")
class DisclosureAuditRunner(Audit):
    citation = "Phantoms and Disclosures (2026), §2-5, Lemma 1, Thms 1-2"

    def run(self, bundle: Bundle, config: DisclosureAudit, context: AuditContext) -> AuditResult:
        metrics: dict[str, float] = {}
        details: dict[str, object] = {}
        witnesses: list[tuple[int, Witness]] = []
        is_train = bundle.is_train
        for feature_config in config.features:
            name = feature_config.feature_class
            runner = CLASS_RUNNERS.get(name)
            if runner is None:
                raise AuditUnavailableError(
                    f"disclosure class {name!r} is not available in this version of gate "
                    f"(available: {sorted(CLASS_RUNNERS)})"
                )
            found = runner(bundle, feature_config, context)
            test = feature_match_test(
                counts=found.record_counts, is_train=is_train, p=context.p, alpha=context.alpha
            )
            excess = phantom_excess(
                counts=found.record_counts, is_train=is_train, p=context.p, alpha=context.alpha
            )
            metrics.update(
                {
                    f"{name}.rare_features": float(found.rare_features),
                    f"{name}.disclosed_features": float(found.disclosed_features),
                    f"{name}.records_with_disclosures": float((found.record_counts > 0).sum()),
                    f"{name}.train_disclosures": test.statistic,
                    f"{name}.holdout_disclosures": test.holdout_statistic,
                    f"{name}.phantom_rate": excess.phantom_rate,
                    f"{name}.excess_disclosures": excess.estimate,
                    f"{name}.excess_disclosures_lower": excess.lower,
                    f"{name}.excess_disclosures_upper": excess.upper,
                    f"{name}.critical_value": test.critical_value,
                    f"{name}.p_value": test.p_value,
                    f"{name}.p_lower": test.p_lower,
                    f"{name}.epsilon_lower": test.epsilon_lower,
                    f"{name}.p_value_exact": test.p_value_exact,
                    f"{name}.p_lower_exact": test.p_lower_exact,
                    f"{name}.epsilon_lower_exact": test.epsilon_lower_exact,
                }
            )
            details[name] = {
                "statement": (
                    f"With probability >= {1 - context.alpha:g} over the random train/holdout "
                    f"assignment, the train rate of disclosed {name} features is >= "
                    f"{test.p_lower_exact:.4f} (exact) / {test.p_lower:.4f} (Hoeffding), so the "
                    f"release is not epsilon-DP for any epsilon < "
                    f"{test.epsilon_lower_exact:.4f} (exact). A lower bound: it can show "
                    "leakage, never its absence."
                ),
                "excess_interval": [excess.lower, excess.upper],
                "excess_interval_level": f"each side at alpha = {context.alpha:g}",
            }
            for row, text, syn in found.witnesses:
                record = bundle.source.iloc[row]
                witnesses.append(
                    (
                        int(found.record_counts[row]),
                        Witness(
                            feature_class=name,
                            feature=mask(text) if context.redact else text,
                            feature_hash=feature_hash(text),
                            source_record_id=str(record["record_id"]),
                            user_id=str(record["user_id"]),
                            split=str(record["split"]),
                            synthetic_record_id=str(bundle.synthetic["record_id"].iloc[syn]),
                            score=float(found.record_counts[row]),
                        ),
                    )
                )
        witnesses.sort(key=lambda item: (item[1].split != "train", -item[0]))
        return AuditResult(
            metrics=metrics,
            witnesses=tuple(w for _, w in witnesses[: context.max_witnesses]),
            details=details,
        )
