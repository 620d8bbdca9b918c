"""Result types shared by the audits, the suites, the evidence writers and the api.

They live below all of those layers so that, for example, the evidence writers read a
:class:`GateResult` without importing the api that makes it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from gate.errors import GateError
from gate.metrics import Metric
from gate.policy.checks import CheckResult

if TYPE_CHECKING:
    from gate.data.bundle import Bundle
    from gate.policy.models import Policy

Status = Literal["pass", "fail", "error"]
EXIT_CODES: dict[Status, int] = {"pass": 0, "fail": 1, "error": GateError.exit_code}


@dataclass(frozen=True)
class Witness:
    """One concrete disclosure: a rare feature of a source record found in the release.

    ``feature`` is the raw text only when the policy allows it; otherwise a masked snippet.
    """

    feature_class: str
    feature: str
    feature_hash: str
    source_record_id: str
    user_id: str
    split: str
    synthetic_record_id: str
    score: float | None = None
    kind: str | None = None  # e.g. the PII entity type
    records: int = 1  # source records that carry this feature

    def as_dict(self) -> dict[str, Any]:
        return {
            "class": self.feature_class,
            "kind": self.kind,
            "feature": self.feature,
            "records": self.records,
            "feature_hash": self.feature_hash,
            "source_record_id": self.source_record_id,
            "user_id": self.user_id,
            "split": self.split,
            "synthetic_record_id": self.synthetic_record_id,
            "score": self.score,
        }


@dataclass(frozen=True)
class Curve:
    """A curve an audit measured (a ROC curve, an (epsilon, delta) curve). Curves of one
    ``chart`` are drawn in one plot, one line per subject."""

    chart: str
    subject: str
    x: tuple[float, ...]
    y: tuple[float, ...]
    x_label: str
    y_label: str
    label: str = ""
    diagonal: bool = False  # draw the chance line y = x
    log_y: bool = False  # a logarithmic y axis (linear near zero)
    markers: tuple[tuple[float, float, str], ...] = ()  # labelled points, e.g. the policy's

    def as_dict(self) -> dict[str, Any]:
        return {
            "chart": self.chart,
            "subject": self.subject,
            "x": list(self.x),
            "y": list(self.y),
            "x_label": self.x_label,
            "y_label": self.y_label,
            "label": self.label,
            "markers": [{"x": x, "y": y, "label": t} for x, y, t in self.markers],
        }


@dataclass(frozen=True)
class AuditResult:
    """What an audit returns: declared metrics, witnesses, a confidence statement per
    subject, curves, and free-form details for the report."""

    metrics: tuple[Metric, ...]
    witnesses: tuple[Witness, ...] = ()
    statements: Mapping[str, str] = field(default_factory=dict)
    curves: tuple[Curve, ...] = ()
    details: Mapping[str, Any] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()  # for the run's warnings: what may void its statements

    def __post_init__(self) -> None:
        names = [m.name for m in self.metrics]
        if len(set(names)) != len(names):
            raise ValueError(f"an audit reported a metric twice: {sorted(names)}")

    @property
    def metric_values(self) -> dict[str, float]:
        """Full metric name -> value."""
        return {m.name: m.value for m in self.metrics}

    def subjects(self) -> list[str | None]:
        """Subjects (classes, scorers) in the order the audit reported them."""
        return list(dict.fromkeys(m.subject for m in self.metrics))


@dataclass(frozen=True)
class AuditOutcome:
    """An audit's result and the checks of the policy against it.

    ``status`` is ``error`` when the audit raised, was unavailable or did not report a
    metric one of its checks needs; an errored audit never passes, and its checks (those
    it could state) are unmeasured.
    """

    name: str
    status: Status
    checks: tuple[CheckResult, ...]
    result: AuditResult | None
    error: str | None
    seed: dict[str, Any]
    seconds: float
    citation: str = ""

    @property
    def passed(self) -> bool:
        return self.status == "pass"


@dataclass(frozen=True)
class SuiteValidation:
    """The Great Expectations validation of the policy's checks."""

    success: bool
    check_success: dict[tuple[str, str], bool]  # (audit, metric) -> success
    completed: dict[str, bool]  # audit -> GX found it completed
    result: dict[str, Any]  # the validation result as JSON
    suite: dict[str, Any]  # the suite as JSON
    data_docs_index: Path | None


@dataclass(frozen=True)
class GateResult:
    status: Status
    audits: dict[str, AuditOutcome]
    policy: Policy
    policy_path: str | None
    policy_sha256: str | None
    bundle: Bundle
    seed: int
    started_at: str
    seconds: float
    warnings: tuple[str, ...] = field(default=())
    gx: SuiteValidation | None = None
    evidence_error: str | None = None
    evidence_warnings: tuple[str, ...] = field(default=())

    @property
    def passed(self) -> bool:
        return self.status == "pass"

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self.status]
