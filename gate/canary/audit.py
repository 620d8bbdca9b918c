"""The canary audit: plant canaries, train the generator with a random half of them, sample
a release and measure from the synthetic text alone which half was trained on.

Meeus et al. (2025), *The Canary's Echo: Auditing Privacy Risks of LLM-Generated Synthetic
Text*, §3 (signals, canary design) and Appendix A (RMIA); Steinke, Nasr and Jagielski
(2023), *Privacy Auditing with One (1) Training Run* (each canary is included independently
with probability 1/2: exactly the one-run setting, so the ε lower bound is valid for the
training pipeline). See docs/methods.md §8.

Cost: 1 base-LM training, 1 target training and ``references`` reference trainings.
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from pydantic import ValidationError

from gate.audits.base import Audit, AuditContext, checks_statement
from gate.audits.membership import (
    STANDARD_FPRS,
    auc_chance,
    refuse_score_checks_that_cannot_fail,
    reported_fprs,
    score_checks,
    score_statistics,
    tpr_spec,
)
from gate.canary.craft import CanarySet, craft_canaries
from gate.canary.signals import release_signals
from gate.errors import AuditError, InputError
from gate.generators import resolve_generator
from gate.generators.base import (
    DpSgdSpec,
    FitReport,
    Generator,
    GeneratorConfig,
    GeneratorStream,
    generator_stream_seed,
)
from gate.generators.reference import ReferenceConfig
from gate.metrics import ONE_RUN_PAPER, Metric, MetricSet, MetricSpec
from gate.plugins import AUDITS
from gate.policy.checks import CheckSpec
from gate.policy.loader import setting_error
from gate.policy.models import CanaryAudit
from gate.redaction import feature_hash, mask
from gate.results import AuditResult, Curve, Witness
from gate.stats.canary import balanced_reference_membership, member_flags, rmia_log_scores

if TYPE_CHECKING:
    from gate.data.bundle import Bundle
    from gate.progress import Progress

RMIA = "bigram_rmia"
_ECHO = "Meeus et al. (2025), The Canary's Echo, §3.1.2, §3.2, App. A"
_ONE_RUN = f"{ONE_RUN_PAPER}, Thm 3.1"
_LOWER = "lower confidence bound, level 1 - alpha, over the random inclusion of the canaries"

BASE_METRICS = (
    MetricSpec("canaries_scored", "canaries given a score", "neither", _ECHO, kind="count"),
    MetricSpec(
        "auc",
        "ROC AUC of the signal, member vs non-member canaries",
        "higher",
        f"{_ECHO}; Mann-Whitney U",
        kind="auc",
    ),
    MetricSpec(
        "auc_p_value",
        "one-sided p-value of AUC = 1/2 under random canary inclusion",
        "lower",
        "gate.stats.roc.auc_p_value",
        kind="p_value",
    ),
    MetricSpec(
        "epsilon_lower",
        "one-run lower bound on epsilon of the training pipeline, over the canaries",
        "higher",
        _ONE_RUN,
        _LOWER,
        kind="epsilon",
    ),
)


@dataclass(frozen=True)
class CanaryGenerators:
    """The audited generator (class and validated settings) and the base LM's settings."""

    generator_cls: type[Generator[Any]]
    generator_config: GeneratorConfig
    base_config: ReferenceConfig


def _validated(model: type[Any], data: dict[str, Any], path: tuple[str, ...]) -> Any:
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise setting_error(exc, model, data, path=path) from None


def canary_generators(
    config: CanaryAudit, *, where: tuple[str, ...] = ("audits", "canary")
) -> CanaryGenerators:
    """Resolve and validate the generator and base-LM settings of a canary audit.

    Raises:
        InputError: unknown generator (named by YAML path); SettingError: settings the
            generator's model rejects (exit 2).
    """
    at = ".".join(where)
    if config.generator is None:
        raise InputError(f"{at}.generator: not set (the policy loader fills it)")
    cls = resolve_generator(config.generator, where=f"{at}.generator")
    return CanaryGenerators(
        generator_cls=cls,
        generator_config=_validated(
            cls.config_model, config.generator_config or {}, (*where, "generator_config")
        ),
        base_config=_validated(
            ReferenceConfig, config.base_lm.config, (*where, "base_lm", "config")
        ),
    )


