"""The gate's one code path: policy + bundle -> audits -> checks -> verdict.

:func:`run_gate` takes loaded inputs (notebooks); :func:`check_release` (``gate check``)
and :func:`audit_canaries` (``gate canary``) take files and write the evidence.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Iterator, Mapping
from contextlib import ExitStack, contextmanager, nullcontext
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from gate.api.preflight import (
    cache_warnings,
    check_before_work,
    check_remediation_block,
    fused_text_warnings,
    markup_warnings,
    only_audit,
    pii_threshold_warnings,
    precision_warnings,
    refuse_a_starting_worker,
    refuse_null_control,
    refuse_release_blind_checks,
    refuse_unchecked_training_data,
    refuse_unusable_sqlite_store,
    refuse_unused_canary_source,
    refuse_unused_tracking_uri,
    require_canary_source,
    require_source_ids,
    require_text_settings,
    require_training_data,
    split_warnings,
    training_data_warnings,
    with_declared_p_interval,
    with_engine,
)
from gate.audits.base import AuditContext, describe_exception
from gate.audits.feature_store import FeatureStore
from gate.audits.registry import audit_checks, create_audit
from gate.data.bundle import Bundle, load_bundle, refuse_source_combination
from gate.engines.base import Engine, create_engine
from gate.errors import InputError, missing_dependency_message
from gate.interrupts import raise_interruption_behind, record_verdict
from gate.policy.checks import CheckResult, CheckSpec, evaluate_check
from gate.policy.loader import LoadedPolicy, load_policy
from gate.policy.models import AuditConfig, Policy
from gate.progress import NullProgress, Progress
from gate.results import AuditOutcome, AuditResult, GateResult, Status, SuiteValidation
from gate.suites.gx_suite import is_data_docs_entry, is_data_docs_site, validate_checks

if TYPE_CHECKING:
    from gate.evidence.writer import DataDocsSite


def _overall(
    outcomes: Mapping[str, AuditOutcome], gx: SuiteValidation | None, gx_error: str | None
) -> Status:
    """Error if anything did not complete; otherwise the GX validation decides."""
    if not outcomes or gx_error is not None or any(o.status == "error" for o in outcomes.values()):
        return "error"
    if gx is None:
        return "error"
    return "pass" if gx.success else "fail"


def validate_with_gx(
    outcomes: Mapping[str, AuditOutcome], *, suite_name: str, data_docs_dir: Path | None
) -> tuple[SuiteValidation | None, str | None]:
    """Run every check of the policy as a GX suite (a check of an audit that did not
    complete is a missing value, which fails); check that GX and the gate's own evaluation
    agree on every check and every audit's completion (a disagreement is an error, never
    a pass)."""
    if not outcomes:
        return None, None
    values = {c.spec: c.value for o in outcomes.values() for c in o.checks}
    completed = {name: o.error is None for name, o in outcomes.items()}
    try:
        gx = validate_checks(
            values, completed=completed, suite_name=suite_name, data_docs_dir=data_docs_dir
        )
    except Exception as exc:
        raise_interruption_behind(exc)
        return None, f"Great Expectations validation failed: {type(exc).__name__}: {exc}"
    own = {(c.spec.audit, c.spec.metric): c.passed for o in outcomes.values() for c in o.checks}
    disagree = sorted(str(k) for k in own if gx.check_success.get(k) != own[k])
    disagree += sorted(f"{a} completed" for a in completed if gx.completed.get(a) != completed[a])
    if gx.success != (all(completed.values()) and all(own.values())):
        disagree.append("the suite's success")
    if disagree:
        return gx, f"Great Expectations and the gate disagree on {disagree}"
    return gx, None


def _run_audit(
    name: str,
    config: AuditConfig,
    bundle: Bundle,
    policy: Policy,
    store: FeatureStore,
    root_seed: int,
    child: np.random.SeedSequence,
    progress: Progress,
) -> AuditOutcome:
    """Run one audit and evaluate its checks; any error is the audit's outcome (never a
    pass), not an exception."""
    seed_info = {"entropy": root_seed, "spawn_key": list(child.spawn_key)}
    context = AuditContext(
        alpha=policy.alpha,
        p=policy.membership.p,
        rng=np.random.default_rng(child),
        seed_entropy=root_seed,
        seed_spawn_key=tuple(child.spawn_key),
        progress=progress,
        redact=policy.evidence.redact_witnesses,
        max_witnesses=policy.evidence.max_witnesses,
        features=store,
        p_interval=bundle.membership.p_interval,
    )
    t0 = time.perf_counter()
    result: AuditResult | None = None
    specs: list[CheckSpec] = []
    checks: tuple[CheckResult, ...] = ()
    error: str | None = None
    citation = ""
    try:
        audit = create_audit(name)
        citation = audit.citation
        specs = audit_checks(name, config)
        with progress.step(f"audit {name}"):
            result = audit.run(bundle, config, context)
        checks = tuple(evaluate_check(s, result.metric_values) for s in specs)
    except ImportError as exc:
        raise_interruption_behind(exc)
        error = missing_dependency_message(exc, needed_by=f"audit {name!r}")
    except Exception as exc:
        # an error a library's cleanup raised during a Ctrl-C (Spark's "job cancelled")
        # is the interruption, not the audit's outcome
        raise_interruption_behind(exc)
        error = describe_exception(exc, show_message=not policy.evidence.redact_witnesses)
    if error is not None:
        status: Status = "error"
        checks = tuple(CheckResult(spec=s, value=None, passed=False) for s in specs)
    else:
        status = "pass" if all(c.passed for c in checks) else "fail"
    return AuditOutcome(
        name=name,
        status=status,
        checks=checks,
        result=result,
        error=error,
        seed=seed_info,
        seconds=time.perf_counter() - t0,
        citation=citation,
    )


def run_gate(
    policy: Policy | LoadedPolicy,
    bundle: Bundle,
    *,
    seed: int | None = None,
    progress: Progress | None = None,
    data_docs_dir: Path | None = None,
    engine: Engine | None = None,
) -> GateResult:
    """Run every audit the policy enables on ``bundle``, validate the thresholds as a
    Great Expectations suite, and decide PASS or FAIL.

    Args:
        policy: a validated policy (or one loaded from a file, to record its fingerprint).
        bundle: a validated release bundle (:func:`gate.data.bundle.load_bundle`).
        seed: overrides ``policy.seed``; each audit gets its own child of this seed.
        progress: progress reporter; none by default.
        data_docs_dir: if given, GX builds a Data Docs site there.
        engine: where the heavy steps run (the caller's, left open); by default the policy's
            engine, started and closed here.

    Returns:
        The verdict: ``pass`` only if every audit ran to completion and the GX suite of the
        policy's thresholds succeeded.

    Raises:
        InputError: the policy's canary audit is the null control (``n_rep: 0``) and the
            run gates a release (the bundle holds one, or other audits run).
        BundleError: the bundle was loaded with other text or membership settings than
            the policy's.
    """
    refuse_a_starting_worker("run_gate")
    loaded = policy if isinstance(policy, LoadedPolicy) else None
    policy_model: Policy = policy.policy if isinstance(policy, LoadedPolicy) else policy
    root_seed = policy_model.seed if seed is None else seed
    if root_seed < 0:
        raise ValueError(f"seed must be >= 0; found {root_seed}")
    progress = progress or NullProgress()
    require_text_settings(bundle, policy_model.text)
    bundle = with_declared_p_interval(
        bundle, policy_model, where=str(loaded.path) if loaded else "the policy"
    )
    warnings = (
        split_warnings(bundle, policy_model.membership)
        + training_data_warnings(bundle.membership.training_data)
        + fused_text_warnings(bundle)
        + markup_warnings(bundle)
        + pii_threshold_warnings(policy_model)
        + precision_warnings(policy_model)
        + cache_warnings(policy_model)
    )
    started = time.perf_counter()
    started_at = datetime.now(UTC).isoformat(timespec="seconds")

    enabled = policy_model.audits.enabled()
    where = loaded.path if loaded else "the policy"
    if len(bundle.synthetic) or len(enabled) > 1:  # a release is gated: not gate canary's run
        refuse_null_control(policy_model, where=where)
    if len(bundle.synthetic):
        refuse_release_blind_checks(policy_model, where=where)
        refuse_unchecked_training_data(policy_model, bundle, where=where)
    children = np.random.SeedSequence(root_seed).spawn(len(enabled))
    outcomes: dict[str, AuditOutcome] = {}
    with nullcontext(engine) if engine is not None else create_engine(policy_model.engine) as used:
        store = FeatureStore(bundle, progress, used)
        for (name, config), child in zip(enabled.items(), children, strict=True):
            outcomes[name] = _run_audit(
                name, config, bundle, policy_model, store, root_seed, child, progress
            )
    warnings += tuple(
        w for o in outcomes.values() if o.result is not None for w in o.result.warnings
    )
    with progress.step("validating thresholds (Great Expectations)"):
        gx, gx_error = validate_with_gx(
            outcomes, suite_name=f"gate-{policy_model.name}", data_docs_dir=data_docs_dir
        )
    return GateResult(
        status=_overall(outcomes, gx, gx_error),
        gx=gx,
        evidence_error=gx_error,
        audits=outcomes,
        policy=policy_model,
        policy_path=loaded.path if loaded else None,
        policy_sha256=loaded.sha256 if loaded else None,
        bundle=bundle,
        seed=root_seed,
        started_at=started_at,
        seconds=time.perf_counter() - started,
        warnings=warnings,
    )


@contextmanager
def _data_docs_site(data_docs: str | Path | None, out: Path) -> Iterator[DataDocsSite | None]:
    """Hold the Data Docs directory for this run, checked as ``--out`` is (never inside
    ``--out``, which is replaced as a whole, nor holding it); the earlier site is removed
    and GX builds the new one in a staging directory that the evidence writer puts in
    place (or withholds) with the verdict.

    Raises:
        InputError: the directory is unusable (named by ``--data-docs``).
    """
    from gate.evidence.writer import DataDocsSite, make_staging_dir, out_dir_lock, prepare_out_dir

    if data_docs is None:
        yield None
        return
    if not str(data_docs).strip():
        raise InputError("--data-docs is empty; give a directory")
    wanted = Path(data_docs).resolve()
    if wanted == out or out in wanted.parents or wanted in out.parents:
        raise InputError(
            f"--data-docs {data_docs}: is inside --out {out} or holds it; give a directory of "
            "its own"
        )
    with out_dir_lock(
        Path(data_docs),
        is_own=is_data_docs_entry,
        is_output=is_data_docs_site,
        option="--data-docs",
    ) as docs:
        prepare_out_dir(docs)
        staging = make_staging_dir(docs)
        try:
            yield DataDocsSite(staging=staging, target=docs)
        finally:
            shutil.rmtree(staging, ignore_errors=True)


@dataclass(frozen=True)
class CheckOutcome:
    result: GateResult
    report_path: Path
    files: dict[str, Path]
    mlflow_run_id: str | None


def check_release(
    *,
    policy: str | Path,
    synthetic: str | Path,
    train: str | Path | None = None,
    holdout: str | Path | None = None,
    source: str | Path | None = None,
    manifest: str | Path | None = None,
    canary_source: str | Path | None = None,
    model: str | Path | None = None,
    training_data: str | Path | None = None,
    out_dir: str | Path = "gate-report",
    seed: int | None = None,
    progress: Progress | None = None,
    mlflow: bool = True,
    tracking_uri: str | None = None,
    mlflow_timeout: float = 30.0,
    data_docs: str | Path | None = None,
    engine: str | None = None,
    spark_master: str | None = None,
) -> CheckOutcome:
    """Files in; verdict and evidence out (what ``gate check`` runs): ``out_dir`` gets
    report.json, report.html, junit.xml, summary.md, witnesses.csv, the GX suite and
    validation result and plots; MLflow gets a run with all of them unless ``mlflow`` is
    False or the policy disables it. ``model`` names a released model directory that the
    profile audit's surprisal attack probes. ``training_data`` names the records the
    release's generator was trained on, checked to hold no holdout user
    (:mod:`gate.data.training_data`). ``engine`` and ``spark_master`` override the
    policy's ``engine.name`` and ``engine.spark_master``.

    Raises:
        InputError: the policy, the bundle or ``out_dir`` is bad (exit 2); nothing is
            written, and an earlier report in ``out_dir`` is gone (it was removed first).
        EvidenceWriteError: the evidence could not be written (exit 3).
    """
    refuse_a_starting_worker("check_release")
    return _check_files(
        policy=policy,
        synthetic=synthetic,
        train=train,
        holdout=holdout,
        source=source,
        manifest=manifest,
        canary_source=canary_source,
        model=model,
        training_data=training_data,
        out_dir=out_dir,
        seed=seed,
        progress=progress,
        mlflow=mlflow,
        tracking_uri=tracking_uri,
        mlflow_timeout=mlflow_timeout,
        data_docs=data_docs,
        only=None,
        engine=engine,
        spark_master=spark_master,
    )


def audit_canaries(
    *,
    policy: str | Path,
    train: str | Path | None = None,
    holdout: str | Path | None = None,
    source: str | Path | None = None,
    manifest: str | Path | None = None,
    canary_source: str | Path | None = None,
    out_dir: str | Path = "gate-canary",
    seed: int | None = None,
    progress: Progress | None = None,
    mlflow: bool = True,
    tracking_uri: str | None = None,
    mlflow_timeout: float = 30.0,
) -> CheckOutcome:
    """What ``gate canary`` runs: only the policy's ``audits.canary`` block, on the source
    records (no release: the audit trains the generator and samples its own), with the
    same verdict and evidence as :func:`check_release`.

    Raises:
        InputError: the policy has no enabled canary audit with a threshold, or the
            bundle, the generator settings or ``out_dir`` are bad (exit 2).
    """
    refuse_a_starting_worker("audit_canaries")
    return _check_files(
        policy=policy,
        synthetic=None,
        train=train,
        holdout=holdout,
        source=source,
        manifest=manifest,
        canary_source=canary_source,
        out_dir=out_dir,
        seed=seed,
        progress=progress,
        mlflow=mlflow,
        tracking_uri=tracking_uri,
        mlflow_timeout=mlflow_timeout,
        model=None,
        training_data=None,
        data_docs=None,
        only="canary",
        engine=None,
        spark_master=None,
    )


def _check_files(
    *,
    policy: str | Path,
    synthetic: str | Path | None,
    train: str | Path | None,
    holdout: str | Path | None,
    source: str | Path | None,
    manifest: str | Path | None,
    canary_source: str | Path | None,
    model: str | Path | None,
    training_data: str | Path | None,
    out_dir: str | Path,
    seed: int | None,
    progress: Progress | None,
    mlflow: bool,
    tracking_uri: str | None,
    mlflow_timeout: float,
    data_docs: str | Path | None,
    only: str | None,
    engine: str | None,
    spark_master: str | None,
) -> CheckOutcome:
    from gate.evidence.writer import (
        MlflowSettings,
        out_dir_lock,
        prepare_out_dir,
        require_mlflow_timeout,
        write_evidence,
    )

    progress = progress or NullProgress()
    require_mlflow_timeout(mlflow_timeout)
    with ExitStack() as held:
        out = held.enter_context(out_dir_lock(Path(out_dir)))
        prepare_out_dir(out)  # before anything can fail: no earlier verdict survives this run
        # --data-docs is checked after: refused, it had left --out's earlier PASS (a review)
        site = held.enter_context(_data_docs_site(data_docs, out))
        # a usage mistake answered before the policy's checks load Presidio (seconds)
        refuse_source_combination(train=train, holdout=holdout, source=source, manifest=manifest)
        loaded = with_engine(load_policy(policy), engine, spark_master)
        if only is not None:
            loaded = only_audit(loaded, only)
        check_before_work(loaded)
        check_remediation_block(loaded)  # gate remediate reads it after a FAIL
        if only is None:
            refuse_null_control(loaded.policy, where=loaded.path)
            refuse_release_blind_checks(loaded.policy, where=loaded.path)
            require_training_data(loaded, training_data)
        refuse_unused_canary_source(loaded, canary_source)
        refuse_unused_tracking_uri(loaded, tracking_uri, mlflow=mlflow)
        refuse_unusable_sqlite_store(loaded, tracking_uri, mlflow=mlflow)
        profile = loaded.policy.audits.profile
        if model and (profile is None or not profile.enabled):
            raise InputError(
                f"{loaded.path}: --model is audited by the profile audit (surprisal), which "
                "the policy does not enable: the model would go unaudited"
            )
        if profile is not None and profile.enabled and profile.surprisal.required and not model:
            raise InputError(
                f"{loaded.path}: audits.profile.surprisal.required: give the released "
                "model with --model DIR"
            )
        with create_engine(loaded.policy.engine) as data_engine:
            with progress.step("loading the release bundle"):
                bundle = load_bundle(
                    synthetic=synthetic,
                    membership=loaded.policy.membership,
                    text=loaded.policy.text,
                    train=train,
                    holdout=holdout,
                    source=source,
                    manifest=manifest,
                    canary_source=canary_source,
                    model=model,
                    training_data=training_data,
                    read=data_engine.read_table,  # the spark engine also reads datasets
                )
            require_canary_source(loaded, bundle.canary_source)
            require_source_ids(loaded, bundle.synthetic, synthetic)
            result = run_gate(
                loaded,
                bundle,
                seed=seed,
                progress=progress,
                data_docs_dir=None if site is None else site.staging,
                engine=data_engine,
            )
        settings = MlflowSettings(
            enabled=mlflow and loaded.policy.evidence.mlflow.enabled,
            tracking_uri=tracking_uri,
            timeout=mlflow_timeout,
        )
        with progress.step("writing evidence"):
            evidence = write_evidence(
                result, out, mlflow=settings, data_docs=site, on_placed=record_verdict
            )
    return CheckOutcome(
        result=evidence.result,
        report_path=evidence.files["report"],
        files=evidence.files,
        mlflow_run_id=evidence.mlflow_run_id,
    )
