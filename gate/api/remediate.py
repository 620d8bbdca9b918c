"""``gate remediate``: train, generate and gate round after round until a release passes
(the loop itself is :mod:`gate.remediation`; this wires it to the files, the gate and
the evidence).
"""

from __future__ import annotations

import tempfile
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from gate.api.check import run_gate
from gate.api.preflight import (
    check_before_work,
    refuse_a_starting_worker,
    refuse_null_control,
    refuse_unusable_sqlite_store,
    refuse_unused_canary_source,
    refuse_unused_tracking_uri,
    require_canary_source,
    with_engine,
)
from gate.data.bundle import load_bundle, load_source
from gate.errors import InputError
from gate.interrupts import record_verdict
from gate.policy.loader import load_policy
from gate.progress import NullProgress, Progress

if TYPE_CHECKING:
    from gate.remediation.report import RemediationResult


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
    refuse_a_starting_worker("remediate_release")
    from gate.evidence.writer import (
        MlflowSettings,
        out_dir_lock,
        prepare_out_dir,
        require_mlflow_timeout,
        write_evidence,
    )
    from gate.remediation.loop import RemediationRun, RoundGate, RoundTracker
    from gate.remediation.outputs import (
        is_remediation_dir,
        is_remediation_output,
        remove_remediation_report,
        withdraw_kept_releases,
    )
    from gate.remediation.report import (
        RemediationResult,
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
            Path(out_dir),
            is_own=is_remediation_output,
            is_output=is_remediation_dir,
            on_withdraw=lambda earlier: withdraw_kept_releases(
                earlier, reason="a later run into this --out was refused, its verdict removed"
            ),
        ) as out,
    ):
        prepare_out_dir(out)  # before anything can fail: no earlier verdict survives this run
        loaded = with_engine(load_policy(policy), None, None)
        root_seed = loaded.policy.seed if seed is None else seed
        if root_seed < 0:
            raise InputError(f"--seed must be >= 0; found {root_seed}")
        setup = remediation_setup(loaded, generator=generator, method=method)
        refuse_null_control(loaded.policy, where=loaded.path)
        refuse_unused_canary_source(loaded, canary_source)
        refuse_unused_tracking_uri(loaded, tracking_uri, mlflow=mlflow)
        refuse_unusable_sqlite_store(loaded, tracking_uri, mlflow=mlflow)
        check_before_work(loaded)
        with progress.step("loading the train and holdout records"):
            records = load_source(
                membership=loaded.policy.membership,
                text=loaded.policy.text,
                manifest=manifest,
                canary_source=canary_source,
            )
        require_canary_source(loaded, records.canary_source)
        # the generator is trained here, on the manifest's train records: a policy that
        # requires the training-data check gets it against that file
        trained_on = (
            Path(manifest).parent / records.manifest.train.path
            if records.manifest is not None and loaded.policy.membership.training_data == "required"
            else None
        )
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
                training_data=trained_on,
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
        # one guard from the rounds to the verdict: a Ctrl-C between a passing round and
        # its summary had left the round's release kept (a review)
        try:
            rounds = run.run()
            result = RemediationResult(
                status=overall_status(rounds, len(plans)),
                rounds=tuple(rounds),
                policy={
                    "name": loaded.policy.name,
                    "path": str(loaded.path),
                    "sha256": loaded.sha256,
                },
                settings=setup.settings_dict(),
                seed=root_seed,
                mlflow_run_id=None if tracking is None else tracking.run_id,
            )
            files = write_remediation_report(result, out)
            if tracking is not None:
                finished = tracking.finish(result, files)
                if finished is not result:  # logging failed: the files must say error
                    result, files = finished, write_remediation_report(finished, out)
                    tracking.abandon(replacements=list(files.values()))
        except BaseException as exc:  # interrupted or failed: no summary of a run that did not end
            remove_remediation_report(out)
            if tracking is not None:
                tracking.abandon()
            withdraw_kept_releases(out, reason=f"the run ended in an error: {type(exc).__name__}")
            raise
        if result.status != "pass":  # MLflow's logging failed after a round passed
            withdraw_kept_releases(out, reason=result.first_error or "the run ended in an error")
        record_verdict(out)
    return replace(result, files=files)
