"""Membership (user-match) audit (Phantoms ``001`` §5.2, Thm 3; Steinke et al. 2023; RIP
``004``).

Each scorer gives every user of D a score from the release alone (higher = more likely in
train). Users are the unit: they were assigned to train independently with probability p,
which is what makes the AUC p-value, the one-run ε bound and the RIP bound valid.
"""

from __future__ import annotations

import numpy as np

from gate.audits.base import Audit, AuditContext, AuditResult
from gate.audits.feature_classes import class_disclosures, rare_records, semantic_index
from gate.audits.registry import AuditUnavailableError, register_audit
from gate.data.bundle import Bundle
from gate.policy.checks import tpr_metric_name
from gate.policy.models import MembershipAudit, SemanticFeatures
from gate.stats.one_run import one_run_epsilon_from_scores
from gate.stats.rip import rip_eta_from_scores
from gate.stats.roc import RocCurve, roc_auc, similarity_two_sample, tpr_at_fpr

STANDARD_FPRS = (0.1, 0.01)
MAX_CURVE_POINTS = 201


def ngram_user_scores(bundle: Bundle, config: MembershipAudit, context: AuditContext) -> np.ndarray:
    """A user's score: the distinct rare n-grams of its records found in the release."""
    return class_disclosures(bundle, config.ngram, context).user_counts.astype(np.float64)


def pii_user_scores(bundle: Bundle, config: MembershipAudit, context: AuditContext) -> np.ndarray:
    """A user's score: the distinct rare PII strings of its records found in the release."""
    return class_disclosures(bundle, config.pii, context).user_counts.astype(np.float64)


def _embedding_index(bundle: Bundle, config: MembershipAudit, context: AuditContext):
    return semantic_index(
        bundle,
        model=config.embedding_model,
        batch_size=64,
        cache_dir=None,
        k=config.embedding_top_k,
        context=context,
    )


def user_maximum(values: np.ndarray, users: np.ndarray, n_users: int | None = None) -> np.ndarray:
    """Per user code, the largest of its values (-inf for a user without any)."""
    out = np.full(int(users.max()) + 1 if n_users is None else n_users, -np.inf)
    np.maximum.at(out, users, values)
    return out


def embedding_user_scores(
    bundle: Bundle, config: MembershipAudit, context: AuditContext
) -> np.ndarray:
    """A user's score: the largest, over its records, top-k mean cosine similarity to the
    release."""
    index = _embedding_index(bundle, config, context)
    record_scores = index.nearest_similarity[:, : config.embedding_top_k].mean(axis=1)
    return user_maximum(record_scores, bundle.user_codes)


def rare_similarity_metrics(
    bundle: Bundle, config: MembershipAudit, context: AuditContext
) -> dict[str, float]:
    """Two-sample test of nearest-release similarity, train vs holdout users, on users with
    semantically rare records (METHODS §3); NaN when one side has no such user."""
    defaults = SemanticFeatures()
    index = _embedding_index(bundle, config, context)
    rare = rare_records(
        index, neighbours=defaults.neighbours, quantile=defaults.rare_quantile, context=context
    )
    users = bundle.user_codes
    best = user_maximum(index.nearest_similarity[rare, 0], users[rare], n_users=users.max() + 1)
    has = np.isfinite(best)
    labels = bundle.user_is_train
    train, holdout = best[has & labels], best[has & ~labels]
    out = {"embedding.rare_users": float(has.sum())}
    if train.size and holdout.size:
        test = similarity_two_sample(train_similarity=train, holdout_similarity=holdout)
        out.update(
            {
                "embedding.rare_similarity_auc": test.auc,
                "embedding.rare_similarity_p_value": test.p_value,
                "embedding.rare_similarity_median_difference": test.median_difference,
            }
        )
    else:
        out.update(
            {
                k: float("nan")
                for k in (
                    "embedding.rare_similarity_auc",
                    "embedding.rare_similarity_p_value",
                    "embedding.rare_similarity_median_difference",
                )
            }
        )
    return out


SCORERS = {"ngram": ngram_user_scores, "pii": pii_user_scores, "embedding": embedding_user_scores}


def thin_curve(curve: RocCurve, limit: int = MAX_CURVE_POINTS) -> dict[str, list[float]]:
    """At most ``limit`` ROC points for the report (always keeping both ends)."""
    n = curve.fpr.size
    keep = np.unique(np.r_[np.linspace(0, n - 1, min(n, limit)).round().astype(int), 0, n - 1])
    return {"fpr": curve.fpr[keep].tolist(), "tpr": curve.tpr[keep].tolist()}


@register_audit("membership")
class MembershipAuditRunner(Audit):
    citation = "Phantoms and Disclosures (2026) §5.2; Steinke, Nasr, Jagielski (2023); RIP Thm 4"

    def run(self, bundle: Bundle, config: MembershipAudit, context: AuditContext) -> AuditResult:
        labels = bundle.user_is_train
        fprs = set(STANDARD_FPRS)
        if config.thresholds.tpr_at_fpr is not None:
            fprs.add(config.thresholds.tpr_at_fpr.fpr)
        metrics: dict[str, float] = {}
        details: dict[str, object] = {}
        for scorer in config.scorers:
            score = SCORERS.get(scorer)
            if score is None:
                raise AuditUnavailableError(
                    f"membership scorer {scorer!r} is not available in this version of gate "
                    f"(available: {sorted(SCORERS)})"
                )
            scores = score(bundle, config, context)
            roc = roc_auc(scores=scores, is_train=labels)
            one_run = one_run_epsilon_from_scores(
                scores=scores,
                is_train=labels,
                rng=context.rng,
                alpha=context.alpha,
                p=context.p,
                delta=config.delta,
                selection=config.threshold_selection,
            )
            rip = rip_eta_from_scores(
                scores=scores, is_train=labels, rng=context.rng, alpha=context.alpha
            )
            if scorer == "embedding":
                metrics.update(rare_similarity_metrics(bundle, config, context))
            metrics.update(
                {
                    f"{scorer}.users_scored": float(scores.size),
                    f"{scorer}.auc": roc.auc,
                    f"{scorer}.auc_p_value": roc.p_value,
                    f"{scorer}.epsilon_lower": one_run.epsilon_lower,
                    f"{scorer}.rip_eta": rip.eta,
                    f"{scorer}.rip_eta_lower": rip.eta_lower,
                }
            )
            for fpr in sorted(fprs, reverse=True):
                metrics[tpr_metric_name(scorer, fpr)] = tpr_at_fpr(roc.curve, fpr=fpr)
            details[scorer] = {
                "roc": thin_curve(roc.curve),
                "one_run": {
                    "k_plus": one_run.k_plus,
                    "k_minus": one_run.k_minus,
                    "correct": one_run.correct,
                    "evaluated_users": one_run.evaluated,
                    "threshold_selection": one_run.selection,
                    "delta": config.delta,
                },
                "rip": {"correct": rip.correct, "trials": rip.trials},
                "statement": (
                    f"AUC {roc.auc:.3f} (one-sided Mann-Whitney p = {roc.p_value:.3g}). With "
                    f"probability >= {1 - context.alpha:g} over the random assignment of users, "
                    f"the release is not (epsilon, {config.delta:g})-DP for any epsilon < "
                    f"{one_run.epsilon_lower:.4f}, and not eta-RIP for any eta < "
                    f"{rip.eta_lower:.4f}. Lower bounds: they can show leakage, never its absence."
                ),
            }
        return AuditResult(metrics=metrics, details=details)
