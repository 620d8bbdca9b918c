"""The audit interface: what an audit declares, receives and returns.

An audit is a plug-in (:data:`gate.plugins.AUDITS`) with a typed configuration model,
a declared set of metrics, the checks its thresholds imply, and ``run``. Audits measure;
the policy's checks, validated as a Great Expectations suite, decide.
"""

from __future__ import annotations

import traceback
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar, Generic, TypeVar

import numpy as np

from gate.errors import GateError
from gate.metrics import MetricSet
from gate.policy.checks import CheckSpec
from gate.policy.models import AuditConfig
from gate.results import AuditResult
from gate.stats._validate import StatsError
from gate.stats.split_balance import ShareInterval

if TYPE_CHECKING:
    from gate.audits.feature_store import FeatureStore
    from gate.data.bundle import Bundle
    from gate.progress import Progress

ConfigT = TypeVar("ConfigT", bound=AuditConfig)


@dataclass(frozen=True)
class AuditContext:
    """What every audit gets besides its configuration.

    ``rng`` is the audit's own child of the run's seed (``seed_entropy``,
    ``seed_spawn_key``); ``features`` computes disclosure classes and embeddings once per
    run for every audit that asks for the same configuration. ``p_interval``: None when
    ``p`` is the split's; for a declared split under ``membership.declared_split.p:
    interval``, the interval of p every statement must hold over, which spends
    ``p_interval.gamma`` of ``alpha``.
    """

    alpha: float
    p: float
    rng: np.random.Generator
    seed_entropy: int
    seed_spawn_key: tuple[int, ...]
    progress: Progress
    redact: bool
    max_witnesses: int
    features: FeatureStore
    p_interval: ShareInterval | None = None


class Audit(ABC, Generic[ConfigT]):
    """Base of every audit.

    Class attributes:
        name: the key of the audit in a policy's ``audits:`` block.
        config_model: the pydantic model of that block (a subclass of ``AuditConfig``).
        metrics: the metrics it reports (``MetricSet`` of ``MetricSpec``).
        citation: the paper(s) behind it (authors, year, title, section).
    """

    name: ClassVar[str]
    config_model: ClassVar[type[AuditConfig]]
    metrics: ClassVar[MetricSet]
    citation: ClassVar[str]

    def declared_metrics(self, config: ConfigT) -> MetricSet:
        """The metrics a run under ``config`` reports (by default :attr:`metrics`)."""
        return self.metrics

    @abstractmethod
    def checks(self, config: ConfigT) -> list[CheckSpec]:
        """The threshold checks ``config`` sets, each on a metric of :attr:`metrics`."""

    @abstractmethod
    def run(self, bundle: Bundle, config: ConfigT, context: AuditContext) -> AuditResult:
        """Run on a validated bundle; raise on anything that prevents a complete result."""


def checks_statement(checks: Sequence[CheckSpec], *, alpha: float) -> str | None:
    """What the audit's verdict means when it has several checks: each confidence bound
    holds at level 1 - alpha on its own, so a release without the leakage they test for
    fails one of k with probability up to k alpha (Bonferroni); point estimates carry no
    level. None for a single check."""
    if len(checks) < 2:
        return None
    bounds = [c for c in checks if not c.spec.is_point_estimate]
    points = [c.metric for c in checks if c.spec.is_point_estimate]
    parts = [f"The audit fails if any of its {len(checks)} checks fails."]
    if len(bounds) > 1:
        k = len(bounds)
        parts.append(
            f"{k} compare confidence bounds, each at level 1 - {alpha:g} on its own: a "
            f"release without the leakage they test for fails one with probability up to "
            f"{k} x {alpha:g} = {min(1.0, k * alpha):g} (Bonferroni; a policy alpha of "
            f"{alpha / k:.3g} makes it {alpha:g})."
        )
    if points:
        parts.append(
            f"{', '.join(points)} compare point estimates, which carry no confidence "
            "level: a release that leaks nothing can exceed them by chance (for an AUC, "
            "each subject's statement gives that chance)."
        )
    return " ".join(parts)


def describe_exception(
    exc: BaseException,
    *,
    show_message: bool,
    hint: str = "set evidence.redact_witnesses: false to see it",
) -> str:
    """An audit's exception as the evidence records it. The gate's own errors (and the
    statistics' argument errors) are written by the gate and name files, rows, settings
    and numbers, never a record's text: their message is kept. Any other exception comes
    from a library or a plug-in, whose message may quote the records it failed on (numpy
    quotes the string it could not convert): unless ``show_message`` (witnesses not
    redacted), it is withheld and the place it was raised is named instead."""
    if show_message or isinstance(exc, GateError | StatsError):
        return f"{type(exc).__name__}: {exc}"
    frames = traceback.extract_tb(exc.__traceback__)
    where = (
        f" raised at {Path(frames[-1].filename).name}:{frames[-1].lineno} in {frames[-1].name}"
        if frames
        else ""
    )
    return (
        f"{type(exc).__name__}{where} (its message is withheld: it may quote private "
        f"records; {hint})"
    )
