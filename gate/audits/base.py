"""The audit interface: what an audit receives and what it returns."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

if TYPE_CHECKING:
    from gate.data.bundle import Bundle
    from gate.progress import Progress


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

    def as_dict(self) -> dict[str, Any]:
        return {
            "class": self.feature_class,
            "feature": self.feature,
            "feature_hash": self.feature_hash,
            "source_record_id": self.source_record_id,
            "user_id": self.user_id,
            "split": self.split,
            "synthetic_record_id": self.synthetic_record_id,
            "score": self.score,
        }


@dataclass(frozen=True)
class AuditContext:
    """What every audit gets besides its configuration."""

    alpha: float
    p: float
    rng: np.random.Generator
    seed_entropy: int
    seed_spawn_key: tuple[int, ...]
    progress: Progress
    redact: bool
    max_witnesses: int
    cache: dict[Any, Any] = field(default_factory=dict)  # shared by the audits of one run


@dataclass(frozen=True)
class AuditResult:
    """Metrics (flat names, floats), witnesses, and per-audit details for the report."""

    metrics: Mapping[str, float]
    witnesses: tuple[Witness, ...] = ()
    details: Mapping[str, Any] = field(default_factory=dict)


class Audit(ABC):
    """An audit computes metrics; the policy's checks decide. Audits never decide."""

    name: ClassVar[str]
    citation: ClassVar[str]

    @abstractmethod
    def run(self, bundle: Bundle, config: Any, context: AuditContext) -> AuditResult:
        """Run on a validated bundle; raise on anything that prevents a complete result."""
