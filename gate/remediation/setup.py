"""Everything a remediation run is checked for before anything trains: the effective
settings (policy ``remediation:`` block with the command line's overrides), the generator
class and its validated configuration, and the MLflow parent run."""

from __future__ import annotations

import math
from contextlib import suppress
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal, cast

import pandas as pd
from pydantic import ValidationError

from gate.engines.base import uses_feature_caches
from gate.errors import InputError
from gate.generators import resolve_generator
from gate.generators.base import Generator, GeneratorConfig
from gate.interrupts import raise_interruption_behind
from gate.policy.loader import LoadedPolicy, policy_location, setting_error
from gate.policy.models import CanaryPrivacy, Policy, Remediation, SemanticFeatures
from gate.remediation.loop import RoundTracker
from gate.remediation.schedule import RoundPlan, default_delta
from gate.remediation.tracking import MlflowRoundTracker

METHODS = ("dpsgd", "rip")


@dataclass(frozen=True)
class RemediationSetup:
    remediation: Remediation
    method: Literal["dpsgd", "rip"]
    generator_cls: type[Generator[Any]]
    generator_config: GeneratorConfig
    policy_path: str

    def train_users(self, frame: pd.DataFrame) -> list[list[str]]:
        """The train records grouped by user (users in sorted order): one training
        example per user.

        Raises:
            InputError: fewer than 2 train users, when the method needs them (RIP trains
                on halves; DP-SGD's default δ = 1/users must be below 1); a DP-SGD δ above
                1/users.
        """
        train = frame[frame["split"] == "train"]
        grouped = train.groupby("user_id", sort=True)["text"].agg(list)
        users = [list(texts) for texts in grouped]
        delta = self.remediation.dpsgd.delta
        if self.method == "dpsgd" and delta is not None and users and delta > 1.0 / len(users):
            raise InputError(
                f"{self.policy_path}: remediation.dpsgd.delta: {delta:g} is above 1/(train "
                f"users) = 1/{len(users)}: a generator that publishes a random user's records "
                "verbatim meets such a guarantee; set delta at most 1/users (the papers' "
                "choice), better well below (1e-5, or 1/(10 users))"
            )
        if len(users) < 2:
            if self.method == "rip":
                raise InputError(
                    f"the rip method trains on random halves of the train users; found "
                    f"{len(users)} train user(s)"
                )
            if self.remediation.dpsgd.delta is None:
                raise InputError(
                    f"{self.policy_path}: remediation.dpsgd.delta: null means 1/(train "
                    f"users), which must be below 1; found {len(users)} train user(s): set "
                    "a delta in (0, 1)"
                )
        return users

    def canary_round_policy(
        self, loaded: LoadedPolicy, plan: RoundPlan, *, train_users: int
    ) -> LoadedPolicy:
        """The policy a round is gated with: its canary audit (if enabled) trains what the
        round trains, the remediation's generator with the round's epochs and DP-SGD
        budget, sampling releases of the remediation's size (unless the audit sets its own),
        so the canary AUC of each round shows what its privacy bought."""
        canary = loaded.policy.audits.canary
        if canary is None or not canary.enabled:
            return loaded
        r = self.remediation
        privacy = None
        epochs = r.epochs
        if plan.method == "dpsgd" and plan.target is not None:
            epochs = r.dpsgd.epochs or r.epochs
            privacy = CanaryPrivacy(
                epsilon=plan.target,
                delta=default_delta(delta=r.dpsgd.delta, train_users=train_users),
                max_grad_norm=r.dpsgd.max_grad_norm,
                accountant=r.dpsgd.accountant,
            )
        elif plan.method == "rip":  # remediation_setup refuses this combination
            raise InputError("the canary audit cannot reproduce a RIP round's noise")
        configured = canary.model_copy(
            update={
                "generator": r.generator,
                "generator_config": self.generator_config.model_dump(),
                "epochs": epochs,
                "privacy": privacy,
                "sample_size": canary.sample_size or r.sample_size,  # the kept release's
            }
        )
        audits = loaded.policy.audits.model_copy(update={"canary": configured})
        return replace(loaded, policy=loaded.policy.model_copy(update={"audits": audits}))

    def holdout_texts(self, frame: pd.DataFrame) -> list[str]:
        return frame.loc[frame["split"] == "holdout", "text"].tolist()

    def settings_dict(self) -> dict[str, Any]:
        return {
            "method": self.method,
            "generator": self.remediation.generator,
            "generator_config": self.generator_config.model_dump(mode="json"),
            "remediation": self.remediation.model_dump(mode="json"),
        }

    def start_tracking(self, settings: Any, loaded: LoadedPolicy, seed: int) -> RemediationTracking:
        """The parent MLflow run of the remediation, before anything trains.

        Raises:
            EvidenceWriteError: the tracking store cannot be reached or written within
                ``settings.timeout`` seconds (exit 3).
        """
        from gate.evidence.mlflow_log import NestedRunLog, experiment_name, tracking_uri
        from gate.evidence.writer import EvidenceWriteError

        uri = tracking_uri(settings.tracking_uri, loaded.policy.evidence.mlflow.tracking_uri)
        experiment = experiment_name(loaded.policy.evidence.mlflow.experiment, loaded.policy.name)
        schedule = (
            self.remediation.dpsgd.epsilons if self.method == "dpsgd" else self.remediation.rip.etas
        )
        try:
            log = NestedRunLog(uri, experiment=experiment, timeout=settings.timeout)
            run_id = log.start(
                f"remediate-{loaded.policy.name}",
                params={
                    "method": self.method,
                    "generator": self.remediation.generator,
                    "seed": str(seed),
                    "policy.sha256": loaded.sha256 or "",
                    "schedule": ",".join(f"{t:g}" for t in schedule),
                },
                tags={"gate.kind": "remediation", "gate.status": "running"},
            )
        except Exception as exc:
            raise EvidenceWriteError(
                f"MLflow logging to {uri} failed before any training: {type(exc).__name__}: "
                f"{exc} (check --tracking-uri, raise --mlflow-timeout, or pass --no-mlflow)"
            ) from exc
        return RemediationTracking(log, run_id, MlflowRoundTracker(log, run_id))


