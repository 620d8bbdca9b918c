"""The gate's one code path: policy + bundle -> audits -> checks -> verdict.

The CLI and notebooks both call :func:`run_gate` (already loaded inputs) or
:func:`check_release` (files in, ``report.json`` out).
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from pydantic import BaseModel, ValidationError

from gate.audits.base import AuditContext, describe_exception
from gate.audits.feature_store import FeatureStore
from gate.audits.registry import audit_checks, create_audit
from gate.data.bundle import Bundle, load_bundle, load_source
from gate.engines.base import Engine, create_engine, uses_feature_caches
from gate.errors import BundleError, InputError, missing_dependency_message
from gate.features.embeddings import native_bfloat16
from gate.plugins import ENGINES
from gate.policy.checks import CheckResult, CheckSpec, evaluate_check
from gate.policy.loader import LoadedPolicy, load_policy
from gate.policy.models import (
    AuditConfig,
    EngineSettings,
    MembershipPolicy,
    PiiFeatures,
    Policy,
    SemanticFeatures,
)
from gate.progress import NullProgress, Progress
from gate.results import AuditOutcome, AuditResult, GateResult, Status, SuiteValidation
from gate.suites.gx_suite import is_data_docs_entry, is_data_docs_site, validate_checks

if TYPE_CHECKING:
    import pandas as pd

    from gate.evidence.writer import DataDocsSite
    from gate.remediation.report import RemediationResult

__all__ = [
    "CheckOutcome",
    "GateResult",
    "PolicyValidation",
    "audit_canaries",
    "cache_warnings",
    "check_release",
    "precision_warnings",
    "remediate_release",
    "run_gate",
    "split_warnings",
    "validate_policy",
]


def split_warnings(bundle: Bundle, membership: MembershipPolicy) -> tuple[str, ...]:
    """Decide what a split far from the declared ``p`` means under the policy's
    ``membership.split_check.action``: an input error (``fail``) or a warning (``warn``).

    Raises:
        BundleError: the split is inconsistent with ``p`` and the action is ``fail``.
    """
    if bundle.membership.p != membership.p or (
        bundle.membership.balance_alpha != membership.split_check.alpha
    ):
        raise BundleError(
            f"the bundle was loaded for membership p = {bundle.membership.p:g} (split check "
            f"alpha {bundle.membership.balance_alpha:g}) but the policy says p = "
            f"{membership.p:g} (alpha {membership.split_check.alpha:g}); load it with the "
            "policy's membership settings"
        )
    if bundle.membership.balance_ok:
        return ()
    if membership.split_check.action == "fail":
        raise BundleError(bundle.membership.imbalance_message())
    return (bundle.membership.imbalance_message(),)


def cache_warnings(policy: Policy) -> tuple[str, ...]:
    """A warning when the policy sets a ``cache_dir`` that its engine does not use
    (:attr:`gate.engines.base.Engine.uses_feature_caches`; the spark engine analyses and
    embeds every text on its workers)."""
    settings: list[PiiFeatures | SemanticFeatures] = [
        *policy.settings_of(PiiFeatures),
        *policy.settings_of(SemanticFeatures),
    ]
    classes = sorted({s.feature_class for s in settings if s.cache_dir is not None})
    if not classes or uses_feature_caches(policy.engine):
        return ()
    return (
        f"{' and '.join(classes)} features: cache_dir is not used by the "
        f"{policy.engine.name} engine (it analyses and embeds every text); the cache is "
        "neither read nor written",
    )


def precision_warnings(policy: Policy) -> tuple[str, ...]:
    """A warning when the policy embeds in bfloat16 on a CPU that would emulate it (the
    verdict does not change; the run is several times slower than in float32). Only
    this machine's CPU is asked: a Spark cluster's executors are not."""
    if not any(s.precision == "bfloat16" for s in policy.settings_of(SemanticFeatures)):
        return ()
    engine = policy.engine
    on_this_machine = engine.name == "local" or (
        engine.name == "spark" and engine.spark_master.startswith("local")
    )
    if not on_this_machine:
        return ()
    if native_bfloat16() is not False:
        return ()
    return (
        "semantic features: precision bfloat16 on a CPU without bfloat16 matrix instructions "
        "(AVX512-BF16 or AMX): the encoder emulates it, several times slower than float32 "
        "(5.5-5.8x slower on an AVX2 CPU); use precision: float32 on this machine",
    )


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
        error = missing_dependency_message(exc, needed_by=f"audit {name!r}")
    except Exception as exc:
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
    """
    loaded = policy if isinstance(policy, LoadedPolicy) else None
    policy_model: Policy = policy.policy if isinstance(policy, LoadedPolicy) else policy
    root_seed = policy_model.seed if seed is None else seed
    if root_seed < 0:
        raise ValueError(f"seed must be >= 0; found {root_seed}")
    progress = progress or NullProgress()
    warnings = (
        split_warnings(bundle, policy_model.membership)
        + precision_warnings(policy_model)
        + cache_warnings(policy_model)
    )
    started = time.perf_counter()
    started_at = datetime.now(UTC).isoformat(timespec="seconds")

    enabled = policy_model.audits.enabled()
    children = np.random.SeedSequence(root_seed).spawn(len(enabled))
    outcomes: dict[str, AuditOutcome] = {}
    with nullcontext(engine) if engine is not None else create_engine(policy_model.engine) as used:
        store = FeatureStore(bundle, progress, used)
        for (name, config), child in zip(enabled.items(), children, strict=True):
            outcomes[name] = _run_audit(
                name, config, bundle, policy_model, store, root_seed, child, progress
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
    profile audit's surprisal attack probes. ``engine`` and ``spark_master`` override the
    policy's ``engine.name`` and ``engine.spark_master``.

    Raises:
        InputError: the policy, the bundle or ``out_dir`` is bad (exit 2); nothing is
            written, and an earlier report in ``out_dir`` is gone (it was removed first).
        EvidenceWriteError: the evidence could not be written (exit 3).
    """
    return _check_files(
        policy=policy,
        synthetic=synthetic,
        train=train,
        holdout=holdout,
        source=source,
        manifest=manifest,
        canary_source=canary_source,
        model=model,
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
        data_docs=None,
        only="canary",
        engine=None,
        spark_master=None,
    )


def _pii_classes(node: object, path: str) -> Iterator[tuple[str, PiiFeatures]]:
    """Every ``pii`` class configuration in a policy (sub)tree, with its YAML path."""
    if isinstance(node, PiiFeatures):
        yield path, node
    elif isinstance(node, BaseModel):
        for name in type(node).model_fields:
            yield from _pii_classes(getattr(node, name), f"{path}.{name}" if path else name)
    elif isinstance(node, list | tuple):
        for i, item in enumerate(node):
            yield from _pii_classes(item, f"{path}[{i}]")


def _check_pii_entities(loaded: LoadedPolicy) -> None:
    """Refuse entity types a ``pii`` class of an enabled audit cannot search, before any
    work (Presidio knows its recognizers only once loaded: the policy schema cannot).

    Raises:
        InputError: a type no recognizer of the engine finds, or a spaCy pipeline that is
            not installed; named by YAML path.
    """
    from gate.features.pii import unsearchable_entities

    enabled = loaded.policy.audits.enabled().items()
    found = (found for name, audit in enabled for found in _pii_classes(audit, f"audits.{name}"))
    for path, config in found:
        try:
            problem = unsearchable_entities(
                engine=config.engine, spacy_model=config.spacy_model, entities=config.entities
            )
        except ModuleNotFoundError as exc:
            raise InputError(f"{loaded.path}: {path}.spacy_model: {exc.msg}") from None
        if problem:
            raise InputError(f"{loaded.path}: {path}.entities: {problem}")


def _check_audit_generators(policy: Policy) -> None:
    """Resolve and validate the generators the enabled audits train (the canary audit's,
    the profile audit's n-gram generator).

    Raises:
        InputError: an unknown generator or settings it rejects, named by YAML path.
    """
    canary = policy.audits.canary
    if canary is not None and canary.enabled:
        from gate.canary.audit import canary_generators

        canary_generators(canary)
    profile = policy.audits.profile
    if (
        profile is not None
        and profile.enabled
        and profile.ngram_lbf.enabled
        and profile.ngram_lbf.generator.enabled
    ):
        from gate.profile.ngram_lbf import profile_generator

        profile_generator(profile.ngram_lbf.generator)


def _check_before_work(loaded: LoadedPolicy) -> None:
    """What the policy names that only a library can check (generators and their
    settings, PII entity types): bad input, exit 2, before any file is read or model
    trained. ``gate policy validate`` runs it too.

    Raises:
        InputError: named by YAML path.
    """
    _check_audit_generators(loaded.policy)
    _check_pii_entities(loaded)


def _refuse_unused_canary_source(loaded: LoadedPolicy, canary_source: str | Path | None) -> None:
    """Refuse ``--canary-source`` when no canary audit would use it (as ``--model``
    without the profile audit): the user would believe the canaries audited."""
    canary = loaded.policy.audits.canary
    if canary_source is not None and (canary is None or not canary.enabled):
        raise InputError(
            f"--canary-source {canary_source}: the policy {loaded.path} enables no canary "
            "audit, so the canary source would go unused (enable audits.canary, or leave "
            "the option out)"
        )


def _require_canary_source(loaded: LoadedPolicy, canary_source: pd.DataFrame | None) -> None:
    """Refuse, before any work, a bundle without the canary-source records an enabled
    canary audit crafts its canaries from.

    Raises:
        InputError: the canary audit is on and there are no canary-source records.
    """
    canary = loaded.policy.audits.canary
    if canary is not None and canary.enabled and (canary_source is None or canary_source.empty):
        raise InputError(
            f"{loaded.path}: audits.canary: the canary audit needs canary-source records "
            "(neither train nor holdout): split with `gate split --canary-fraction` and "
            "give its manifest, or give --canary-source FILE"
        )


def _require_source_ids(
    loaded: LoadedPolicy, synthetic: pd.DataFrame, path: str | Path | None
) -> None:
    """Refuse, before any work, a release without the ``source_id`` links an enabled
    distinguishability audit plays its game on.

    Raises:
        InputError: the audit is on and no release record names a source record.
    """
    game = loaded.policy.audits.distinguishability
    if game is None or not game.enabled:
        return
    if "source_id" not in synthetic.columns or synthetic["source_id"].isna().all():
        raise InputError(
            f"{path or '--synthetic'}: no record has a source_id; {loaded.path}: "
            "audits.distinguishability needs a release of rewrites whose records name the "
            "source record they rewrite (a source_id column holding a record_id of the "
            "source records)"
        )


@dataclass(frozen=True)
class PolicyValidation:
    """What ``gate policy validate`` found: a policy every command can run."""

    path: str
    name: str
    version: int
    audits: int
    checks: int
    sha256: str


def policy_schema() -> dict[str, Any]:
    """The policy's JSON Schema with the configuration of every installed plug-in: audits,
    disclosure classes, scorers (:func:`gate.policy.loader.policy_json_schema`) and
    generators (:func:`gate.generators.with_generator_configs`)."""
    from gate.generators import with_generator_configs
    from gate.policy.loader import policy_json_schema

    return with_generator_configs(policy_json_schema())


def validate_policy(path: str | Path, *, engine: str | None = None) -> PolicyValidation:
    """Check a policy file as far as it can be checked without data: the schema, every
    plug-in it names (audits, classes, scorers, the engine, rewrite attacks), the
    generators its audits train and, if it has a ``remediation`` block, the generator and
    settings ``gate remediate`` would train. ``engine`` replaces the policy's engine, as
    ``--engine`` does for ``gate check``.

    Raises:
        InputError: the policy is invalid (the message names the YAML path; exit 2).
        PluginUnavailableError: a plug-in it names cannot be loaded here (exit 3).
    """
    from gate.audits.registry import policy_checks

    loaded = _with_engine(load_policy(path), engine, None)  # an engine this installation has
    checks = policy_checks(loaded.policy)
    _check_before_work(loaded)
    if loaded.policy.remediation is not None:
        from gate.remediation.setup import remediation_setup

        remediation_setup(loaded, generator=None, method=None)
    return PolicyValidation(
        path=loaded.path,
        name=loaded.policy.name,
        version=loaded.policy.version,
        audits=len(loaded.policy.audits.enabled()),
        checks=len(checks),
        sha256=loaded.sha256,
    )


def _only_audit(loaded: LoadedPolicy, name: str) -> LoadedPolicy:
    config = getattr(loaded.policy.audits, name, None)
    if config is None or not config.enabled:
        raise InputError(f"{loaded.path}: audits.{name}: the policy has no enabled {name} audit")
    if not config.sets_threshold():
        raise InputError(
            f"{loaded.path}: audits.{name}.thresholds: set at least one threshold, or the "
            "audit could never fail"
        )
    audits = type(loaded.policy.audits).model_construct(**{name: config})
    return replace(loaded, policy=loaded.policy.model_copy(update={"audits": audits}))


def _with_engine(
    loaded: LoadedPolicy, engine: str | None, spark_master: str | None
) -> LoadedPolicy:
    """The policy with ``--engine``/``--spark-master`` applied, its engine known here."""
    settings = loaded.policy.engine
    update = {
        key: value
        for key, value in (("name", engine), ("spark_master", spark_master))
        if value is not None
    }
    if update:
        try:
            settings = EngineSettings.model_validate({**settings.model_dump(), **update})
        except ValidationError as exc:
            flags = " / ".join(
                f"--{key.replace('name', 'engine').replace('_', '-')}" for key in update
            )
            raise InputError(f"{flags}: {exc.errors()[0]['msg']}") from exc
        loaded = replace(loaded, policy=loaded.policy.model_copy(update={"engine": settings}))
    if settings.name not in ENGINES.names():
        where = "--engine" if engine is not None else f"{loaded.path}: engine.name"
        raise InputError(
            f"{where}: no engine {settings.name!r} in this installation "
            f"(available: {', '.join(ENGINES.names())}"
            + (")" if engine is not None else "; to run here, add --engine local)")
        )
    if spark_master is not None and settings.name != "spark":
        raise InputError(
            f"--spark-master applies to the spark engine; the engine is {settings.name!r} "
            "(add --engine spark)"
        )
    return loaded


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
    with out_dir_lock(Path(out_dir)) as out, _data_docs_site(data_docs, out) as site:
        prepare_out_dir(out)  # before anything can fail: no earlier verdict survives this run
        loaded = _with_engine(load_policy(policy), engine, spark_master)
        if only is not None:
            loaded = _only_audit(loaded, only)
        _check_before_work(loaded)
        _refuse_unused_canary_source(loaded, canary_source)
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
                    read=data_engine.read_table,  # the spark engine also reads datasets
                )
            _require_canary_source(loaded, bundle.canary_source)
            _require_source_ids(loaded, bundle.synthetic, synthetic)
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
            evidence = write_evidence(result, out, mlflow=settings, data_docs=site)
    return CheckOutcome(
        result=evidence.result,
        report_path=evidence.files["report"],
        files=evidence.files,
        mlflow_run_id=evidence.mlflow_run_id,
    )


def remediate_release(
    *,
    policy: str | Path,
    manifest: str | Path,
    out_dir: str | Path = "gate-remediation",
    generator: str | None = None,
    method: str | None = None,
    canary_source: str | Path | None = None,
    seed: int | None = None,
    progress: Progress | None = None,
    mlflow: bool = True,
    tracking_uri: str | None = None,
    mlflow_timeout: float = 30.0,
) -> RemediationResult:
    """The remediation loop (what ``gate remediate`` runs): round 0 trains the generator as
    given on the train users of ``manifest``, samples a release as large as train (or
    ``remediation.sample_size``) and gates it with the full :func:`run_gate` path and
    evidence; each later round retrains with DP-SGD (or adds RIP noise) at the next target
    of the policy's schedule, until a release passes or the schedule is exhausted. A policy
    with ``audits.canary`` runs the canary audit in every round on that round's training
    (the same generator, epochs and DP-SGD budget); ``canary_source`` as in
    :func:`audit_canaries`.

    Returns:
        The result: ``pass`` (a round passed; its release and, if private, generator are
        kept in ``out_dir``), ``fail`` (every round failed) or ``error``.

    Raises:
        InputError: bad policy, manifest, generator or settings (exit 2); nothing trained.
        EvidenceWriteError: the evidence could not be written (exit 3).
    """
    from gate.evidence.writer import (
        MlflowSettings,
        out_dir_lock,
        prepare_out_dir,
        require_mlflow_timeout,
        write_evidence,
    )
    from gate.remediation.loop import RemediationRun, RoundGate, RoundTracker
    from gate.remediation.report import (
        RemediationResult,
        is_remediation_dir,
        is_remediation_output,
        overall_status,
        write_remediation_report,
    )
    from gate.remediation.schedule import RoundPlan, plan_rounds
    from gate.remediation.setup import (
        remediation_setup,
        utility_embedding,
        with_feature_caches,
    )
    from gate.remediation.utility import UtilityMeter

    progress = progress or NullProgress()
    require_mlflow_timeout(mlflow_timeout)
    with (
        tempfile.TemporaryDirectory(prefix="gate-feature-caches-") as feature_caches,
        out_dir_lock(
            Path(out_dir), is_own=is_remediation_output, is_output=is_remediation_dir
        ) as out,
    ):
        prepare_out_dir(out)  # before anything can fail: no earlier verdict survives this run
        loaded = _with_engine(load_policy(policy), None, None)
        root_seed = loaded.policy.seed if seed is None else seed
        if root_seed < 0:
            raise InputError(f"--seed must be >= 0; found {root_seed}")
        setup = remediation_setup(loaded, generator=generator, method=method)
        _refuse_unused_canary_source(loaded, canary_source)
        _check_before_work(loaded)
        with progress.step("loading the train and holdout records"):
            records = load_source(
                membership=loaded.policy.membership,
                text=loaded.policy.text,
                manifest=manifest,
                canary_source=canary_source,
            )
        _require_canary_source(loaded, records.canary_source)
        users = setup.train_users(records.frame)
        run_policy = with_feature_caches(loaded, Path(feature_caches))
        out.mkdir(parents=True)
        settings = MlflowSettings(
            enabled=mlflow and loaded.policy.evidence.mlflow.enabled,
            tracking_uri=tracking_uri,
            timeout=mlflow_timeout,
        )

        def evaluate(
            release: Path, report_dir: Path, parent: str | None, plan: RoundPlan
        ) -> RoundGate:
            bundle = load_bundle(
                synthetic=release,
                membership=loaded.policy.membership,
                text=loaded.policy.text,
                manifest=manifest,
                canary_source=canary_source,
            )
            round_policy = setup.canary_round_policy(run_policy, plan, train_users=len(users))
            result = run_gate(round_policy, bundle, seed=root_seed, progress=progress)
            with progress.step("writing the round's gate evidence"):
                evidence = write_evidence(
                    result, report_dir, mlflow=replace(settings, parent_run_id=parent)
                )
            errors = [o.error for o in evidence.result.audits.values() if o.error]
            return RoundGate(
                status=evidence.result.status,
                metrics={
                    name: dict(o.result.metric_values)
                    for name, o in evidence.result.audits.items()
                    if o.result is not None
                },
                report_path=report_dir,
                mlflow_run_id=evidence.mlflow_run_id,
                error="; ".join(e for e in [*errors, evidence.result.evidence_error] if e) or None,
            )

        holdout_texts = setup.holdout_texts(records.frame)
        model, cache = utility_embedding(run_policy.policy)
        meter = UtilityMeter(holdout_texts, embedding_model=model, cache_dir=cache)
        plans = plan_rounds(setup.remediation, method=setup.method)
        tracking = setup.start_tracking(settings, loaded, root_seed) if settings.enabled else None
        run = RemediationRun(
            plans=plans,
            remediation=setup.remediation,
            generator_cls=setup.generator_cls,
            generator_config=setup.generator_config,
            users=users,
            holdout_texts=holdout_texts,
            out=out,
            evaluate=evaluate,
            seed=root_seed,
            progress=progress,
            tracker=RoundTracker() if tracking is None else tracking.tracker,
            utility=meter,
        )
        try:
            rounds = run.run()
        except BaseException:
            if tracking is not None:
                tracking.abandon()
            raise
        result = RemediationResult(
            status=overall_status(rounds, len(plans)),
            rounds=tuple(rounds),
            policy={"name": loaded.policy.name, "path": str(loaded.path), "sha256": loaded.sha256},
            settings=setup.settings_dict(),
            seed=root_seed,
            mlflow_run_id=None if tracking is None else tracking.run_id,
        )
        files = write_remediation_report(result, out)
        if tracking is not None:
            finished = tracking.finish(result, files)
            if finished is not result:  # logging failed: the files must say error, not pass
                result, files = finished, write_remediation_report(finished, out)
    return replace(result, files=files)
