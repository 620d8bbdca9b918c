"""The rounds of a remediation run: round 0 is the generator as given (non-private), then
one round per target of the policy's schedule, tried in order until the gate passes."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from gate.policy.models import Remediation

RoundMethod = Literal["none", "dpsgd", "rip"]


@dataclass(frozen=True)
class RoundPlan:
    """One planned round: ``target`` is the DP-SGD ε or the RIP η (None for round 0)."""

    index: int
    method: RoundMethod
    target: float | None

    def __post_init__(self) -> None:
        if (self.target is None) != (self.method == "none"):
            raise ValueError(
                f"round {self.index}: a {self.method} round takes "
                f"{'no target' if self.method == 'none' else 'a target'}; found {self.target!r}"
            )

    @property
    def private_target(self) -> float:
        """The ε or η of a private round."""
        if self.target is None:
            raise ValueError(f"round {self.index} is not private: it has no target")
        return self.target

    @property
    def label(self) -> str:
        if self.method == "dpsgd":
            return f"dpsgd ε={self.target:g}"
        if self.method == "rip":
            return f"rip η={self.target:g}"
        return "as given (non-private)"


def plan_rounds(remediation: Remediation, *, method: Literal["dpsgd", "rip"]) -> list[RoundPlan]:
    """Round 0 (non-private) followed by the schedule of ``method``, in policy order."""
    targets = remediation.dpsgd.epsilons if method == "dpsgd" else remediation.rip.etas
    return [RoundPlan(0, "none", None)] + [
        RoundPlan(i, method, float(t)) for i, t in enumerate(targets, start=1)
    ]


def default_delta(*, delta: float | None, train_users: int) -> float:
    """The DP-SGD δ: the policy's, or 1/(number of train users) (the papers' δ ≈ 1/n)."""
    if train_users < 1:
        raise ValueError(f"train_users must be >= 1; found {train_users}")
    return delta if delta is not None else 1.0 / train_users
