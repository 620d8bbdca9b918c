"""The remediation loop: for each planned round, train (round 0 as given, then DP-SGD or
RIP noise), sample a release, measure its utility, gate it, and stop at the first PASS.

Each round is written to ``<out>/round-<k>/``; ``round.json`` is written last, and a round
interrupted (Ctrl-C, SIGTERM, an error) is removed whole. Releases and generators of
rounds that fail are private data: they are deleted once gated (their fingerprints stay in
the evidence). A passing release is kept; its generator is kept only if it was trained
privately (a non-private checkpoint is as private as the train set).
"""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from gate.atomic import atomic_write_text, current_umask
from gate.digests import sha256_file
from gate.errors import ReleaseError
from gate.generators.base import (
    DpSgdSpec,
    Generator,
    GeneratorConfig,
    GeneratorError,
    GeneratorStream,
    ParametricGenerator,
    generator_stream_seed,
)
from gate.policy.models import Remediation
from gate.progress import Progress
from gate.remediation.outputs import PENDING_RELEASE_NAME, RELEASE_NAME, ROUND_FILE
from gate.remediation.rip_noise import ReplicaSpread, add_rip_noise, replica_spread
from gate.remediation.schedule import RoundPlan, default_delta
from gate.remediation.utility import ReleaseUtility, UtilityMeter
from gate.results import Status
from gate.seeds import stream_seed
from gate.stats.rip import eta_from_epsilon_delta

# the accountant's ε may exceed the target by the solver's tolerance, never more
ACCOUNTANT_TOLERANCE = 1e-2


@dataclass(frozen=True)
class RoundGate:
    """What gating one release gave: the verdict, every audit's metric values, where the
    report is, and the gate's MLflow run."""

    status: Status
    metrics: Mapping[str, Mapping[str, float]]
    report_path: Path
    mlflow_run_id: str | None
    error: str | None = None


# (release file, report directory, parent MLflow run id or None) -> the gate's verdict
EvaluateRelease = Callable[[Path, Path, str | None, RoundPlan], RoundGate]


@dataclass(frozen=True)
class RoundRecord:
    """One round's evidence: what was trained and how privately, the release, its
    utility and the gate's verdict."""

    plan: RoundPlan
    status: Status
    seed: dict[str, Any]
    fit: dict[str, Any]
    privacy: dict[str, Any] | None
    rip: dict[str, Any] | None
    utility: ReleaseUtility
    gate: dict[str, dict[str, float]]
    release: dict[str, Any]
    generator_dir: str | None
    report: str
    mlflow_run_id: str | None
    gate_run_id: str | None
    seconds: dict[str, float]
    error: str | None = None
    warnings: tuple[str, ...] = ()

    @property
    def accountant_epsilon(self) -> float | None:
        return None if self.privacy is None else float(self.privacy["epsilon"])

    @property
    def accountant_delta(self) -> float | None:
        return None if self.privacy is None else float(self.privacy["delta"])

    @property
    def max_epsilon_lower(self) -> float | None:
        values = self.gate.get("epsilon_lower", {})
        return max(values.values()) if values else None

    @property
    def max_canary_epsilon_lower(self) -> float | None:
        values = self.gate.get("canary_epsilon_lower", {})
        return max(values.values()) if values else None

    @property
    def noise_reproducible(self) -> bool:
        """Was the round's privacy noise drawn from its recorded seed (not private)?"""
        return (self.privacy or self.rip or {}).get("noise_source") == SEEDED_NOISE

    @property
    def max_auc(self) -> float | None:
        values = self.gate.get("auc", {})
        return max(values.values()) if values else None

    def as_dict(self) -> dict[str, Any]:
        return {
            "round": self.plan.index,
            "method": self.plan.method,
            "target": self.plan.target,
            "label": self.plan.label,
            "status": self.status,
            "seed": self.seed,
            "fit": self.fit,
            "privacy": self.privacy,
            "rip": self.rip,
            "utility": self.utility.as_dict(),
            "gate": self.gate,
            "release": self.release,
            "generator": self.generator_dir,
            "report": self.report,
            "mlflow_run_id": self.mlflow_run_id,
            "gate_mlflow_run_id": self.gate_run_id,
            "seconds": self.seconds,
            "error": self.error,
            "warnings": list(self.warnings),
        }


