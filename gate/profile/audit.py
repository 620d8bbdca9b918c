"""The (ε, δ) profile audit: the minimal δ at a target ε that the gate's attacks prove.

A release (or a released model) is an (ε, δ) mechanism only if every attack's outcome
distributions on members and non-members are (ε, δ)-close. Three views:

- **Thresholded membership scores** (every membership scorer, and the surprisal of a
  released model): guesses "member" above a threshold, "non-member" below another, abstain
  in between, over train vs holdout users. Users were included together, so the bound is
  the one-run test of Steinke, Nasr and Jagielski (2023, App. D) inverted in δ
  (:func:`gate.stats.one_run.one_run_delta`), thresholds chosen on one half of the users and
  evaluated on the other. Each of the A attacks runs at level α/A (Bonferroni), so the
  worst of them keeps level α.
- **Surprisal on a released model** (Stomakhin, 2025, *Framework for Privacy-Preserving
  Synthesis of Textual Data*, §6): S(x) of every train and holdout record, averaged per
  user; AUC, median difference, LR(τ); a control on two random halves of train users.
- **LBF profile of the n-gram mechanism** (ibid., §3.2-3.7, §4.3, §5.4.2): f_X vs f_{X∖U}
  of the train corpus's n-grams for random source sets U; δ(ε) by Theorem 5, its floor,
  ε at δ, censoring, and attackers who know only the top-N n-grams. Exact for each sampled
  U; the worst case over all U is intractable, so the maximum over the sampled U is a
  lower bound on it.
"""

from __future__ import annotations

import math
import time
from typing import TYPE_CHECKING

import numpy as np
from scipy import stats as scipy_stats

from gate.audits.base import Audit, AuditContext
from gate.audits.membership import scorer_plugin, total_leak_message
from gate.digests import sha256_tree
from gate.errors import AuditError
from gate.metrics import LBF_PAPER, ONE_RUN_PAPER, Metric, MetricSet, MetricSpec
from gate.plugins import AUDITS
from gate.policy.checks import CheckSpec
from gate.policy.models import ProfileAudit
from gate.profile.ngram_lbf import (
    LBF_FLOOR,
    LBF_METRICS,
    corpus_lbf,
    lbf_specs,
    synthetic_lbf,
)
from gate.results import AuditResult, Curve
from gate.stats._validate import split_alpha
from gate.stats.one_run import (
    one_run_delta,
    one_run_delta_from_scores,
    one_run_epsilon,
    total_leak_passes,
)
from gate.stats.roc import roc_auc
from gate.stats.surprisal import median_difference, threshold_likelihood_ratio

if TYPE_CHECKING:
    from pathlib import Path

    from gate.data.bundle import Bundle

_ONE_RUN = f"{ONE_RUN_PAPER}, Prop. 5.1 and App. D, inverted in delta"
_SURPRISAL = f"{LBF_PAPER}, §6"
_LOWER = (
    "lower confidence bound over the random assignment of users: level 1 - alpha/A for one "
    "attack's value (A attacks, Bonferroni), 1 - alpha for the audit-wide value, the worst "
    "of the A"
)
ATTACK_CHART = "profile: lower bounds on the minimal delta by attack"
LR_CHART = "profile: surprisal threshold likelihood ratio"
CURVE_POINTS = 81


def _spec(name: str, meaning: str, leak_if: str, estimator: str, confidence: str, kind: str):
    return MetricSpec(name, meaning, leak_if, estimator, confidence, kind=kind)  # type: ignore[arg-type]