def subjects(config: CanaryAudit) -> list[str]:
    """The signals reported: the configured ones, and RMIA on the 2-gram signal when there
    are reference releases."""
    out: list[str] = list(config.signals)
    if config.references and "bigram" in config.signals:
        out.append(RMIA)
    return out


def insertion_map_sha256(canaries: tuple[str, ...], members: np.ndarray) -> str:
    """Fingerprint of which canary was trained on: sha256 of ``[[text, member], ...]``."""
    pairs = [[t, bool(m)] for t, m in zip(canaries, members, strict=True)]
    return hashlib.sha256(json.dumps(pairs, ensure_ascii=False).encode("utf-8")).hexdigest()


def _fit_summary(fit: FitReport) -> dict[str, Any]:
    """A training's record. A private training's loss is an exact statistic of the train
    users its ε does not cover: not recorded (as for a remediation round). Its privacy
    unit is an example: a train user, or one of the ``n_rep`` copies of a canary."""
    private = fit.privacy is not None
    return {
        "epochs": fit.epochs,
        "steps": fit.steps,
        "examples": fit.examples,
        "seconds": round(fit.seconds, 2),
        "final_loss": fit.losses[-1] if fit.losses and not private else None,
        "privacy": (
            None
            if fit.privacy is None
            else {**fit.privacy.as_dict(), "unit": "example (a train user or a canary copy)"}
        ),
    }


@dataclass(frozen=True)
class _Release:
    texts: list[str]
    fit: FitReport


def _train_and_sample(
    generators: CanaryGenerators,
    config: CanaryAudit,
    users: list[list[str]],
    canaries: tuple[str, ...],
    included: np.ndarray,
    *,
    seed: int,
    size: int,
    label: str,
    progress: Progress,
) -> _Release:
    """Train a fresh generator on the train users plus ``n_rep`` copies (each its own
    training example) of every included canary, and sample ``size`` records."""
    planted = [[c] for c, keep in zip(canaries, included, strict=True) if keep]
    examples = users + [c for c in planted for _ in range(config.n_rep)]
    privacy = None
    if config.privacy is not None:
        p = config.privacy
        privacy = DpSgdSpec(
            epsilon=p.epsilon,
            delta=p.delta if p.delta is not None else 1.0 / len(examples),
            max_grad_norm=p.max_grad_norm,
            accountant=p.accountant,
            # an audit's model is never released: reproducible noise
            noise_seed=generator_stream_seed(seed, GeneratorStream.NOISE),
        )
    generator = generators.generator_cls(generators.generator_config, seed=seed)
    with progress.step(f"training the {label} generator ({len(examples)} examples)"):
        fit = generator.fit(examples, epochs=config.epochs or 1, privacy=privacy, progress=progress)
    with progress.step(f"sampling the {label} release ({size} records)"):
        texts = generator.sample(size, progress=progress)
    if len(texts) != size:
        raise AuditError(f"the generator returned {len(texts)} records; {size} were asked for")
    return _Release(texts=texts, fit=fit)


def _shown(canaries: CanarySet, i: int, *, redact: bool) -> str:
    """A canary as evidence. Redacted, every word is masked: the prefix is a real
    canary-source record's, and the suffix comes from a base LM trained on those records,
    which can echo them."""
    text = canaries.texts[i]
    return mask(text, max_tokens=len(text.split())) if redact else text


