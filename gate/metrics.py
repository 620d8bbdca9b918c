"""Typed metrics: what an audit measures, declared once and read by every consumer.

An audit declares its metrics as :class:`MetricSpec` objects (name, meaning, direction,
the estimator that makes it, its confidence statement, how to draw it) and returns
:class:`Metric` values that point at those specs. Threshold checks, the Great
Expectations suite, ``report.json``, the HTML report, the plots and MLflow all read the
specs, so a new audit's metrics appear everywhere without editing the evidence code.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Literal

# Which way is evidence of leakage: a larger value ("higher"), a smaller one ("lower"),
# or neither (a count of inputs, say).
Direction = Literal["higher", "lower", "neither"]
Kind = Literal["epsilon", "delta", "eta", "auc", "rate", "count", "p_value", "probability", "other"]


@dataclass(frozen=True)
class MetricSpec:
    """The declaration of one metric of an audit.

    Attributes:
        name: the metric's name within its subject (``epsilon_lower_exact``); the full name
            in reports is ``<subject>.<name>`` when the audit measures several subjects
            (disclosure classes, membership scorers), else ``<name>``.
        meaning: one sentence for a reader of the report.
        leak_if: the direction in which the metric is evidence of leakage.
        estimator: what computed it, citing the paper (author, year, section).
        confidence: its confidence statement (``"lower bound, level 1 - alpha"``), or
            ``"point estimate"``.
        kind: what it measures; the plots draw every ``epsilon`` metric next to the
            policy's maxima.
        chart: metrics sharing a chart name are drawn as one grouped bar chart, with one
            group of bars per subject.
        of_release: False for a metric of the source corpus alone, which no release can
            change (a policy gating a release only on such metrics is refused).
    """

    name: str
    meaning: str
    leak_if: Direction
    estimator: str
    confidence: str = "point estimate"
    kind: Kind = "other"
    chart: str | None = None
    of_release: bool = True

    @property
    def is_point_estimate(self) -> bool:
        """No confidence level: the metric is no bound."""
        return self.confidence == "point estimate"

    def as_dict(self) -> dict[str, str | None]:
        return {
            "meaning": self.meaning,
            "leak_if": self.leak_if,
            "estimator": self.estimator,
            "confidence": self.confidence,
            "kind": self.kind,
            "chart": self.chart,
        }


def metric_name(subject: str | None, spec: MetricSpec) -> str:
    return spec.name if subject is None else f"{subject}.{spec.name}"


@dataclass(frozen=True)
class Metric:
    """One measured value of a declared metric, for one subject (or the whole audit)."""

    spec: MetricSpec
    value: float
    subject: str | None = None

    @property
    def name(self) -> str:
        return metric_name(self.subject, self.spec)


class MetricSet:
    """An audit's declared metrics, by name; builds :class:`Metric` values that must
    name a declared metric (a typo is an error, not a metric nobody reads)."""

    def __init__(self, specs: Iterable[MetricSpec]) -> None:
        self._specs: dict[str, MetricSpec] = {}
        for spec in specs:
            if spec.name in self._specs:
                raise ValueError(f"metric {spec.name!r} is declared twice")
            self._specs[spec.name] = spec

    def __getitem__(self, name: str) -> MetricSpec:
        try:
            return self._specs[name]
        except KeyError:
            raise KeyError(
                f"metric {name!r} is not declared (declared: {sorted(self._specs)})"
            ) from None

    def __iter__(self):
        return iter(self._specs.values())

    def __contains__(self, name: object) -> bool:
        return name in self._specs

    def values(self, subject: str | None, values: Mapping[str, float]) -> tuple[Metric, ...]:
        """``Metric`` values of ``subject`` from ``{name: value}``, in declaration order."""
        unknown = sorted(set(values) - set(self._specs))
        if unknown:
            raise KeyError(f"metrics {unknown} are not declared (declared: {sorted(self._specs)})")
        return tuple(
            Metric(spec=spec, value=float(values[spec.name]), subject=subject)
            for spec in self._specs.values()
            if spec.name in values
        )


# papers and confidence statements that several audits' metrics cite
ONE_RUN_PAPER = "Steinke, Nasr and Jagielski (2023), Privacy Auditing with One (1) Training Run"
LBF_PAPER = "Stomakhin (2025), Framework for Privacy-Preserving Synthesis of Textual Data"
LOWER_OVER_USERS = "lower confidence bound, level 1 - alpha, over the random assignment of users"