DELTA = _spec(
    "delta_at_target_epsilon",
    "lower bound on the minimal delta at the policy's target epsilon",
    "higher",
    _ONE_RUN,
    _LOWER,
    "delta",
)
EPSILON = _spec(
    "epsilon_at_delta",
    "lower bound on epsilon at the audit's delta",
    "higher",
    _ONE_RUN,
    _LOWER,
    "epsilon",
)
ATTACK_METRICS = (
    _spec("users_evaluated", "users whose guesses were counted", "neither", _ONE_RUN, "", "count"),
    DELTA,
    EPSILON,
    _spec(
        "auc",
        "ROC AUC of the attack's scores, train vs holdout users",
        "higher",
        "Mann-Whitney U",
        "point estimate",
        "auc",
    ),
    _spec(
        "auc_p_value",
        "one-sided p-value of AUC = 1/2 under random membership",
        "lower",
        "gate.stats.roc.auc_p_value",
        "p-value",
        "p_value",
    ),
)
SURPRISAL_METRICS = (
    _spec(
        "median_difference",
        "median per-user surprisal (nats), holdout minus train",
        "higher",
        f"{_SURPRISAL}.3, Table 2",
        "point estimate",
        "other",
    ),
    _spec(
        "likelihood_ratio_q90",
        "LR(tau) = P(S > tau | holdout) / P(S > tau | train) at tau = train's 90th percentile",
        "higher",
        f"{_SURPRISAL}.3, Figure 16",
        "point estimate",
        "other",
    ),
    _spec(
        "control_p_value",
        "two-sided Mann-Whitney p-value between two random halves of train users",
        "neither",
        f"{_SURPRISAL}.1 (control)",
        "p-value; the audit errors below surprisal.control_alpha",
        "p_value",
    ),
)


