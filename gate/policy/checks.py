"""Threshold checks: which metric each policy threshold gates, and their evaluation (pure)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from gate.policy.models import Policy

Op = Literal["<=", ">="]


@dataclass(frozen=True)
class CheckSpec:
    """One threshold of the policy: ``metric op threshold`` must hold for a PASS."""

    audit: str
    metric: str
    op: Op
    threshold: float
    description: str


@dataclass(frozen=True)
class CheckResult:
    spec: CheckSpec
    value: float | None
    passed: bool

    def as_dict(self) -> dict[str, object]:
        return {
            "metric": self.spec.metric,
            "op": self.spec.op,
            "threshold": self.spec.threshold,
            "value": self.value,
            "passed": self.passed,
            "description": self.spec.description,
        }


def tpr_metric_name(scorer: str, fpr: float) -> str:
    return f"{scorer}.tpr_at_fpr_{fpr:g}"


def policy_checks(policy: Policy) -> list[CheckSpec]:
    """Every threshold check of the enabled audits, in a stable order."""
    checks: list[CheckSpec] = []
    audits = policy.audits.enabled()

    disclosure = audits.get("disclosure")
    if disclosure is not None:
        t = disclosure.thresholds  # type: ignore[attr-defined]
        for feature in disclosure.features:  # type: ignore[attr-defined]
            c = feature.feature_class
            if t.max_epsilon is not None:
                suffix = "_exact" if t.epsilon_estimator == "exact" else ""
                checks.append(
                    CheckSpec(
                        "disclosure",
                        f"{c}.epsilon_lower{suffix}",
                        "<=",
                        t.max_epsilon,
                        f"{c}: lower confidence bound on epsilon ({t.epsilon_estimator} tail)",
                    )
                )
            if t.max_excess_disclosures is not None:
                suffix = "_lower" if t.excess_statistic == "lower_bound" else ""
                checks.append(
                    CheckSpec(
                        "disclosure",
                        f"{c}.excess_disclosures{suffix}",
                        "<=",
                        t.max_excess_disclosures,
                        f"{c}: phantom-adjusted excess disclosures T - H p/(1-p)"
                        + (" (lower confidence bound)" if suffix else ""),
                    )
                )

    membership = audits.get("membership")
    if membership is not None:
        t = membership.thresholds  # type: ignore[attr-defined]
        for s in membership.scorers:  # type: ignore[attr-defined]
            if t.max_auc is not None:
                checks.append(CheckSpec("membership", f"{s}.auc", "<=", t.max_auc, f"{s}: ROC AUC"))
            if t.tpr_at_fpr is not None:
                checks.append(
                    CheckSpec(
                        "membership",
                        tpr_metric_name(s, t.tpr_at_fpr.fpr),
                        "<=",
                        t.tpr_at_fpr.max_tpr,
                        f"{s}: TPR at FPR {t.tpr_at_fpr.fpr:g}",
                    )
                )
            if t.max_epsilon is not None:
                checks.append(
                    CheckSpec(
                        "membership",
                        f"{s}.epsilon_lower",
                        "<=",
                        t.max_epsilon,
                        f"{s}: one-run lower bound on epsilon",
                    )
                )
            if t.max_rip_eta is not None:
                checks.append(
                    CheckSpec(
                        "membership",
                        f"{s}.rip_eta_lower",
                        "<=",
                        t.max_rip_eta,
                        f"{s}: lower confidence bound on RIP eta",
                    )
                )

    profile = audits.get("profile")
    if profile is not None:
        t = profile.thresholds  # type: ignore[attr-defined]
        if t.max_delta is not None:
            checks.append(
                CheckSpec(
                    "profile",
                    "delta_at_target_epsilon",
                    "<=",
                    t.max_delta,
                    f"minimal delta at epsilon = {t.target_epsilon:g}",
                )
            )
        if t.max_delta_floor is not None:
            checks.append(
                CheckSpec("profile", "delta_floor", "<=", t.max_delta_floor, "delta floor")
            )

    distinguishability = audits.get("distinguishability")
    if distinguishability is not None:
        t = distinguishability.thresholds  # type: ignore[attr-defined]
        if t.max_epsilon is not None:
            checks.append(
                CheckSpec(
                    "distinguishability",
                    "epsilon_emp",
                    "<=",
                    t.max_epsilon,
                    "empirical epsilon of the candidate-set game",
                )
            )
    return checks


class MissingMetricError(KeyError):
    """An audit did not produce a metric its checks need: the audit is unfinished."""


def evaluate_check(spec: CheckSpec, metrics: Mapping[str, float]) -> CheckResult:
    """Evaluate one check. A missing or NaN metric raises: it is never a pass."""
    if spec.metric not in metrics:
        raise MissingMetricError(
            f"audit '{spec.audit}' did not report metric '{spec.metric}' needed by a threshold"
        )
    value = float(metrics[spec.metric])
    if math.isnan(value):
        raise MissingMetricError(
            f"audit '{spec.audit}' reported NaN for metric '{spec.metric}' needed by a threshold"
        )
    passed = value <= spec.threshold if spec.op == "<=" else value >= spec.threshold
    return CheckResult(spec=spec, value=value, passed=passed)
