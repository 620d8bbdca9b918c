"""``report.json`` (schema_version 1; README, "Reading a report")."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from gate._version import __version__
from gate.environment import environment

if TYPE_CHECKING:
    from gate.results import AuditOutcome, GateResult

REPORT_SCHEMA_VERSION = 1
REPORT_NAME = "report.json"


def _number(value: float) -> float | str | None:
    """JSON has no NaN/inf: write them as strings so the report stays strict JSON."""
    if value is None:
        return None
    value = float(value)
    if math.isnan(value):
        return "nan"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    return value


def _audit_dict(outcome: AuditOutcome) -> dict[str, Any]:
    result = outcome.result
    metrics = () if result is None else result.metrics
    return {
        "passed": outcome.passed,
        "status": outcome.status,
        "error": outcome.error,
        "citation": outcome.citation,
        "metrics": {m.name: _number(m.value) for m in metrics},
        "metric_specs": {m.name: {"subject": m.subject, **m.spec.as_dict()} for m in metrics},
        "checks": [check.as_dict() for check in outcome.checks],
        "statements": {} if result is None else dict(result.statements),
        "witnesses": [] if result is None else [w.as_dict() for w in result.witnesses],
        "curves": [] if result is None else [jsonable(c.as_dict()) for c in result.curves],
        "details": {} if result is None else jsonable(result.details),
        "seed": outcome.seed,
        "seconds": round(outcome.seconds, 3),
    }


def jsonable(value: Any) -> Any:
    """An audit's details as JSON values: numpy scalars and arrays become Python numbers
    and lists, non-finite floats strings (report.json and MLflow both use it)."""
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    if isinstance(value, float):
        return _number(value)
    if hasattr(value, "item") and callable(value.item):  # numpy scalars
        return jsonable(value.item())
    if hasattr(value, "tolist") and callable(value.tolist):  # numpy arrays
        return jsonable(value.tolist())
    return value


def report_dict(result: GateResult) -> dict[str, Any]:
    from gate.policy.models import PiiFeatures

    policy = result.policy
    pipelines = sorted(
        {pii.spacy_model for pii in policy.settings_of(PiiFeatures) if pii.engine == "spacy"}
    )
    return {
        "schema_version": REPORT_SCHEMA_VERSION,
        "gate_version": __version__,
        "environment": environment(extra=pipelines),
        "passed": result.passed,
        "status": result.status,
        "exit_code": result.exit_code,
        "started_at": result.started_at,
        "seconds": round(result.seconds, 3),
        "policy": {
            "name": policy.name,
            "path": result.policy_path,
            "sha256": result.policy_sha256,
            "alpha": policy.alpha,
            "effective": policy.model_dump(mode="json", by_alias=True),
        },
        "inputs": {name: fp.as_dict() for name, fp in result.bundle.fingerprints.items()},
        "membership": result.bundle.membership.as_dict(),
        "seeds": {"root": result.seed, "audits": {n: o.seed for n, o in result.audits.items()}},
        "warnings": list(result.warnings),
        "evidence_error": result.evidence_error,
        "audits": {name: _audit_dict(outcome) for name, outcome in result.audits.items()},
        "evidence": {"mlflow_run_id": None, "gx_validation": None},
    }