@dataclass
class RemediationTracking:
    log: Any
    run_id: str
    tracker: RoundTracker

    def finish(self, result: Any, files: dict[str, Path]) -> Any:
        """Log the remediation's files and verdict; a failure to log makes it an error (the
        caller writes the files again and withdraws the run with them: :meth:`abandon`)."""
        try:
            self.log.artifacts(self.run_id, list(files.values()))
            self.log.end(
                self.run_id,
                status="FINISHED",
                tags={
                    "gate.status": result.status,
                    "gate.passed": str(result.status == "pass").lower(),
                },
            )
            return result
        except Exception as exc:
            raise_interruption_behind(exc)  # not the store's failure: the run was interrupted
            return replace(
                result,
                status="error",
                error=f"MLflow logging failed: {type(exc).__name__}: {exc}",
            )

    def abandon(self, replacements: list[Path] | None = None) -> None:
        """End the parent run as KILLED, tagged an error, with ``replacements`` uploaded
        over the files uploaded before; best effort: a run left unfinished is never read as
        a pass either."""
        with suppress(Exception):
            self.log.withdraw(self.run_id, status="KILLED", replacements=replacements)


def missing_release_size(loaded: LoadedPolicy) -> str | None:
    """Why ``gate remediate`` cannot run the policy without ``remediation.sample_size``
    (naming the YAML path), or None when it is set."""
    if loaded.policy.remediation is None:
        return (
            f"{loaded.path}: remediation: the policy has no remediation block; gate "
            "remediate needs one with sample_size, the number of records per release, "
            "chosen without looking at the data (policies/remediate.yaml in the gate's "
            "repository has one)"
        )
    if loaded.policy.remediation.sample_size is not None:
        return None
    at = policy_location(loaded, ("remediation", "sample_size"))
    return (
        f"{at}: gate remediate needs a number of records per release, "
        "chosen without looking at the data (null, as many as train has, would make a "
        "private round's release size the exact count of train records, which its ε or "
        "η does not cover)"
    )