@AUDITS.register("profile")
class ProfileAuditRunner(Audit[ProfileAudit]):
    name = "profile"
    config_model = ProfileAudit
    metrics = MetricSet([*ATTACK_METRICS, *SURPRISAL_METRICS, *LBF_METRICS])
    citation = f"{_ONE_RUN}; {LBF_PAPER}, §3-§6"

    def declared_metrics(self, config: ProfileAudit) -> MetricSet:
        return MetricSet(
            [
                *ATTACK_METRICS,
                *SURPRISAL_METRICS,
                *lbf_specs(config.ngram_lbf),
            ]
        )

    def checks(self, config: ProfileAudit) -> list[CheckSpec]:
        t = config.thresholds
        checks = []
        if t.max_delta is not None:
            checks.append(
                CheckSpec.at_most(
                    self.name,
                    DELTA,
                    None,
                    t.max_delta,
                    f"worst attack: lower bound on the minimal delta at epsilon = "
                    f"{t.target_epsilon:g}",
                )
            )
        if t.max_delta_floor is not None:
            checks.append(
                CheckSpec.at_most(
                    self.name,
                    LBF_FLOOR,
                    None,
                    t.max_delta_floor,
                    "n-gram mechanism: delta floor, worst sampled source set",
                )
            )
        return checks

    def run(self, bundle: Bundle, config: ProfileAudit, context: AuditContext) -> AuditResult:
        target = config.thresholds.target_epsilon
        attacks = len(config.scorers) + (bundle.model_dir is not None)
        if config.surprisal.required and bundle.model_dir is None:
            raise AuditError("profile.surprisal.required is true but no --model was given")
        if config.thresholds.max_delta is not None and attacks == 0:
            raise AuditError(
                "profile.thresholds.max_delta is set but there is no attack to measure it: "
                "list scorers or give --model"
            )
        if attacks and not math.isclose(context.p, 0.5):
            raise AuditError(
                f"the profile audit's delta bound needs membership.p = 0.5; found {context.p}"
            )
        if attacks and context.p_interval is not None:
            raise AuditError(
                "the profile audit's delta bound needs membership.p = 0.5 known; the split "
                "is declared and its p is an interval (membership.declared_split.p)"
            )
        level = split_alpha(context.alpha, parts=attacks, split="attacks")
        declared = self.declared_metrics(config)
        labels = bundle.user_is_train
        metrics: list[Metric] = []
        statements: dict[str, str] = {}
        curves: list[Curve] = []
        details: dict[str, object] = {"level_per_attack": level, "attacks": attacks}
        worst = {DELTA.name: 0.0, EPSILON.name: 0.0}
        for scorer_config in config.scorers:
            started = time.perf_counter()
            name = scorer_config.scorer
            scores = scorer_plugin(name).user_scores(bundle, scorer_config, context.features)
            values, curve, info = self._attack(name, scores, labels, config, context, level)
            info["seconds"] = round(time.perf_counter() - started, 3)
            metrics += declared.values(name, values)
            curves.append(curve)
            details[name] = info
            statements[name] = self._statement(values, config, level)
            for key in worst:
                worst[key] = max(worst[key], values[key])
        if bundle.model_dir is not None:
            values, attack_curves, info = self._surprisal(
                bundle, bundle.model_dir, config, context, level
            )
            metrics += declared.values("surprisal", values)
            curves += attack_curves
            details["surprisal"] = info
            statements["surprisal"] = (
                f"Released model {bundle.model_dir.name}: median per-user surprisal "
                f"holdout minus train {values['median_difference']:.3g} nats; control "
                f"p = {values['control_p_value']:.3g}. "
            ) + self._statement(values, config, level)
            for key in worst:
                worst[key] = max(worst[key], values[key])
        if attacks:
            metrics += declared.values(None, worst)
            statements["all attacks"] = self._worst_statement(
                worst, config, attacks=attacks, level=level, alpha=context.alpha
            )
        if config.ngram_lbf.enabled:
            lbf = config.ngram_lbf
            corpus = corpus_lbf(
                bundle,
                lbf,
                target=target,
                delta=config.delta,
                rng=context.rng,
                progress=context.progress,
                declared=declared,
            )
            metrics += corpus.metrics
            metrics += declared.values(None, {LBF_FLOOR.name: corpus.worst_floor})
            curves += corpus.curves
            details["ngram_lbf"] = corpus.details
            censored = (
                f", with every {lbf.n}-gram counted at most {lbf.censor_count} times merged "
                "into one token (the censored mechanism's floor, not the plain one's)"
                if lbf.censor_count
                else ""
            )
            size = corpus.worst_floor_size
            group = "one user" if size == 1 else f"a group of {size} users"
            floor = (
                f"the worst source set evaluated (|U| = {size}) gives delta floor "
                f"{corpus.worst_floor:.3g}: the n-gram mechanism is not (epsilon, delta)-DP "
                f"for {group} for any finite epsilon with a smaller delta"
                if corpus.worst_floor > 0
                else "no source set evaluated gives a delta floor above 0 (no evidence of "
                "leakage, which is not evidence of safety)"
            )
            statements["ngram_lbf"] = (
                f"Sampling one {lbf.n}-gram of the train corpus{censored}: {floor}. "
                "Frequencies are exact; the source sets are random draws and the users with "
                "the most n-grams of their own, so the worst case over all U of a size can "
                "only be larger."
            )
            if lbf.generator.enabled:
                synthetic = synthetic_lbf(
                    bundle,
                    lbf,
                    target=target,
                    delta=config.delta,
                    rng=context.rng,
                    progress=context.progress,
                    declared=declared,
                )
                metrics += synthetic.metrics
                curves += synthetic.curves
                details["synthetic_lbf"] = synthetic.details
                statements["synthetic_lbf"] = (
                    f"Releases of {lbf.generator.generator} trained with and without random "
                    "source sets: one release each, so these are point estimates that include "
                    "sampling noise (reported, never gated)."
                )
        return AuditResult(
            metrics=tuple(metrics), statements=statements, curves=tuple(curves), details=details
        )

    @staticmethod
    def _claims(values: dict[str, float], config: ProfileAudit) -> str | None:
        """What the bounds show, each only where it is above 0 (a bound of 0 shows nothing:
        "for any delta < 0" had been printed)."""
        target = config.thresholds.target_epsilon
        claims = []
        if values[DELTA.name] > 0:
            claims.append(f"at epsilon = {target:g} for any delta < {values[DELTA.name]:.3g}")
        if values[EPSILON.name] > 0:
            claims.append(
                f"at delta = {config.delta:g} for any epsilon < {values[EPSILON.name]:.4f}"
            )
        return ", nor ".join(claims) if claims else None

    def _worst_statement(
        self,
        worst: dict[str, float],
        config: ProfileAudit,
        *,
        attacks: int,
        level: float,
        alpha: float,
    ) -> str:
        head = f"Worst of {attacks} attack(s), each at level {level:.3g}: "
        claims = self._claims(worst, config)
        if claims is None:
            return (
                head + "no attack rejects: no evidence of leakage, which is not evidence of safety."
            )
        return head + (
            f"with probability >= {1 - alpha:g} no attack's bound is wrong, so the release "
            f"is not (epsilon, delta)-DP {claims}."
        )

    def _statement(self, values: dict[str, float], config: ProfileAudit, level: float) -> str:
        claims = self._claims(values, config)
        if claims is None:
            target = config.thresholds.target_epsilon
            return (
                f"The one-run test does not reject (epsilon = {target:g}, delta = 0) at level "
                f"{level:.3g}: no evidence of leakage, which is not evidence of safety."
            )
        return (
            f"With probability >= {1 - level:.4g} over the random assignment of users, the "
            f"release is not (epsilon, delta)-DP {claims}. Lower bounds: they can show "
            "leakage, never its absence."
        )

    @staticmethod
    def _attack(
        name: str,
        scores: np.ndarray,
        labels: np.ndarray,
        config: ProfileAudit,
        context: AuditContext,
        level: float,
    ) -> tuple[dict[str, float], Curve, dict[str, object]]:
        target = config.thresholds.target_epsilon
        roc = roc_auc(scores=scores, is_train=labels, rng=context.rng)
        outcome = one_run_delta_from_scores(
            scores=scores, is_train=labels, rng=context.rng, epsilon=target, alpha=level
        )
        max_delta = config.thresholds.max_delta
        if max_delta is not None:

            def delta_lower(
                scores: np.ndarray, is_train: np.ndarray, rng: np.random.Generator
            ) -> float:
                return one_run_delta_from_scores(
                    scores=scores, is_train=is_train, rng=rng, epsilon=target, alpha=level
                ).delta_lower

            total_leak = total_leak_message(
                total_leak_passes(
                    delta_lower,
                    threshold=max_delta,
                    alpha=level,
                    records=labels.size,
                    members=int(labels.sum()),
                ),
                bound=f"the delta bound at epsilon = {target:g}",
                threshold_name="max_delta",
                threshold=max_delta,
                alpha=level,
            )
            if total_leak is not None:
                raise AuditError(
                    f"{name}: a check that a total leak would pass, with {labels.size} users "
                    f"at level {level:.3g}: {total_leak}. Lower max_delta or audit more users"
                )
        kp, km, v = outcome.k_plus, outcome.k_minus, outcome.correct
        m = max(outcome.evaluated, kp + km)
        guesses = {"k_plus": kp, "k_minus": km, "correct": v, "alpha": level, "scored": m}
        if kp + km:
            eps_at = one_run_epsilon(
                k_plus=kp, k_minus=km, correct=v, alpha=level, delta=config.delta, scored=m
            )
            eps_zero = one_run_epsilon(k_plus=kp, k_minus=km, correct=v, alpha=level)
        else:
            eps_at = eps_zero = 0.0
        top = max(2.0 * target, 1.0, 1.25 * eps_zero if math.isfinite(eps_zero) else 10.0)
        grid = np.linspace(0.0, min(top, 50.0), CURVE_POINTS)
        deltas = (
            np.asarray(
                one_run_delta(epsilon=grid, k_plus=kp, k_minus=km, correct=v, alpha=level, scored=m)
            )
            if kp + km
            else np.zeros_like(grid)
        )
        markers = () if max_delta is None else ((target, max_delta, "policy: max delta at target"),)
        curve = Curve(
            chart=ATTACK_CHART,
            subject=name,
            x=tuple(grid.tolist()),
            y=tuple(deltas.tolist()),
            x_label="epsilon",
            y_label=f"delta: lower confidence bound (level {level:.3g})",
            label=f"{name} (delta at {target:g}: {outcome.delta_lower:.2g})",
            log_y=True,
            markers=markers,
        )
        values = {
            "users_evaluated": float(outcome.evaluated),
            DELTA.name: outcome.delta_lower,
            EPSILON.name: eps_at,
            "auc": roc.auc,
            "auc_p_value": roc.p_value,
        }
        info: dict[str, object] = {
            "one_run": {
                **guesses,
                "evaluated": outcome.evaluated,
                "epsilon_at_delta_0": eps_zero,
            },
            "auc_p_value_method": roc.p_value_method,
        }
        return values, curve, info

    def _surprisal(
        self,
        bundle: Bundle,
        model_dir: Path,
        config: ProfileAudit,
        context: AuditContext,
        level: float,
    ) -> tuple[dict[str, float], list[Curve], dict[str, object]]:
        from gate.features.causal_lm import load_causal_lm, record_surprisal

        started = time.perf_counter()
        with context.progress.step("loading the released model"):
            lm = load_causal_lm(model_dir)
        settings = config.surprisal
        per_record = record_surprisal(
            lm,
            bundle.source["text"].tolist(),
            batch_size=settings.batch_size,
            max_tokens=settings.max_tokens,
            progress=context.progress,
            description="surprisal of train and holdout records",
        )
        users = bundle.user_codes
        per_user = np.bincount(users, weights=per_record) / np.bincount(users)
        labels = bundle.user_is_train
        if np.ptp(per_user) == 0:  # scipy's control test then says p = 1, not "no answer"
            raise AuditError(
                f"surprisal: every user has the same surprisal ({per_user[0]:.3g} nats), so "
                "the model tells no one apart and the attack measures nothing (records of "
                "one token under a tokenizer without a BOS token have no scored token)"
            )
        train, holdout = per_user[labels], per_user[~labels]
        halves = context.rng.permutation(train.size)
        control = scipy_stats.mannwhitneyu(
            train[halves[: train.size // 2]], train[halves[train.size // 2 :]]
        ).pvalue
        if not np.isfinite(control):
            raise AuditError(
                f"surprisal control: no p-value for two halves of {train.size} train users "
                "(too few users, or no variation in surprisal)"
            )
        if control < settings.control_alpha:
            raise AuditError(
                f"surprisal control failed: two random halves of train users differ (p = "
                f"{control:.3g} < control_alpha = {settings.control_alpha:g}); the model or "
                "the split is broken, so no membership conclusion is drawn"
            )
        values, curve, info = self._attack("surprisal", -per_user, labels, config, context, level)
        tau = np.quantile(train, 0.9)
        values["median_difference"] = median_difference(included=train, excluded=holdout)
        values["likelihood_ratio_q90"] = float(
            threshold_likelihood_ratio(
                included=train, excluded=holdout, thresholds=np.array([tau])
            )[0]
        )
        values["control_p_value"] = float(control)
        taus = np.quantile(per_user, np.linspace(0.05, 0.95, 19))
        ratios = threshold_likelihood_ratio(included=train, excluded=holdout, thresholds=taus)
        finite = np.isfinite(ratios)
        lr_curve = Curve(
            chart=LR_CHART,
            subject="surprisal",
            x=tuple(taus[finite].tolist()),
            y=tuple(ratios[finite].tolist()),
            x_label="per-user surprisal threshold tau (nats)",
            y_label="LR(tau) = P(S > tau | holdout) / P(S > tau | train)",
            log_y=True,
        )
        info.update(
            {
                "model": {
                    "directory": str(model_dir),
                    "kind": lm.kind,
                    "sha256": sha256_tree(model_dir),
                },
                "records_scored": int(per_record.size),
                "seconds": round(time.perf_counter() - started, 3),
            }
        )
        return values, [curve, lr_curve], info
