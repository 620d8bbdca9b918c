"""Disclosure audit (Phantoms paper ``001`` §2-5; METHODS §1-2).

Per disclosure class: rare features of the source records, those the release discloses,
train disclosures T and holdout disclosures H (phantoms), the phantom-adjusted excess
with its bounds, and the feature-match test (Hoeffding and exact tails). The unit of
membership is the user: ``c_u`` counts the distinct disclosed rare features of user ``u``.
"""

from __future__ import annotations

import numpy as np

from gate.audits.base import Audit, AuditContext, AuditResult, Witness
from gate.audits.feature_classes import ClassDisclosures, class_disclosures
from gate.audits.registry import register_audit
from gate.data.bundle import Bundle
from gate.evidence.redaction import feature_hash, mask
from gate.policy.models import DisclosureAudit
from gate.stats.excess import phantom_excess
from gate.stats.feature_match import feature_match_test


def witnesses_of(found: ClassDisclosures, bundle: Bundle, context: AuditContext) -> list[Witness]:
    """The class's strongest ``max_witnesses`` witnesses: train first, highest score first.
    Selection is vectorised; only the kept witnesses are built (and their text read)."""
    c = found.candidates
    holdout = ~bundle.is_train[c.source_rows]
    order = np.lexsort((-c.scores, holdout))[: context.max_witnesses]
    source, synthetic = bundle.source, bundle.synthetic
    out = []
    for i in order:
        row = int(c.source_rows[i])
        text = c.feature_text(int(i))
        out.append(
            Witness(
                feature_class=found.feature_class,
                feature=mask(text) if context.redact else text,
                feature_hash=feature_hash(text),
                source_record_id=str(source["record_id"].iat[row]),
                user_id=str(source["user_id"].iat[row]),
                split=str(source["split"].iat[row]),
                synthetic_record_id=str(synthetic["record_id"].iat[int(c.synthetic_rows[i])]),
                score=float(c.scores[i]),
            )
        )
    return out


def round_robin(lists: list[list[Witness]], limit: int) -> tuple[Witness, ...]:
    """Take witnesses from each class in turn, so that one prolific class does not hide
    the others."""
    out: list[Witness] = []
    depth = 0
    while len(out) < limit and any(depth < len(items) for items in lists):
        out.extend(items[depth] for items in lists if depth < len(items))
        depth += 1
    return tuple(out[:limit])


@register_audit("disclosure")
class DisclosureAuditRunner(Audit):
    citation = "Phantoms and Disclosures (2026), §2-5, Lemma 1, Thms 1-2"

    def run(self, bundle: Bundle, config: DisclosureAudit, context: AuditContext) -> AuditResult:
        metrics: dict[str, float] = {}
        details: dict[str, object] = {}
        per_class: list[list[Witness]] = []
        user_is_train = bundle.user_is_train
        for feature_config in config.features:
            found = class_disclosures(bundle, feature_config, context)
            name = found.feature_class
            counts = found.user_counts
            test = feature_match_test(
                counts=counts, is_train=user_is_train, p=context.p, alpha=context.alpha
            )
            excess = phantom_excess(
                counts=counts, is_train=user_is_train, p=context.p, alpha=context.alpha, test=test
            )
            metrics.update(
                {
                    f"{name}.rare_features": float(found.rare_features),
                    f"{name}.disclosed_features": float(found.disclosed_features),
                    f"{name}.records_with_disclosures": float((found.record_counts > 0).sum()),
                    f"{name}.users_with_disclosures": float((counts > 0).sum()),
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
                    f"With probability >= {1 - context.alpha:g} over the random assignment of "
                    f"users to train (p = {context.p:g}), the train share of disclosed {name} "
                    f"features is >= {test.p_lower_exact:.4f} (exact tail; Hoeffding "
                    f"{test.p_lower:.4f}), so the release is not epsilon-DP for any epsilon < "
                    f"{test.epsilon_lower_exact:.4f}. A lower bound: an audit can show leakage, "
                    "never its absence."
                ),
                "excess_interval": [excess.lower, excess.upper],
                "excess_interval_level": f"each side at alpha = {context.alpha:g}",
            }
            per_class.append(witnesses_of(found, bundle, context))
        return AuditResult(
            metrics=metrics,
            witnesses=round_robin(per_class, context.max_witnesses),
            details=details,
        )
