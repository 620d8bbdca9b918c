"""MLflow evidence: one run per gate evaluation, a nested run per audit.

Default store: a local SQLite database (``sqlite:///<cwd>/mlflow.db``) with artifacts in
``<cwd>/mlruns`` (the plain file store is in maintenance mode in MLflow 3). Overridden by
``--tracking-uri``, then ``MLFLOW_TRACKING_URI``, then the policy.
"""

from __future__ import annotations

import functools
import glob
import logging
import math
import os
import tempfile
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from gate._version import __version__
from gate.atomic import current_umask
from gate.evidence.deadline import with_deadline
from gate.evidence.report import jsonable

if TYPE_CHECKING:
    from gate.results import AuditOutcome, GateResult

T = TypeVar("T")


def tracking_uri(cli_uri: str | None, policy_uri: str | None) -> str:
    """The tracking store: ``cli_uri``, else ``MLFLOW_TRACKING_URI`` (empty: unset, as
    MLflow reads it), else ``policy_uri``, else ``./mlflow.db``. A blank ``cli_uri`` is
    refused before any work (:func:`gate.api.preflight.refuse_unused_tracking_uri`), a
    blank ``policy_uri`` by the policy's model."""
    return tracking_uri_and_origin(cli_uri, policy_uri)[0]


def tracking_uri_and_origin(cli_uri: str | None, policy_uri: str | None) -> tuple[str, str]:
    """:func:`tracking_uri` and where it came from, for a message: ``"--tracking-uri"``,
    ``"MLFLOW_TRACKING_URI"``, ``"evidence.mlflow.tracking_uri"`` or ``"default"``."""
    if cli_uri:
        return cli_uri, "--tracking-uri"
    if os.environ.get("MLFLOW_TRACKING_URI"):
        return os.environ["MLFLOW_TRACKING_URI"], "MLFLOW_TRACKING_URI"
    if policy_uri:
        return policy_uri, "evidence.mlflow.tracking_uri"
    return f"sqlite:///{Path.cwd() / 'mlflow.db'}", "default"


def experiment_name(experiment: str | None, policy_name: str) -> str:
    """The policy's experiment, or ``gate/<policy name>``."""
    return experiment or f"gate/{policy_name}"


PARAM_LENGTH = 6000  # MLflow's limit on a parameter's value (MAX_PARAM_VAL_LENGTH)


def _flatten(prefix: str, value: Any, out: dict[str, str]) -> None:
    """One parameter per setting: blocks and lists of blocks (a policy's feature classes,
    its scorers) by key and index, lists of plain values joined with commas."""
    if isinstance(value, dict):
        for k, v in value.items():
            _flatten(f"{prefix}.{k}" if prefix else str(k), v, out)
    elif isinstance(value, list) and any(isinstance(v, dict | list) for v in value):
        for i, v in enumerate(value):
            _flatten(f"{prefix}.{i}", v, out)
    elif isinstance(value, list):
        out[prefix] = ",".join(str(v) for v in value)[:PARAM_LENGTH]
    else:
        out[prefix] = str(value)[:PARAM_LENGTH]


def run_params(result: GateResult) -> dict[str, str]:
    params: dict[str, str] = {
        "gate_version": __version__,
        "policy.name": result.policy.name,
        "policy.sha256": result.policy_sha256 or "",
        "alpha": str(result.policy.alpha),
        "membership.p": str(result.policy.membership.p),
        "membership.declared_split.p": result.policy.membership.declared_split.p,
        "seed": str(result.seed),
    }
    interval = result.bundle.membership.p_interval
    if interval is not None:
        params["membership.p_interval"] = (
            f"[{interval.low:.6g}, {interval.high:.6g}] gamma={interval.gamma:g}"
        )
    for name, outcome in result.audits.items():
        for i, c in enumerate(outcome.checks):
            params[f"threshold.{name}.{i}"] = f"{c.spec.metric} {c.spec.bound}"
        params[f"seed.{name}"] = ",".join(str(x) for x in outcome.seed["spawn_key"])
    effective = result.policy.model_dump(mode="json", by_alias=True)
    _flatten("policy", effective["audits"], params)
    return params


INFINITE_TAG = "gate.infinite_metrics"
UNDEFINED_TAG = "gate.undefined_metrics"


