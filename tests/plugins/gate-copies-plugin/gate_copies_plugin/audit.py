"""The ``copies`` audit: synthetic records that are verbatim copies of a source record.

A user counts once if any of its records is copied. Under zero learning a copied user is
in train with probability p, so the feature-match test of the Phantoms paper turns the
train/holdout imbalance of copied users into a lower bound on epsilon.
"""

from __future__ import annotations

import numpy as np
from pydantic import Field

from gate.audits.base import Audit, AuditContext
from gate.data.bundle import Bundle
from gate.metrics import MetricSet, MetricSpec
from gate.policy.checks import CheckSpec
from gate.policy.models import AuditConfig, StrictModel
from gate.results import AuditResult
from gate.stats.feature_match import feature_match_test

CITATION = "Phantoms and Disclosures (2026), Thm 2 (feature-match test on copied users)"
METRICS = MetricSet(
    [
        MetricSpec(
            "train_copies",
            "train users with a record copied verbatim",
            "higher",
            CITATION,
            kind="count",
            chart="copies: train vs holdout",
        ),
        MetricSpec(
            "holdout_copies",
            "holdout users with a record copied verbatim",
            "neither",
            CITATION,
            kind="count",
            chart="copies: train vs holdout",
        ),
        MetricSpec(
            "epsilon_lower",
            "lower bound on epsilon from copied users",
            "higher",
            CITATION,
            "lower confidence bound, level 1 - alpha",
            kind="epsilon",
        ),
    ]
)


class CopiesThresholds(StrictModel):
    max_train_copies: int | None = Field(None, ge=0, description="Most train users copied.")
    max_epsilon: float | None = Field(None, ge=0, description="Largest tolerated bound.")


class CopiesConfig(AuditConfig):
    min_characters: int = Field(20, ge=1, description="Shorter records are not counted.")
    thresholds: CopiesThresholds = Field(default_factory=CopiesThresholds)


class CopiesAudit(Audit[CopiesConfig]):
    name = "copies"
    config_model = CopiesConfig
    metrics = METRICS
    citation = CITATION

    def checks(self, config: CopiesConfig) -> list[CheckSpec]:
        t = config.thresholds
        out = []
        if t.max_train_copies is not None:
            out.append(
                CheckSpec.at_most(
                    self.name,
                    METRICS["train_copies"],
                    None,
                    t.max_train_copies,
                    "train users copied verbatim",
                )
            )
        if t.max_epsilon is not None:
            out.append(
                CheckSpec.at_most(
                    self.name,
                    METRICS["epsilon_lower"],
                    None,
                    t.max_epsilon,
                    "lower bound on epsilon from copies",
                )
            )
        return out

    def run(self, bundle: Bundle, config: CopiesConfig, context: AuditContext) -> AuditResult:
        text = bundle.source["text"].str.strip()
        released = set(bundle.synthetic["text"].str.strip())
        copied = (text.str.len() >= config.min_characters) & text.isin(released)
        users = bundle.user_codes
        per_user = np.bincount(users, weights=copied.to_numpy(), minlength=users.max() + 1)
        counts = (per_user > 0).astype(np.int64)
        test = feature_match_test(
            counts=counts, is_train=bundle.user_is_train, p=context.p, alpha=context.alpha
        )
        return AuditResult(
            metrics=METRICS.values(
                None,
                {
                    "train_copies": test.statistic,
                    "holdout_copies": test.holdout_statistic,
                    "epsilon_lower": test.epsilon_lower_exact,
                },
            ),
            statements={
                "copies": f"{int(test.statistic)} train and {int(test.holdout_statistic)} "
                f"holdout users have a record copied verbatim; not epsilon-DP for any "
                f"epsilon < {test.epsilon_lower_exact:.4f} (level {1 - context.alpha:g})."
            },
        )
