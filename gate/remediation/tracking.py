"""MLflow evidence of a remediation run: a parent run, one nested run per round (params,
privacy and utility metrics), and inside each round the gate's own run."""

from __future__ import annotations

import math
from contextlib import suppress
from typing import Any

from gate.evidence.writer import EvidenceWriteError
from gate.remediation.loop import RoundRecord, RoundTracker
from gate.remediation.schedule import RoundPlan


def round_metrics(record: RoundRecord) -> dict[str, float]:
    """The round's numbers as MLflow metrics (finite values only)."""
    metrics: dict[str, float] = {}
    if record.privacy is not None:
        for key in ("epsilon", "delta", "noise_multiplier", "sample_rate"):
            metrics[f"dpsgd.{key}"] = float(record.privacy[key])
    if record.rip is not None:
        for key in ("eta", "radius_scale", "radius", "perturbation_norm", "sigma"):
            if key in record.rip:  # the drawn radius and norm only with seeded noise
                metrics[f"rip.{key}"] = float(record.rip[key])
    for group, values in record.gate.items():
        for name, value in values.items():
            metrics[f"gate.{name}.{group}"] = float(value)
    utility = record.utility.as_dict()
    for key in ("holdout_perplexity", "distinct_2", "frechet_embedding_distance"):
        if utility[key] is not None:
            metrics[f"utility.{key}"] = float(utility[key])
    for key, value in record.seconds.items():
        metrics[f"seconds.{key}"] = value
    return {k: v for k, v in metrics.items() if math.isfinite(v)}


def _logging_failed(uri: str, index: int, exc: Exception) -> EvidenceWriteError:
    return EvidenceWriteError(
        f"MLflow logging of round {index} to {uri} failed: {type(exc).__name__}: {exc}"
    )


class MlflowRoundTracker(RoundTracker):
    """Rounds as runs nested under ``parent_run_id`` in ``log``'s experiment."""

    def __init__(self, log: Any, parent_run_id: str) -> None:
        self.log = log
        self.parent_run_id = parent_run_id

    def start_round(self, plan: RoundPlan, params: dict[str, str]) -> str | None:
        try:
            return str(
                self.log.start(
                    f"round-{plan.index} {plan.label}",
                    parent_run_id=self.parent_run_id,
                    params=params,
                    tags={"gate.round": str(plan.index), "gate.status": "running"},
                )
            )
        except Exception as exc:
            raise _logging_failed(self.log.uri, plan.index, exc) from exc

    def finish_round(self, run_id: str | None, record: RoundRecord) -> None:
        if run_id is None:
            return
        try:
            self.log.log(run_id, metrics=round_metrics(record))
            self.log.end(
                run_id,
                status="FINISHED",
                tags={
                    "gate.status": record.status,
                    "gate.passed": str(record.status == "pass").lower(),
                },
            )
        except Exception as exc:
            raise _logging_failed(self.log.uri, record.plan.index, exc) from exc

    def abandon_round(self, run_id: str | None) -> None:
        if run_id is None:
            return
        with suppress(Exception):  # the round's own error is what the user must see
            self.log.withdraw(run_id, status="KILLED")