def remediation_setup(
    loaded: LoadedPolicy,
    *,
    generator: str | None,
    method: str | None,
    release_size: bool = True,
) -> RemediationSetup:
    """The effective settings, checked before anything trains.

    Args:
        loaded: the policy.
        generator, method: ``--generator`` and ``--method``, where given.
        release_size: require ``sample_size`` (:func:`missing_release_size`), as ``gate
            remediate`` does; ``gate policy validate`` notes its absence instead, since a
            ``remediation`` block may only name the generator a canary audit trains.

    Raises:
        InputError: an unknown method or generator, a generator configuration its model
            rejects, or no ``sample_size`` (the message names the YAML path).
    """
    remediation = loaded.policy.remediation or Remediation()
    if generator is not None:
        try:
            remediation = Remediation.model_validate(
                {**remediation.model_dump(by_alias=True), "generator": generator}
            )
        except ValidationError as exc:
            raise InputError(f"--generator {generator!r}: {exc.errors()[0]['msg']}") from None
    chosen = method or remediation.method
    if chosen not in METHODS:
        raise InputError(f"--method must be one of {', '.join(METHODS)}; found {chosen!r}")
    source = (
        "--generator"
        if generator is not None
        else policy_location(loaded, ("remediation", "generator"))
    )
    generator_cls = resolve_generator(remediation.generator, where=source)
    try:
        config = generator_cls.config_model.model_validate(remediation.generator_config)
    except ValidationError as exc:
        error = setting_error(
            exc,
            generator_cls.config_model,
            remediation.generator_config,
            path=("remediation", "generator_config"),
        )
        raise InputError(f"{policy_location(loaded, error.path)}: {error.detail}") from None
    missing = missing_release_size(loaded) if release_size else None
    if missing is not None:
        raise InputError(missing)
    _refuse_unremediable_checks(loaded)
    canary = loaded.policy.audits.canary
    if chosen == "rip" and canary is not None and canary.enabled:
        raise InputError(
            f"{loaded.path}: audits.canary: the canary audit retrains the generator and "
            "cannot reproduce RIP noise; use method dpsgd or disable the canary audit"
        )
    p = loaded.policy.membership.p
    if chosen == "rip" and not math.isclose(p, 0.5):
        at = policy_location(loaded, ("membership", "p"))
        raise InputError(
            f"{at}: the rip method's eta-RIP is defined over random halves of the users "
            f"(Theorem 7's sigma too); found p = {p:g}: split with p = 0.5 or use dpsgd"
        )
    if chosen == "rip" and not generator_cls.supports_parameter_noise():
        raise InputError(
            f"{source}: generator {remediation.generator!r} does not expose its parameters; "
            "the rip method needs parameter_vector and set_parameter_vector (use dpsgd)"
        )
    return RemediationSetup(
        remediation=remediation,
        method=cast(Literal["dpsgd", "rip"], chosen),
        generator_cls=generator_cls,
        generator_config=config,
        policy_path=str(loaded.path),
    )


def _refuse_unremediable_checks(loaded: LoadedPolicy) -> None:
    """Refuse what no round can change, before anything trains: the profile audit's δ
    floor of the train corpus (``corpus_lbf`` reads the source records only, so every
    round would fail or pass it alike) and a required surprisal attack (it probes a
    released model given by ``--model``; ``gate remediate`` gates releases).

    Raises:
        InputError: named by YAML path.
    """
    profile = loaded.policy.audits.profile
    if profile is None or not profile.enabled:
        return
    if profile.thresholds.max_delta_floor is not None:
        at = policy_location(loaded, ("audits", "profile", "thresholds", "max_delta_floor"))
        raise InputError(
            f"{at}: the delta floor is a property of the train corpus, not of a release: no "
            "remediation round can change it (check it with gate check; remove it from the "
            "policy gate remediate uses)"
        )
    if profile.surprisal.required:
        at = policy_location(loaded, ("audits", "profile", "surprisal", "required"))
        raise InputError(
            f"{at}: the surprisal attack probes a released model (gate check --model); gate "
            "remediate gates releases and passes no model, so every round would be an "
            "error (set required: false)"
        )


def with_feature_caches(loaded: LoadedPolicy, cache_dir: Path) -> LoadedPolicy:
    """The policy with every ``semantic`` and ``pii`` feature class that has no cache of
    its own caching its embeddings or detections in ``cache_dir``: each round's gate
    embeds and analyses the same train and holdout records again, and the utility meter
    embeds the same release as the gate. The caller owns ``cache_dir`` and deletes it (the
    vectors embed private records, the detections are spans of them). A policy whose
    engine uses no cache (the spark engine) is returned as it is."""
    if not uses_feature_caches(loaded.policy.engine):
        return loaded

    def fill(node: Any) -> Any:
        if isinstance(node, dict):
            node = {k: fill(v) for k, v in node.items()}
            if node.get("class") in ("semantic", "pii") and node.get("cache_dir") is None:
                node["cache_dir"] = str(cache_dir)
            return node
        if isinstance(node, list):
            return [fill(v) for v in node]
        return node

    data = fill(loaded.policy.model_dump(mode="json", by_alias=True))
    return replace(loaded, policy=type(loaded.policy).model_validate(data))


def utility_embedding(policy: Policy) -> tuple[str | None, str | None]:
    """The embedding model and cache of the policy's first ``semantic`` class (the utility
    meter measures releases in the space the gate uses), or the bundled model, no cache."""
    disclosure = policy.audits.disclosure
    for feature in [] if disclosure is None else disclosure.features:
        if isinstance(feature, SemanticFeatures):
            return feature.model, feature.cache_dir
    return None, None