@AUDITS.register("canary")
class CanaryAuditRunner(Audit[CanaryAudit]):
    name = "canary"
    config_model = CanaryAudit
    metrics = MetricSet([*BASE_METRICS, *(tpr_spec(f) for f in STANDARD_FPRS)])
    citation = f"{_ECHO}; {_ONE_RUN}"

    @staticmethod
    def _fprs(config: CanaryAudit) -> list[float]:
        return reported_fprs(config.thresholds.tpr_at_fpr)

    def declared_metrics(self, config: CanaryAudit) -> MetricSet:
        return MetricSet([*BASE_METRICS, *(tpr_spec(f) for f in self._fprs(config))])

    def checks(self, config: CanaryAudit) -> list[CheckSpec]:
        return score_checks(
            self.name, self.declared_metrics(config), subjects(config), config.thresholds
        )

    def run(self, bundle: Bundle, config: CanaryAudit, context: AuditContext) -> AuditResult:
        started = time.perf_counter()
        generators = canary_generators(config)
        if bundle.canary_source is None or bundle.canary_source.empty:
            raise AuditError(
                "the canary audit needs canary-source records (neither train nor holdout): "
                "split with `gate split --canary-fraction` or give --canary-source FILE"
            )
        refuse_score_checks_that_cannot_fail(
            config.thresholds,
            records=config.canaries,
            train=None,
            holdout=None,
            alpha=context.alpha,
            p=0.5,
            delta=config.delta,
            selection=config.threshold_selection,
            unit="canaries",
        )
        progress = context.progress
        rng = context.rng
        seeds = [int(s) for s in rng.integers(0, 2**31 - 1, size=2)]  # base LM, target
        canaries = craft_canaries(
            bundle.canary_source,
            count=config.canaries,
            prefix_words=config.prefix_words,
            total_words=config.total_words,
            target_perplexity=config.target_perplexity,
            base_config=generators.base_config,
            base_epochs=config.base_lm.epochs,
            seed=seeds[0],
            rng=rng,
            progress=progress,
        )
        crafted = time.perf_counter()
        n = len(canaries.texts)
        members = member_flags(n, rng=rng)
        if members.all() or not members.any():
            raise AuditError(
                f"all {n} canaries fell on one side of the coin flip; use more canaries"
            )
        train = bundle.train.groupby("user_id", sort=True)["text"].agg(list)
        users = [list(texts) for texts in train]
        size = config.sample_size or len(bundle.train)
        target = _train_and_sample(
            generators,
            config,
            users,
            canaries.texts,
            members,
            seed=seeds[1],
            size=size,
            label="target",
            progress=progress,
        )
        reference_members = (
            balanced_reference_membership(n, references=config.references, rng=rng)
            if config.references
            else np.zeros((0, n), dtype=bool)
        )
        seeds += [int(s) for s in rng.integers(0, 2**31 - 1, size=config.references)]
        references = [
            _train_and_sample(
                generators,
                config,
                users,
                canaries.texts,
                reference_members[m],
                seed=seeds[2 + m],
                size=size,
                label=f"reference {m + 1}/{config.references}",
                progress=progress,
            )
            for m in range(config.references)
        ]
        trained = time.perf_counter()
        with progress.step("canary signals from the release"):
            found = release_signals(
                canaries.texts,
                target.texts,
                signals=config.signals,
                top_k=config.top_k,
                embedding_model=config.embedding_model,
                embedding_cache_dir=config.embedding_cache_dir,
                progress=progress,
            )
            values = dict(found.values)
            if RMIA in subjects(config):
                reference_bigram = np.stack(
                    [
                        release_signals(
                            canaries.texts, r.texts, signals=("bigram",), top_k=config.top_k
                        ).values["bigram"]
                        for r in references
                    ]
                )
                values[RMIA] = rmia_log_scores(target=values["bigram"], references=reference_bigram)
        if all(np.ptp(v) == 0 for v in values.values()):  # a review: one line passed
            distinct = len(set(target.texts))
            raise AuditError(
                f"every signal scored all {members.size} canaries alike: the release of "
                f"{len(target.texts)} records ({distinct} distinct) gives nothing to tell "
                "them apart by, so the audit would pass whatever the training did; check "
                "the generator's sampling"
            )
        return self._result(
            config,
            context,
            canaries=canaries,
            members=members,
            values=values,
            nearest=found.nearest_record,
            target=target,
            references=references,
            reference_members=reference_members,
            seeds=seeds,
            seconds={
                "crafting": round(crafted - started, 2),
                "training_and_sampling": round(trained - crafted, 2),
                "signals": round(time.perf_counter() - trained, 2),
            },
        )

    def _result(
        self,
        config: CanaryAudit,
        context: AuditContext,
        *,
        canaries: CanarySet,
        members: np.ndarray,
        values: dict[str, np.ndarray],
        nearest: np.ndarray,
        target: _Release,
        references: list[_Release],
        reference_members: np.ndarray,
        seeds: list[int],
        seconds: dict[str, float],
    ) -> AuditResult:
        declared = self.declared_metrics(config)
        metrics: list[Metric] = []
        statements: dict[str, str] = {}
        curves: list[Curve] = []
        per_signal: dict[str, Any] = {}
        for name in subjects(config):
            scores = values[name]
            stats = score_statistics(
                scores=scores,
                is_member=members,
                rng=context.rng,
                alpha=context.alpha,
                p=0.5,
                delta=config.delta,
                selection=config.threshold_selection,
                fprs=self._fprs(config),
            )
            roc, one_run = stats.roc, stats.one_run
            scored = {"canaries_scored": float(scores.size), **stats.values}
            metrics += declared.values(name, scored)
            curves.append(
                stats.roc_curve(
                    chart="canary: ROC by signal",
                    subject=name,
                    x_label="false-positive rate (non-member canaries called members)",
                )
            )
            per_signal[name] = {
                "one_run": stats.one_run_details(delta=config.delta),
                "auc_p_value_method": roc.p_value_method,
            }
            auc = f"AUC {roc.auc:.4g} (one-sided p = {roc.p_value:.3g}). "
            auc += auc_chance(
                scores=scores, is_member=members, thresholds=config.thresholds, rng=context.rng
            )
            if np.ptp(scores) == 0:
                auc = (
                    f"All {scores.size} canaries scored {float(scores[0]):g}: this signal had "
                    f"nothing to tell them apart by. {auc}"
                )
            if config.n_rep == 0:
                auc = (
                    "Null control (n_rep = 0): no canary was planted, so these numbers "
                    "measure the audit's own false positives and show nothing about the "
                    f"pipeline. {auc}"
                )
            statements[name] = (
                f"{auc}With probability >= {1 - context.alpha:g} over the random inclusion of "
                f"the canaries, the training pipeline is not (epsilon, {config.delta:g})-DP "
                f"for any epsilon < {one_run.epsilon_lower:.4f} (per canary of {config.n_rep} "
                "copies). A lower bound: it can show leakage, never its absence."
                if one_run.epsilon_lower > 0
                else f"{auc}The one-run bound does not reject privacy at alpha = "
                f"{context.alpha:g}: no evidence of leakage through the release, which is "
                "not evidence of safety."
            )
        primary = RMIA if RMIA in values else subjects(config)[0]
        order = np.argsort(-values[primary], kind="stable")
        top = [i for i in order if members[i]][: context.max_witnesses]
        witnesses = tuple(
            Witness(
                feature_class="canary",
                kind=primary,
                feature=_shown(canaries, i, redact=context.redact),
                feature_hash=feature_hash(canaries.texts[i]),
                source_record_id=canaries.source_record_ids[i],
                user_id=f"canary-{i}",
                split="member",
                synthetic_record_id=f"release:{int(nearest[i])}",
                score=float(values[primary][i]),
            )
            for i in top
        )
        details = {
            "canaries": {
                "count": int(members.size),
                "members": int(members.sum()),
                "n_rep": config.n_rep,
                "prefix_words": config.prefix_words,
                "total_words": config.total_words,
                "target_perplexity": config.target_perplexity,
                "temperature": canaries.search.temperature,
                "temperature_search_evaluations": canaries.search.evaluations,
                "suffixes_drawn": canaries.suffixes_drawn,
                "perplexity_range": [
                    float(canaries.perplexities.min()),
                    float(canaries.perplexities.max()),
                ],
                "insertion_map_sha256": insertion_map_sha256(canaries.texts, members),
                "set": [
                    {
                        "id": f"canary-{i}",
                        "text": _shown(canaries, i, redact=context.redact),
                        "member": bool(members[i]),
                        "perplexity": round(float(canaries.perplexities[i]), 4),
                        "source_record_id": canaries.source_record_ids[i],
                    }
                    for i in range(members.size)
                ],
            },
            "seeds": {
                "base_lm": seeds[0],
                "target": seeds[1],
                "references": seeds[2:],
                "audit_entropy": context.seed_entropy,
                "audit_spawn_key": list(context.seed_spawn_key),
            },
            "generator": config.generator,
            "release_records": len(target.texts),
            "trainings": 2 + len(references),
            "base_lm": _fit_summary(canaries.base_lm),
            "target": _fit_summary(target.fit),
            "references": [
                {**_fit_summary(r.fit), "members": int(reference_members[m].sum())}
                for m, r in enumerate(references)
            ],
            "signals": per_signal,
            "seconds": seconds,
        }
        verdict = checks_statement(self.checks(config), alpha=context.alpha)
        if verdict is not None:
            statements["checks"] = verdict
        return AuditResult(
            metrics=tuple(metrics),
            witnesses=witnesses,
            statements=statements,
            curves=tuple(curves),
            details=details,
        )