class RoundTracker:
    """Where rounds are logged (MLflow, or nowhere): a run per round, nested under the
    remediation's run, holding the gate's run."""

    def start_round(self, plan: RoundPlan, params: dict[str, str]) -> str | None:
        return None

    def finish_round(self, run_id: str | None, record: RoundRecord) -> None:
        return None

    def abandon_round(self, run_id: str | None) -> None:
        """End a round that raised (an error or an interruption), best effort."""
        return None


def gate_summary(metrics: Mapping[str, Mapping[str, float]]) -> dict[str, dict[str, float]]:
    """The per-round privacy figures: lower bounds on a user's ε (per disclosure class the
    exact ε̂; per membership scorer, keys ``membership:<scorer>``, the one-run ε̂), each
    disclosure class's phantom rate and p-value, the AUC per membership scorer and canary
    signal (keys ``canary:<signal>``), the lower bound on RIP η per membership scorer, and
    the canary audit's one-run ε̂ per signal (``canary_epsilon_lower``: a bound per
    canary, each inserted ``n_rep`` times, not per user)."""
    out: dict[str, dict[str, float]] = {
        "epsilon_lower": {},
        "phantom_rate": {},
        "p_value": {},
        "auc": {},
        "rip_eta_lower": {},
        "canary_epsilon_lower": {},
    }
    for name, value in metrics.get("disclosure", {}).items():
        if not np.isfinite(value):
            continue
        cls, _, metric = name.rpartition(".")
        if metric == "epsilon_lower_exact":
            out["epsilon_lower"][cls] = value
        elif metric == "phantom_rate":
            out["phantom_rate"][cls] = value
        elif metric == "p_value_exact":
            out["p_value"][cls] = value
    for name, value in metrics.get("membership", {}).items():
        if not np.isfinite(value):
            continue
        scorer, _, metric = name.rpartition(".")
        if metric == "auc":
            out["auc"][scorer] = value
        elif metric == "epsilon_lower":
            out["epsilon_lower"][f"membership:{scorer}"] = value
        elif metric == "rip_eta_lower":
            out["rip_eta_lower"][scorer] = value
    for name, value in metrics.get("canary", {}).items():
        if not np.isfinite(value):
            continue
        signal, _, metric = name.rpartition(".")
        if metric == "auc":
            out["auc"][f"canary:{signal}"] = value
        elif metric == "epsilon_lower":
            out["canary_epsilon_lower"][signal] = value
    return out


def refuted_claim(
    plan: RoundPlan, *, privacy: Mapping[str, Any] | None, gate: Mapping[str, Mapping[str, float]]
) -> str | None:
    """Why the gate's measurements contradict the round's own privacy claim, if they do:
    a membership scorer's lower confidence bound on RIP η above the η the round claims
    (a RIP round's target; for DP-SGD, the η its accountant's (ε, δ) implies,
    :func:`gate.stats.rip.eta_from_epsilon_delta`). None when the claim stands or the
    round claims nothing.

    For DP-SGD the bound is a test of the claim: under ε-DP each user's guess is right
    with probability at most 1/2 + η(ε) given the others (membership drawn per user, the
    one-run argument of Steinke, Nasr and Jagielski, 2023), so a round that keeps its
    claim is called refuted at most α of the time per scorer (about δ more at δ > 0; at
    most k·α over k scorers). η-RIP bounds the average accuracy only, for which the
    per-user binomial bound is not a test (a mechanism that reveals every user at once
    with probability 2η is η-RIP and was flagged in 20 % of simulated runs at α = 0.05):
    the caller reports a RIP round's contradiction as a warning."""
    bounds = gate.get("rip_eta_lower", {})
    if not bounds:
        return None
    if plan.method == "rip" and plan.target is not None:
        claimed = plan.target
        claim = f"the round's RIP target eta = {claimed:g}"
        hint = (
            "the spread sigma measured on remediation.rip.replicas half-models is too small "
            "for this generator: raise remediation.rip.replicas"
        )
    elif plan.method == "dpsgd" and privacy is not None:
        epsilon, delta = float(privacy["epsilon"]), float(privacy["delta"])
        claimed = eta_from_epsilon_delta(epsilon=epsilon, delta=delta)
        claim = (
            f"eta = {claimed:.4g}, the most any attack reaches on a ({epsilon:.4g}, "
            f"{delta:.3g})-DP generator"
        )
        hint = "the generator or its accountant does not deliver the epsilon it reports"
    else:
        return None
    scorer, worst = max(bounds.items(), key=lambda item: item[1])
    if worst <= claimed:
        return None
    return (
        f"the privacy claim is refuted: membership scorer {scorer!r} tells train users from "
        f"holdout users with accuracy 1/2 + {worst:.4g} at least (lower confidence bound), "
        f"above {claim}; {hint}"
    )