def _metric_batch(metrics: dict[str, float]) -> tuple[list[Any], list[Any]]:
    """MLflow metrics and tags for ``metrics``. An infinite value (an epsilon no finite
    bound holds) is logged, which MLflow stores as ±1.797e308, and named in the tag
    ``gate.infinite_metrics``; NaN (a statistic the data left undefined, e.g. an AUC
    without holdout users) is not logged and is named in ``gate.undefined_metrics``."""
    from mlflow.entities import Metric, RunTag

    now = int(time.time() * 1000)
    values = {k: float(v) for k, v in metrics.items()}
    tags = []
    for tag, names in (
        (INFINITE_TAG, sorted(k for k, v in values.items() if math.isinf(v))),
        (UNDEFINED_TAG, sorted(k for k, v in values.items() if math.isnan(v))),
    ):
        if names:
            tags.append(RunTag(tag, ",".join(names)[:5000]))
    logged = [Metric(k, v, now, 0) for k, v in values.items() if not math.isnan(v)]
    return logged, tags


def _quiet_mlflow() -> None:
    """MLflow's table-creation chatter stays off stderr, and the "View run" link it prints
    to stdout on ending a run stays out of the gate's output (a closed stdout would make
    ending every run fail)."""
    for noisy in ("mlflow", "alembic"):
        logger = logging.getLogger(noisy)
        logger.setLevel(max(logging.WARNING, logger.level))
    os.environ["MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT"] = "true"


class RunCancelled(Exception):
    """The gate stopped waiting for this MLflow run (deadline, error, signal)."""


class GateRunLog:
    """One gate evaluation as an MLflow run with a nested run per audit, through an
    explicit client (the process-wide tracking URI is never touched).

    Two steps, each of which the caller bounds in time: :meth:`open` creates the runs and
    logs params, metrics, tags and dataset fingerprints, and returns the run id (which
    ``report.json`` records); :meth:`finish` logs the evidence files and only then the
    verdict tags, unless ``cancelled`` was set meanwhile. :meth:`abandon` ends a run the
    gate gave up on, tagged ``gate.status=error``.
    """

    def __init__(self, uri: str) -> None:
        import mlflow  # noqa: F401  (an ImportError here names the missing extra)

        _quiet_mlflow()
        self.uri = uri
        self.client: Any = None
        self.run_id: str | None = None
        # held by open() and finish(), which run in a thread the gate may stop waiting
        # for: abandon() waits for it, so a request still in flight lands before the
        # verdict is withdrawn, not after
        self._working = threading.Lock()

    def open(
        self,
        result: GateResult,
        *,
        experiment: str | None,
        cancelled: threading.Event,
        parent_run_id: str | None = None,
    ) -> str:
        """Create the run and its audits' runs and log what they hold, stopping between
        requests once ``cancelled`` is set."""
        with self._working:
            return self._open(
                result, experiment=experiment, cancelled=cancelled, parent_run_id=parent_run_id
            )

    def _open(
        self,
        result: GateResult,
        *,
        experiment: str | None,
        cancelled: threading.Event,
        parent_run_id: str | None,
    ) -> str:
        import mlflow

        name = experiment_name(experiment, result.policy.name)
        with _store_lock(self.uri):  # creating the client creates (migrates) the store
            self.client = mlflow.MlflowClient(tracking_uri=self.uri)
            experiment_id = _experiment_id(self.client, name, self.uri)
        tags = {
            "gate.status": "logging",
            "gate.membership.how": result.bundle.membership.how,
            "gate.redacted": str(result.policy.evidence.redact_witnesses).lower(),
        }
        if parent_run_id is not None:
            tags["mlflow.parentRunId"] = parent_run_id
        for input_name, fp in result.bundle.fingerprints.items():
            tags[f"gate.input.{input_name}.sha256"] = fp.sha256
            tags[f"gate.input.{input_name}.records"] = str(fp.records)
        run = self.client.create_run(
            experiment_id, run_name=f"gate-{result.policy.name}", tags=tags
        )
        self.run_id = run_id = run.info.run_id
        metrics: dict[str, float] = {}
        for audit, outcome in result.audits.items():
            if outcome.result is not None:
                metrics.update({f"{audit}.{k}": v for k, v in outcome.result.metric_values.items()})
        _stop_if(cancelled)
        self._log(run_id, metrics, run_params(result))
        _stop_if(cancelled)
        self.client.log_inputs(run_id, datasets=_dataset_inputs(result))
        for audit, outcome in result.audits.items():
            _stop_if(cancelled)
            child = self.client.create_run(
                experiment_id,
                run_name=audit,
                tags={
                    "mlflow.parentRunId": run_id,
                    "gate.audit": audit,
                    "gate.status": outcome.status,
                    **({"gate.error": outcome.error[:5000]} if outcome.error else {}),
                },
            ).info.run_id
            try:
                self._log_audit(child, outcome)
            except BaseException:  # the audit's run ends with the gate's, never RUNNING
                with suppress(Exception):
                    self.client.set_terminated(child, "FAILED")
                raise
            self.client.set_terminated(child)
        return run_id

    def _log_audit(self, child: str, outcome: AuditOutcome) -> None:
        checks = {
            f"check.{i}": f"{c.spec.metric} {c.spec.bound}" for i, c in enumerate(outcome.checks)
        }
        values = {} if outcome.result is None else outcome.result.metric_values
        self._log(child, values, checks)
        if outcome.result is not None:
            self.client.log_dict(
                child,
                {m.name: m.spec.as_dict() for m in outcome.result.metrics},
                "metric_specs.json",
            )
            if outcome.result.details:  # e.g. the canary set, seeds, insertion-map hash
                self.client.log_dict(child, jsonable(outcome.result.details), "details.json")

    def _log(self, run_id: str, metrics: dict[str, float], params: dict[str, str]) -> None:
        _log_batches(self.client, run_id, metrics, params)

    def finish(
        self,
        result: GateResult,
        files: dict[str, Path],
        plots: list[Path],
        cancelled: threading.Event,
    ) -> None:
        """Every evidence file (report.json last), then the verdict tags (one request),
        then FINISHED."""
        from mlflow.entities import RunTag

        with self._working:
            run_id = self._require_run()
            uploads: list[tuple[Path, str | None]] = [
                (p, None) for key, p in files.items() if key != "report"
            ]
            uploads += [(p, "plots") for p in plots] + [(files["report"], None)]
            for path, folder in uploads:
                _stop_if(cancelled)
                self.client.log_artifact(run_id, str(path), artifact_path=folder)
            _stop_if(cancelled)
            verdict = [
                RunTag("gate.passed", str(result.passed).lower()),
                RunTag("gate.status", result.status),
            ]
            self.client.log_batch(run_id, tags=verdict)
            _stop_if(cancelled)
            self.client.set_terminated(run_id, "FINISHED")

    def abandon(
        self, status: str, replacements: dict[str, Path] | None = None, *, wait: float
    ) -> None:
        """Withdraw the run the gate gave up on (:func:`withdraw_run`), after waiting up to
        ``wait`` seconds for a request of :meth:`open` or :meth:`finish` still in flight;
        ``replacements``: the error run's own files."""
        withdraw_run(
            self.client,
            self._require_run(),
            status=status,
            replacements=list((replacements or {}).values()),
            working=self._working,
            wait=wait,
        )

    def _require_run(self) -> str:
        if self.run_id is None:
            raise RunCancelled("the MLflow run was never created")
        return self.run_id


