"""MLflow evidence: one run per gate evaluation, a nested run per audit.

Default store: a local SQLite database (``sqlite:///<cwd>/mlflow.db``) with artifacts in
``<cwd>/mlruns`` (the plain file store is in maintenance mode in MLflow 3). Overridden by
``--tracking-uri``, then ``MLFLOW_TRACKING_URI``, then the policy.
"""

from __future__ import annotations

import logging
import math
import os
import warnings
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gate._version import __version__

if TYPE_CHECKING:
    from gate.results import GateResult


def tracking_uri(cli_uri: str | None, policy_uri: str | None) -> str:
    if cli_uri:
        return cli_uri
    if os.environ.get("MLFLOW_TRACKING_URI"):
        return os.environ["MLFLOW_TRACKING_URI"]
    if policy_uri:
        return policy_uri
    return f"sqlite:///{Path.cwd() / 'mlflow.db'}"


def _flatten(prefix: str, value: Any, out: dict[str, str]) -> None:
    if isinstance(value, dict):
        for k, v in value.items():
            _flatten(f"{prefix}.{k}" if prefix else str(k), v, out)
    elif isinstance(value, list):
        out[prefix] = ",".join(str(v) for v in value)[:500]
    else:
        out[prefix] = str(value)[:500]


def run_params(result: GateResult) -> dict[str, str]:
    params: dict[str, str] = {
        "gate_version": __version__,
        "policy.name": result.policy.name,
        "policy.sha256": result.policy_sha256 or "",
        "alpha": str(result.policy.alpha),
        "membership.p": str(result.policy.membership.p),
        "seed": str(result.seed),
    }
    for name, outcome in result.audits.items():
        for i, c in enumerate(outcome.checks):
            params[f"threshold.{name}.{i}"] = f"{c.spec.metric} {c.spec.op} {c.spec.threshold:g}"
        params[f"seed.{name}"] = ",".join(str(x) for x in outcome.seed["spawn_key"])
    effective = result.policy.model_dump(mode="json", by_alias=True)
    _flatten("policy", effective["audits"], params)
    return params


def _finite(metrics: dict[str, float]) -> dict[str, float]:
    return {k: float(v) for k, v in metrics.items() if math.isfinite(float(v))}


@contextmanager
def gate_run(result: GateResult, *, uri: str, experiment: str | None) -> Iterator[Any]:
    """Open the gate's MLflow run (yields the run); the caller logs artifacts into it."""
    for noisy in ("mlflow", "alembic"):  # table-creation chatter on stderr
        logger = logging.getLogger(noisy)
        logger.setLevel(max(logging.WARNING, logger.level))
    with _tracking_uri_set(uri), _open_run(result, uri=uri, experiment=experiment) as run:
        try:
            yield run
        except BaseException:
            _tag_as_error(run.info.run_id)
            raise


def _tag_as_error(run_id: str) -> None:
    """Best effort on a run whose logging already failed: say so in its status tag. If the
    store cannot take even this, the original failure (re-raised by the caller) is what
    counts, and MLflow ends the run FAILED or KILLED."""
    import mlflow
    from mlflow.exceptions import MlflowException

    with suppress(MlflowException, OSError):
        mlflow.MlflowClient().set_tag(run_id, "gate.status", "error")


@contextmanager
def _tracking_uri_set(uri: str) -> Iterator[None]:
    """Point MLflow at ``uri`` for this run only. ``mlflow.set_tracking_uri`` also sets
    ``MLFLOW_TRACKING_URI`` for the whole process, which would send the next gate run of
    the same process (a notebook, a test) to this store; restore both afterwards."""
    import mlflow
    from mlflow.tracking._tracking_service import utils as tracking_utils

    previous_global = getattr(tracking_utils, "_tracking_uri", None)
    previous_env = os.environ.get("MLFLOW_TRACKING_URI")
    mlflow.set_tracking_uri(uri)
    try:
        yield
    finally:
        mlflow.set_tracking_uri(previous_global)  # type: ignore[arg-type]  # None unsets
        if previous_env is None:
            os.environ.pop("MLFLOW_TRACKING_URI", None)
        else:
            os.environ["MLFLOW_TRACKING_URI"] = previous_env