SEEDED_NOISE = (
    "seeded from the round seed's noise stream (remediation.secret_noise: false): "
    "reproducible, not private"
)


def _noise_source(secret: bool) -> str:
    """How a round's privacy noise was drawn, for its record (never the noise's seed)."""
    if secret:
        return "secret: the operating system's entropy, not recorded"
    return SEEDED_NOISE


def round_seed(seed: int, index: int) -> tuple[int, dict[str, Any]]:
    """The generator seed of round ``index``: a child of the run's seed sequence."""
    return stream_seed(seed, index), {"entropy": seed, "spawn_key": [index]}


@dataclass
class RemediationRun:
    """Everything a remediation run needs; :meth:`run` executes the rounds in order."""

    plans: Sequence[RoundPlan]
    remediation: Remediation
    generator_cls: type[Generator[Any]]
    generator_config: GeneratorConfig
    users: Sequence[Sequence[str]]
    holdout_texts: Sequence[str]
    out: Path
    evaluate: EvaluateRelease
    seed: int
    progress: Progress
    tracker: RoundTracker = field(default_factory=RoundTracker)
    utility: UtilityMeter | None = None
    _spread: ReplicaSpread | None = None
    _rip_base: ParametricGenerator[Any] | None = None
    _rip_theta: np.ndarray | None = None
    _rip_fit: dict[str, Any] = field(default_factory=dict)
    _rip_seed: int | None = None

    def run(self) -> list[RoundRecord]:
        records: list[RoundRecord] = []
        for plan in self.plans:
            round_dir = self.out / f"round-{plan.index}"
            try:
                record = self._round(plan, round_dir)
            except BaseException:
                shutil.rmtree(round_dir, ignore_errors=True)
                raise
            records.append(record)
            if record.status != "fail":
                break  # a PASS ends the loop; so does an error (never a pass)
        return records

    def _train(
        self, plan: RoundPlan, gen_seed: int
    ) -> tuple[Generator[Any], dict[str, Any], dict[str, Any] | None, dict[str, Any] | None]:
        r = self.remediation
        if plan.method == "rip":
            return self._rip_generator(plan, gen_seed)
        generator = self.generator_cls(self.generator_config, seed=gen_seed)
        privacy = None
        epochs = r.epochs
        if plan.method == "dpsgd":
            epochs = r.dpsgd.epochs or r.epochs
            privacy = DpSgdSpec(
                epsilon=plan.private_target,
                delta=default_delta(delta=r.dpsgd.delta, train_users=len(self.users)),
                max_grad_norm=r.dpsgd.max_grad_norm,
                accountant=r.dpsgd.accountant,
                noise_seed=(
                    None
                    if r.secret_noise
                    else generator_stream_seed(gen_seed, GeneratorStream.NOISE)
                ),
            )
        with self.progress.step(f"round {plan.index}: training ({plan.label})"):
            report = generator.fit(
                self.users, epochs=epochs, privacy=privacy, progress=self.progress
            )
        spent = None
        if privacy is not None:
            if report.privacy is None:
                raise GeneratorError(
                    f"generator {self.generator_cls.name!r} was asked for DP-SGD but reported "
                    "no privacy spent; it cannot be used for the dpsgd method"
                )
            spent = {**report.privacy.as_dict(), "noise_source": _noise_source(r.secret_noise)}
            reported = report.privacy
            if not reported.epsilon <= privacy.epsilon * (1 + ACCOUNTANT_TOLERANCE):  # NaN too
                raise GeneratorError(
                    f"the accountant reports epsilon {reported.epsilon:.4g} > target "
                    f"{privacy.epsilon:g}"
                )
            if reported.unit != "user":
                raise GeneratorError(
                    f"generator {self.generator_cls.name!r} reports privacy per "
                    f"{reported.unit!r}; the gate's unit is the user (a record-level ε does "
                    "not cover a user with several records)"
                )
            if not reported.delta <= privacy.delta:
                raise GeneratorError(
                    f"the accountant reports delta {reported.delta:.4g} > target "
                    f"{privacy.delta:.4g}"
                )
        return generator, report.as_dict(), spent, None

    def _rip_generator(
        self, plan: RoundPlan, gen_seed: int
    ) -> tuple[Generator[Any], dict[str, Any], dict[str, Any] | None, dict[str, Any] | None]:
        """RIP rounds perturb round 0's model (the generator as given); the B half-models
        that measure σ are trained once per run, from the same initialisation seed, so
        that σ measures the data's influence, not the initialisation's. Each round draws
        fresh noise for its η."""
        eta = plan.private_target
        generator_cls = self.generator_cls
        if not issubclass(generator_cls, ParametricGenerator):
            raise GeneratorError(
                f"generator {self.generator_cls.name!r} does not expose its parameters; the "
                "rip method needs parameter_vector and set_parameter_vector"
            )
        if self._rip_base is None or self._rip_theta is None or self._rip_seed is None:
            raise GeneratorError("a RIP round needs round 0's model; round 0 did not run")
        r = self.remediation
        started = time.perf_counter()
        if self._spread is None:
            self._spread = replica_spread(
                generator_cls,
                self.generator_config,
                self.users,
                epochs=r.epochs,
                replicas=r.rip.replicas,
                seed=self._rip_seed,
                progress=self.progress,
            )
        generator = self._rip_base
        generator.set_parameter_vector(self._rip_theta)  # undo the previous round's noise
        noise = add_rip_noise(
            generator,
            self._spread,
            eta=eta,
            noise=r.rip.noise,
            rng=np.random.default_rng(
                None if r.secret_noise else generator_stream_seed(gen_seed, GeneratorStream.NOISE)
            ),
        )
        rip = {
            **noise.as_dict(with_draw=not r.secret_noise),
            "noise_source": _noise_source(r.secret_noise),
            "replicas": self._spread.replicas,
            "half_size": self._spread.half_size,
            "sigma": self._spread.sigma,
            "training_seed": self._rip_seed,
            "seconds": time.perf_counter() - started,
        }
        return generator, self._rip_fit, None, rip

    def _round(self, plan: RoundPlan, round_dir: Path) -> RoundRecord:
        if round_dir.exists():
            shutil.rmtree(round_dir)
        round_dir.mkdir(parents=True)
        gen_seed, seed_info = round_seed(self.seed, plan.index)
        seed_info["generator_seed"] = gen_seed
        params = {
            "round": str(plan.index),
            "method": plan.method,
            "target": "" if plan.target is None else f"{plan.target:g}",
            "generator": self.generator_cls.name,
            "generator_seed": str(gen_seed),
            **{f"generator.{k}": str(v) for k, v in self.generator_config.model_dump().items()},
        }
        run_id = self.tracker.start_round(plan, params)
        try:
            return self._tracked_round(plan, round_dir, run_id, seed_info)
        except BaseException:
            self.tracker.abandon_round(run_id)
            raise

    def _tracked_round(
        self, plan: RoundPlan, round_dir: Path, run_id: str | None, seed_info: dict[str, Any]
    ) -> RoundRecord:
        gen_seed = int(seed_info["generator_seed"])
        seconds: dict[str, float] = {}
        t0 = time.perf_counter()
        generator, fit, privacy, rip = self._train(plan, gen_seed)
        seconds["train"] = time.perf_counter() - t0
        if plan.method == "rip":  # round 0's model, noised: it samples with round 0's seed
            seed_info["sampling_seed"] = self._rip_seed
        rip_planned = any(p.method == "rip" for p in self.plans)
        if plan.method == "none" and rip_planned:
            # RIP releases this model plus noise: its losses are not released either
            fit = {**fit, "losses": None}
            if isinstance(generator, ParametricGenerator):
                self._rip_base, self._rip_theta = generator, generator.parameter_vector()
                self._rip_fit, self._rip_seed = fit, gen_seed

        t0 = time.perf_counter()
        n = self.remediation.sample_size
        if n is None:  # remediation_setup refuses it: a size that counts the train records
            raise GeneratorError("remediation.sample_size is not set")
        texts = generator.sample(n, progress=self.progress)
        if len(texts) != n or not all(isinstance(t, str) for t in texts):
            raise GeneratorError(
                f"generator {self.generator_cls.name!r} returned {len(texts)} records for the "
                f"{n} asked, or a record that is not text"
            )
        # gated under a hidden name, readable by its owner only, and named the release only
        # once it passes: a run killed while it is gated (its longest step) had left an
        # ungated release (round 0's trained without DP) where a kept one goes (a review)
        release = round_dir / PENDING_RELEASE_NAME
        lines = (
            json.dumps({"record_id": f"g{plan.index}-{i:06d}", "text": t}, ensure_ascii=False)
            for i, t in enumerate(texts)
        )
        atomic_write_text(release, "\n".join(lines) + "\n", private=True)
        seconds["sample"] = time.perf_counter() - t0

        t0 = time.perf_counter()
        meter = self.utility or UtilityMeter(self.holdout_texts)
        self.utility = meter
        with self.progress.step(f"round {plan.index}: utility of the release"):
            utility = meter.measure(texts, generator)
        seconds["utility"] = time.perf_counter() - t0

        t0 = time.perf_counter()
        try:
            gated = self.evaluate(release, round_dir / "report", run_id, plan)
        except ReleaseError as exc:  # other bad input (a private file changed) stays so
            raise GeneratorError(
                f"generator {self.generator_cls.name!r} wrote a release the gate refuses: {exc}"
            ) from exc
        seconds["gate"] = time.perf_counter() - t0

        summary = gate_summary(gated.metrics)
        status, error = gated.status, gated.error
        warnings: tuple[str, ...] = ()
        refuted = refuted_claim(plan, privacy=privacy, gate=summary)
        if refuted is not None and plan.method == "rip":
            warnings = (refuted,)
        elif refuted is not None and status != "error":
            status, error = "error", refuted
        release_info: dict[str, Any] = {
            "records": len(texts),
            "sha256": sha256_file(release),
            "kept": status == "pass",
            "path": f"round-{plan.index}/{RELEASE_NAME}" if status == "pass" else None,
        }
        generator_dir = None
        if status == "pass" and plan.method != "none":
            target = round_dir / "generator"
            target.mkdir()
            generator.save(target)
            generator_dir = f"round-{plan.index}/generator"
        if status != "pass":
            release.unlink()  # a release that failed the gate carries what it leaked
        record = RoundRecord(
            plan=plan,
            status=status,
            seed=seed_info,
            fit=fit,
            privacy=privacy,
            rip=rip,
            utility=utility,
            gate=summary,
            release=release_info,
            generator_dir=generator_dir,
            report=str(gated.report_path.relative_to(self.out)),
            mlflow_run_id=run_id,
            gate_run_id=gated.mlflow_run_id,
            seconds=seconds,
            error=error,
            warnings=warnings,
        )
        self.tracker.finish_round(run_id, record)
        atomic_write_text(
            round_dir / ROUND_FILE,
            json.dumps(record.as_dict(), indent=2, allow_nan=False, ensure_ascii=False) + "\n",
        )
        if status == "pass":  # last: a kept release is never without its record (a review)
            os.chmod(release, 0o666 & ~current_umask())
            os.replace(release, round_dir / RELEASE_NAME)
        return record