def withdraw_run(
    client: Any,
    run_id: str,
    *,
    status: str,
    replacements: list[Path],
    working: threading.Lock,
    wait: float,
) -> None:
    """Withdraw a run the gate gave up on: wait up to ``wait`` seconds for the request
    that holds ``working`` (one still in flight), tag the run ``gate.passed=false``,
    ``gate.status=error`` (first: the withdrawal's time is bounded, and a slow store must
    not leave a verdict standing while files upload), end it ``status`` (``FAILED`` or
    ``KILLED``), then upload ``replacements`` (the error's own files) over the files of
    the same name uploaded before the failure (which may say PASS). When the request in
    flight outlasts the wait, the tags and the end state are written again once it ends,
    within another ``wait`` (a review saw its PASS written over the withdrawal), or, in a
    process that lives on (the API, a remediation), whenever it ends: MLflow's client
    retries a request for minutes. Each step is tried whatever the one before did; the
    first failure is raised at the end."""
    from mlflow.entities import RunTag

    withdrawn = [RunTag("gate.passed", "false"), RunTag("gate.status", "error")]
    verdict: list[Callable[[], object]] = [
        lambda: client.log_batch(run_id, tags=withdrawn),
        lambda: client.set_terminated(run_id, status),
    ]
    uploads: list[Callable[[], object]] = [
        functools.partial(client.log_artifact, run_id, str(path)) for path in replacements
    ]
    settled = working.acquire(timeout=wait)
    failures: list[Exception] = []

    def run(steps: list[Callable[[], object]]) -> None:
        for step in steps:
            try:
                step()
            except Exception as exc:
                failures.append(exc)

    try:
        run(verdict + uploads)
        if not settled:
            settled = working.acquire(timeout=wait)
            if settled:
                run(verdict)
            else:
                threading.Thread(
                    target=_withdraw_once_settled,
                    args=(working, verdict),
                    name="gate-mlflow-withdrawal",
                    daemon=True,
                ).start()
    finally:
        if settled:
            working.release()
    if failures:
        raise failures[0]