@contextmanager
def _open_run(result: GateResult, *, uri: str, experiment: str | None) -> Iterator[Any]:
    import mlflow

    name = experiment or f"gate/{result.policy.name}"
    with _store_lock(uri):
        experiment_id = _experiment_id(mlflow.MlflowClient(tracking_uri=uri), name, uri)
    with mlflow.start_run(
        experiment_id=experiment_id, run_name=f"gate-{result.policy.name}"
    ) as run:
        mlflow.log_params(run_params(result))
        metrics: dict[str, float] = {}
        for audit, outcome in result.audits.items():
            if outcome.result is not None:
                metrics.update({f"{audit}.{k}": v for k, v in outcome.result.metric_values.items()})
        mlflow.log_metrics(_finite(metrics))
        tags = {
            "gate.status": "logging",
            "gate.membership.how": result.bundle.membership.how,
            "gate.redacted": str(result.policy.evidence.redact_witnesses).lower(),
        }
        for name, fp in result.bundle.fingerprints.items():
            tags[f"gate.input.{name}.sha256"] = fp.sha256
            tags[f"gate.input.{name}.records"] = str(fp.records)
        mlflow.set_tags(tags)
        _log_inputs(result)
        for audit, outcome in result.audits.items():
            with mlflow.start_run(run_name=audit, nested=True, experiment_id=experiment_id):
                mlflow.set_tags({"gate.audit": audit, "gate.status": outcome.status})
                if outcome.error:
                    mlflow.set_tag("gate.error", outcome.error[:5000])
                if outcome.result is not None:
                    mlflow.log_metrics(_finite(outcome.result.metric_values))
                    mlflow.log_dict(
                        {m.name: m.spec.as_dict() for m in outcome.result.metrics},
                        "metric_specs.json",
                    )
                mlflow.log_params(
                    {
                        f"check.{i}": f"{c.spec.metric} {c.spec.op} {c.spec.threshold:g}"
                        for i, c in enumerate(outcome.checks)
                    }
                )
        yield run


def set_verdict_tags(result: GateResult) -> None:
    """The verdict tags, set last (after every artifact), so that a run whose logging
    failed never shows a verdict it did not record."""
    import mlflow

    mlflow.set_tags({"gate.passed": str(result.passed).lower(), "gate.status": result.status})


def _experiment_id(client: Any, name: str, uri: str) -> str:
    """The experiment called ``name``, created if missing (another gate process may create
    it at the same moment: then use theirs)."""
    from mlflow.exceptions import MlflowException

    found = client.get_experiment_by_name(name)
    if found is not None:
        return str(found.experiment_id)
    location = None
    if uri.startswith("sqlite:"):
        location = (Path.cwd() / "mlruns" / name.replace("/", "_")).resolve().as_uri()
    try:
        return str(client.create_experiment(name, artifact_location=location))
    except MlflowException:
        found = client.get_experiment_by_name(name)
        if found is None:
            raise
        return str(found.experiment_id)


def sqlite_path(uri: str) -> Path | None:
    """The database file of a ``sqlite:///`` URI (None for other stores)."""
    prefix = "sqlite:///"
    return Path(uri[len(prefix) :]) if uri.startswith(prefix) else None


@contextmanager
def _store_lock(uri: str) -> Iterator[None]:
    """Serialise the creation of a SQLite store (its schema migrations) and of experiments
    between gate processes sharing it; other stores are servers that do their own."""
    path = sqlite_path(uri)
    if path is None:
        yield
        return
    import fcntl

    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_name(path.name + ".lock"), "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _log_inputs(result: GateResult) -> None:
    """Dataset inputs by fingerprint only (a name, a digest and the source path), or with
    their content when the policy allows it (``evidence.mlflow.log_dataset_content``,
    which requires redaction off)."""
    import mlflow
    from mlflow.data.dataset_source_registry import resolve_dataset_source
    from mlflow.data.meta_dataset import MetaDataset
    from mlflow.data.pandas_dataset import from_pandas

    for name, fp in result.bundle.fingerprints.items():
        with warnings.catch_warnings():  # "can be interpreted in multiple ways": both local
            warnings.simplefilter("ignore", UserWarning)
            source = resolve_dataset_source(Path(fp.path).resolve().as_uri())
        label = f"{name}:{Path(fp.path).name}"
        frame = (
            _content(result, name) if result.policy.evidence.mlflow.log_dataset_content else None
        )
        dataset: Any
        if frame is None:
            dataset = MetaDataset(  # type: ignore[abstract]
                source=source, name=label, digest=fp.sha256[:16]
            )
        else:
            dataset = from_pandas(frame, source=source, name=label)
        mlflow.log_input(dataset, context=name)


def _content(result: GateResult, name: str) -> Any:
    bundle = result.bundle
    if name == "synthetic":
        return bundle.synthetic
    if name in ("train", "holdout"):
        return bundle.source[bundle.source["split"] == name].drop(columns=["line"])
    return bundle.source.drop(columns=["line"])
