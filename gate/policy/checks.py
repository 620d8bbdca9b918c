"""Threshold checks: ``metric op threshold`` against a declared metric, and their
evaluation (pure). Which checks a policy implies is each audit's business
(:meth:`gate.audits.base.Audit.checks`); this module only states and evaluates them."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from gate.errors import AuditError
from gate.metrics import MetricSpec, metric_name

Op = Literal["<=", ">="]


@dataclass(frozen=True)
class CheckSpec:
    """One threshold of the policy: ``metric op threshold`` must hold for a PASS.

    ``spec`` is the audit's declaration of the metric; ``subject`` the disclosure class or
    scorer it is measured for (``None`` for an audit-wide metric).
    """

    audit: str
    spec: MetricSpec
    subject: str | None
    op: Op
    threshold: float
    description: str

    @property
    def metric(self) -> str:
        return metric_name(self.subject, self.spec)

    @property
    def threshold_text(self) -> str:
        """The threshold as the policy wrote it (15 significant digits: 6 had shown
        0.1234567891 as 0.123457, so a failing 0.12345679 read as a pass)."""
        return f"{self.threshold:.15g}"

    @property
    def bound(self) -> str:
        """``op threshold``."""
        return f"{self.op} {self.threshold_text}"

    @classmethod
    def at_most(
        cls, audit: str, spec: MetricSpec, subject: str | None, threshold: float, description: str
    ) -> CheckSpec:
        return cls(audit, spec, subject, "<=", float(threshold), description)


@dataclass(frozen=True)
class CheckResult:
    """A check's outcome. ``value`` is ``None`` when the check was not measured (its
    audit did not complete); such a check never passes."""

    spec: CheckSpec
    value: float | None
    passed: bool

    @property
    def measured(self) -> bool:
        return self.value is not None

    def as_dict(self) -> dict[str, object]:
        return {
            "metric": self.spec.metric,
            "op": self.spec.op,
            "threshold": self.spec.threshold,
            "value": self.value,
            "passed": self.passed,
            "description": self.spec.description,
            "estimator": self.spec.spec.estimator,
            "confidence": self.spec.spec.confidence,
        }


class MissingMetricError(AuditError, KeyError):
    """An audit did not produce a metric its checks need: the audit is unfinished."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


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