def _withdraw_once_settled(working: threading.Lock, verdict: list[Callable[[], object]]) -> None:
    """Write the withdrawal again once the request in flight that holds ``working`` ends.
    Nobody waits for this thread: the gate reported its error already, and a store that
    refuses this write leaves the run as the request left it (the status stays ended)."""
    with working:
        for step in verdict:
            with suppress(Exception):
                step()


def _stop_if(cancelled: threading.Event) -> None:
    if cancelled.is_set():
        raise RunCancelled("the gate stopped waiting for MLflow")


def _log_batches(
    client: Any, run_id: str, metrics: dict[str, float], params: dict[str, str]
) -> None:
    """``metrics`` and ``params`` in batches of MLflow's limits (100 of each per call)."""
    from mlflow.entities import Param

    entities, tags = _metric_batch(metrics)
    pairs = [Param(k, str(v)[:PARAM_LENGTH]) for k, v in params.items()]
    for i in range(0, max(len(entities), len(pairs), len(tags)), 100):
        client.log_batch(
            run_id,
            metrics=entities[i : i + 100],
            params=pairs[i : i + 100],
            tags=tags if i == 0 else [],
        )


def _experiment_id(client: Any, name: str, uri: str) -> str:
    """The experiment called ``name``, created if missing (another gate process may create
    it at the same moment: then use theirs). A SQLite store's artifacts go to ``mlruns/``
    beside its database file."""
    from mlflow.exceptions import MlflowException

    found = client.get_experiment_by_name(name)
    if found is not None:
        return str(found.experiment_id)
    location = None
    if uri.startswith("sqlite:"):  # beside the database: a review found them in the cwd
        database = sqlite_path(uri)
        folder = Path.cwd() if database is None else database.parent
        location = (folder / "mlruns" / name.replace("/", "_")).resolve().as_uri()
    try:
        return str(client.create_experiment(name, artifact_location=location))
    except MlflowException:
        found = client.get_experiment_by_name(name)
        if found is None:
            raise
        return str(found.experiment_id)


def sqlite_path(uri: str) -> Path | None:
    """The database file of a ``sqlite:///`` URI, without its query (``?mode=ro``: a
    review saw a file of that name locked and created); None for other stores."""
    prefix = "sqlite:///"
    return Path(uri[len(prefix) :].split("?", 1)[0]) if uri.startswith(prefix) else None


@contextmanager
def _store_lock(uri: str) -> Iterator[None]:
    """Serialise the creation of a SQLite store (its schema migrations) and of experiments
    between gate processes sharing it; other stores are servers that do their own. A
    missing SQLite store is created here, whole (:func:`_create_sqlite_store`)."""
    path = sqlite_path(uri)
    if path is None:
        yield
        return
    import fcntl

    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_name(path.name + ".lock"), "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            if not path.exists():
                _create_sqlite_store(path)
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _create_sqlite_store(path: Path) -> None:
    """Create a SQLite store and run MLflow's schema migrations (a few seconds) under a
    temporary name beside ``path``, then link it into place: a run killed meanwhile
    leaves no half-migrated store at ``path`` (the next creation removes what it left),
    and a store another program (``mlflow ui``, a user's script) created meanwhile is
    kept, not renamed over (its runs would be lost). Call it holding the store's lock."""
    import mlflow

    for stale in path.parent.glob(f".{glob.escape(path.name)}.*.tmp"):
        stale.unlink(missing_ok=True)
    handle, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(handle)
    temporary = Path(name)
    try:
        os.chmod(temporary, 0o666 & ~current_umask())  # as SQLite would create it
        mlflow.MlflowClient(tracking_uri=f"sqlite:///{temporary}")  # creates and migrates
        target = path.resolve()  # a dangling symbolic link: its target
        try:
            os.link(temporary, target)
        except FileExistsError:
            return  # created meanwhile by another program: that store is the one used
        except OSError:  # a file system without hard links
            if not target.exists():
                os.replace(temporary, target)
    finally:
        temporary.unlink(missing_ok=True)


def _dataset_inputs(result: GateResult) -> list[Any]:
    """Dataset inputs by fingerprint only (a name, a digest and the source path), or with
    their content when the policy allows it (``evidence.mlflow.log_dataset_content``,
    which requires redaction off)."""
    from mlflow.data.dataset_source_registry import resolve_dataset_source
    from mlflow.data.meta_dataset import MetaDataset
    from mlflow.data.pandas_dataset import from_pandas
    from mlflow.entities import DatasetInput, InputTag
    from mlflow.utils.mlflow_tags import MLFLOW_DATASET_CONTEXT

    inputs = []
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
        inputs.append(
            DatasetInput(
                dataset=dataset._to_mlflow_entity(),
                tags=[InputTag(key=MLFLOW_DATASET_CONTEXT, value=name)],
            )
        )
    return inputs


def _content(result: GateResult, name: str) -> Any:
    bundle = result.bundle
    if name == "synthetic":
        return bundle.synthetic
    if name == "canary_source":
        return bundle.canary_source
    if name in ("train", "holdout"):
        return bundle.source[bundle.source["split"] == name].drop(columns=["line"])
    if name == "source":
        return bundle.source.drop(columns=["line"])
    return None  # the generator's training data: checked, not held


class NestedRunLog:
    """Runs that hold other runs (a remediation, its rounds), through an explicit client
    in the experiment the gate runs use. Every call is bounded by ``timeout`` seconds and
    raises on failure: the caller treats a failure to log as an error (exit 3), never a
    pass."""

    def __init__(self, uri: str, *, experiment: str, timeout: float) -> None:
        import mlflow

        _quiet_mlflow()
        self.uri = uri
        self.timeout = timeout
        # set when a request outlives its deadline: that request, still running, and every
        # later one write nothing more but a withdrawal (a review: a verdict request that
        # timed out wrote PASS over the KILLED run its failure had ended)
        self._cancelled = threading.Event()
        self._working = threading.Lock()  # held by the request in flight

        def connect() -> tuple[Any, str]:
            with _store_lock(uri):
                client = mlflow.MlflowClient(tracking_uri=uri)
                return client, _experiment_id(client, experiment, uri)

        self.client, self.experiment_id = self._bounded(connect)

    def _bounded(self, work: Callable[[], T]) -> T:
        _stop_if(self._cancelled)  # no new thread queued behind a request that hung

        def one_at_a_time() -> T:
            with self._working:
                _stop_if(self._cancelled)
                return work()

        return with_deadline(time.monotonic() + self.timeout, self._cancelled, one_at_a_time)

    def start(
        self,
        name: str,
        *,
        parent_run_id: str | None = None,
        params: dict[str, str] | None = None,
        tags: dict[str, str] | None = None,
    ) -> str:
        all_tags = dict(tags or {})
        if parent_run_id is not None:
            all_tags["mlflow.parentRunId"] = parent_run_id
        run = self._bounded(
            lambda: self.client.create_run(self.experiment_id, run_name=name, tags=all_tags)
        )
        run_id = str(run.info.run_id)
        if params:
            self.log(run_id, params=params)
        return run_id

    def log(
        self,
        run_id: str,
        *,
        metrics: dict[str, float] | None = None,
        params: dict[str, str] | None = None,
    ) -> None:
        self._bounded(lambda: _log_batches(self.client, run_id, metrics or {}, params or {}))

    def artifacts(self, run_id: str, paths: list[Path], *, folder: str | None = None) -> None:
        def upload() -> None:
            for path in paths:
                _stop_if(self._cancelled)
                self.client.log_artifact(run_id, str(path), artifact_path=folder)

        self._bounded(upload)

    def end(self, run_id: str, *, status: str, tags: dict[str, str]) -> None:
        """Tags (the verdict, one request) first, then the run's end state."""
        from mlflow.entities import RunTag

        def finish() -> None:
            self.client.log_batch(run_id, tags=[RunTag(k, v) for k, v in tags.items()])
            _stop_if(self._cancelled)
            self.client.set_terminated(run_id, status)

        self._bounded(finish)

    def withdraw(self, run_id: str, *, status: str, replacements: list[Path] | None = None) -> None:
        """End a run the remediation gave up on (:func:`withdraw_run`, a review: an
        uploaded ``remediation.json`` still said pass), after a timeout too, unlike every
        other request; within three more timeouts."""
        with_deadline(
            time.monotonic() + 3 * self.timeout,
            threading.Event(),
            lambda: withdraw_run(
                self.client,
                run_id,
                status=status,
                replacements=replacements or [],
                working=self._working,
                wait=self.timeout,
            ),
        )
