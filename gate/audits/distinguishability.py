"""Distinguishability audit for rewrite releases (TeDA).

Li, W., Grivet Sébert, A., Xu, Q., McIver, A., Dras, M. (2026). *Beyond Theoretical Bounds:
Empirical Privacy Loss Calibration for Text Rewriting Under Local Differential Privacy*:
the candidate-set game of §3.1-3.3, transition sampling of App. C and the estimator of
App. A (eqs. 10-12). Each trial draws a candidate set of k source records that have a
rewrite in the release, shows the attack the rewrite of one of them (uniformly chosen),
and counts a success when the attack picks that record. Sets are disjoint (a record and
its rewrite serve in one trial only), so trials are independent and at most pool/k.
``K`` successes in ``T`` trials
give ``ε_emp = ln((k-1)(p̂₀ - δ)/(1 - p̂₀))`` at the Clopper-Pearson lower bound ``p̂₀``.

Attacks are plug-ins (:data:`gate.plugins.REWRITE_ATTACKS`): ``embedding`` (nearest in the
sentence-embedding space), ``lexical`` (word 1-2-gram TF-IDF cosine, scikit-learn) and
``judge`` (any callable, e.g. a local transformers model, named in the policy).
"""

from __future__ import annotations

import importlib
import math
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from gate.audits.base import Audit, AuditContext
from gate.errors import AuditError
from gate.metrics import Metric, MetricSet, MetricSpec
from gate.plugins import AUDITS, REWRITE_ATTACKS
from gate.policy.checks import CheckSpec
from gate.policy.models import DistinguishabilityAudit, SemanticFeatures
from gate.redaction import feature_hash, mask, release_record_hash, user_hash
from gate.registry import PluginUnavailableError
from gate.results import AuditResult, Witness
from gate.stats._validate import split_alpha
from gate.stats.distinguishability import (
    distinguishability_epsilon,
    pick_candidates,
    transition_candidate_sets,
)

if TYPE_CHECKING:
    from gate.audits.feature_store import FeatureStore
    from gate.data.bundle import Bundle
    from gate.progress import Progress

_TEDA = "Li et al. (2026), TeDA, App. A eq. 11"
_CONF = (
    "lower confidence bound: the lower end of the two-sided Clopper-Pearson interval at "
    "alpha_conf / (lambdas x attacks) (alpha_conf null: 2 x the policy's alpha)"
)
CHART = "distinguishability: empirical epsilon by attack and lambda"

GAME_METRICS = (
    MetricSpec("trials", "trials T", "neither", _TEDA, kind="count"),
    MetricSpec("success_rate", "K/T, share of trials the attack re-identified", "higher", _TEDA),
    MetricSpec(
        "success_lower",
        "Clopper-Pearson lower bound on the success probability",
        "higher",
        _TEDA,
        _CONF,
        kind="probability",
    ),
    MetricSpec(
        "epsilon_emp",
        "empirical epsilon of the game, floored at 0",
        "higher",
        _TEDA,
        _CONF,
        kind="epsilon",
        chart=CHART,
    ),
    MetricSpec(
        "epsilon_ceiling",
        "largest epsilon_emp this many trials can show (every trial a success)",
        "neither",
        _TEDA,
        _CONF,
        chart=CHART,
    ),
)
WORST = MetricSpec(
    "max_epsilon_emp",
    "largest empirical epsilon over every lambda and attack",
    "higher",
    _TEDA,
    _CONF + "; the lower bounds of all games hold together with probability >= 1 - alpha_conf / 2",
    kind="epsilon",
)


@dataclass
class RewriteGame:
    """The records of the game: the pool of source records that have a rewrite, their
    rewrites, and lazily their embeddings (shared with the semantic class)."""

    pool_texts: list[str]
    rewrite_texts: list[str]
    pool_rows: np.ndarray  # row of each pool record in bundle.source
    rewrite_rows: np.ndarray  # row of each rewrite in bundle.synthetic
    rewrite_pool: np.ndarray  # pool index each rewrite rewrites
    store: FeatureStore
    embedding: SemanticFeatures
    progress: Progress
    judge: str | None = None
    _cache: dict[str, Any] = field(default_factory=dict)

    @cached_property
    def _index(self) -> Any:
        return self.store.semantic_index(self.embedding, k=1)

    @property
    def pool_embeddings(self) -> np.ndarray:
        return self._index.source[self.pool_rows]

    @property
    def rewrite_embeddings(self) -> np.ndarray:
        return self._index.release[self.rewrite_rows]


class RewriteAttack(ABC):
    """An attack of the game (a plug-in of :data:`REWRITE_ATTACKS`): given each trial's
    rewrite and candidate set, a similarity per candidate (higher = more likely the
    source). The pick is the most similar candidate, ties broken at random."""

    name: ClassVar[str]

    @abstractmethod
    def similarities(
        self, game: RewriteGame, *, rewrites: np.ndarray, candidates: np.ndarray
    ) -> np.ndarray:
        """(T, k) similarities of rewrite ``rewrites[t]`` to pool records ``candidates[t]``."""


@REWRITE_ATTACKS.register("embedding")
class EmbeddingAttack(RewriteAttack):
    """Cosine similarity of sentence embeddings (TeDA §3.2: ``argmin_v d(φ(y), φ(v))``)."""

    name = "embedding"

    def similarities(
        self, game: RewriteGame, *, rewrites: np.ndarray, candidates: np.ndarray
    ) -> np.ndarray:
        pool, rewritten = game.pool_embeddings, game.rewrite_embeddings
        return np.einsum("td,tkd->tk", rewritten[rewrites], pool[candidates], optimize=True)


@REWRITE_ATTACKS.register("lexical")
class LexicalAttack(RewriteAttack):
    """Cosine similarity of word 1-2-gram TF-IDF vectors (scikit-learn), fitted on the
    pool only (a trial's score never depends on other records' rewrites): names, numbers
    and phrases a paraphrase keeps."""

    name = "lexical"

    def similarities(
        self, game: RewriteGame, *, rewrites: np.ndarray, candidates: np.ndarray
    ) -> np.ndarray:
        if "tfidf" not in game._cache:
            from sklearn.feature_extraction.text import TfidfVectorizer

            with game.progress.step("word n-gram TF-IDF of pool and rewrites"):
                vectorizer = TfidfVectorizer(
                    ngram_range=(1, 2),
                    token_pattern=r"(?u)\b\w+\b",
                    sublinear_tf=True,
                    dtype=np.float32,
                )
                pool = vectorizer.fit_transform(game.pool_texts).tocsr()
                rewritten = vectorizer.transform(game.rewrite_texts).tocsr()
            game._cache["tfidf"] = (pool, rewritten)
        pool, rewritten = game._cache["tfidf"]
        chosen = rewritten[rewrites]
        return np.column_stack(
            [
                np.asarray(chosen.multiply(pool[candidates[:, j]]).sum(axis=1)).ravel()
                for j in range(candidates.shape[1])
            ]
        )


def load_judge(spec: str) -> Callable[[str, Sequence[str]], Sequence[float]]:
    """The callable ``module:function`` names.

    Raises:
        PluginUnavailableError: it cannot be imported or is not callable.
    """
    module_name, _, attribute = spec.partition(":")
    try:
        judge = getattr(importlib.import_module(module_name), attribute)
    except (ImportError, AttributeError, ValueError) as exc:
        raise PluginUnavailableError(f"judge {spec!r} cannot be loaded: {exc}") from exc
    if not callable(judge):
        raise PluginUnavailableError(f"judge {spec!r} is not callable")
    return judge


@REWRITE_ATTACKS.register("judge")
class JudgeAttack(RewriteAttack):
    """Any callable ``judge(rewrite, candidates) -> one score per candidate`` (a local
    transformers model asked which candidate the rewrite came from, a reranker, a rule):
    called once per trial, so it may be slow; nothing that needs a model hub ships."""

    name = "judge"

    def similarities(
        self, game: RewriteGame, *, rewrites: np.ndarray, candidates: np.ndarray
    ) -> np.ndarray:
        if game.judge is None:
            raise AuditError("the judge attack needs audits.distinguishability.judge")
        judge = load_judge(game.judge)
        out = np.empty(candidates.shape)
        for t in game.progress.track(
            range(len(rewrites)), total=len(rewrites), description="judge"
        ):
            returned = judge(
                game.rewrite_texts[rewrites[t]], [game.pool_texts[c] for c in candidates[t]]
            )
            expected = f"it must return {candidates.shape[1]} finite scores, one per candidate"
            try:
                scores = np.asarray(returned, dtype=np.float64)
            except (TypeError, ValueError):  # numpy's message would quote what it returned
                kind = type(returned).__name__
                items = (
                    sorted({type(x).__name__ for x in returned})
                    if isinstance(returned, (list, tuple))
                    else []
                )
                raise AuditError(
                    f"judge {game.judge!r} returned a {kind}"
                    + (f" of {', '.join(items)}" if items else "")
                    + f", not numbers; {expected}"
                ) from None
            if scores.shape != (candidates.shape[1],) or not np.isfinite(scores).all():
                raise AuditError(
                    f"judge {game.judge!r} returned scores of shape {scores.shape} "
                    f"({int((~np.isfinite(scores)).sum())} not finite); {expected}"
                )
            out[t] = scores
        return out


def attack_plugin(name: str) -> RewriteAttack:
    cls = REWRITE_ATTACKS.get(name)
    if not (isinstance(cls, type) and issubclass(cls, RewriteAttack)):
        raise PluginUnavailableError(
            f"rewrite attack {name!r} is registered as {cls!r}, which is not a "
            "gate.audits.distinguishability.RewriteAttack"
        )
    return cls()


def game_subject(attack: str, transition_lambda: float) -> str:
    """``embedding_lambda_m10000`` for (embedding, -10000): a name without dots or signs."""
    text = f"{transition_lambda:g}".replace("-", "m").replace(".", "p").replace("+", "")
    return f"{attack}_lambda_{text}"


def _game(bundle: Bundle, config: DistinguishabilityAudit, context: AuditContext) -> RewriteGame:
    synthetic = bundle.synthetic
    if "source_id" not in synthetic.columns:
        raise AuditError(
            "the distinguishability audit needs a release whose records name the source "
            "record they rewrite (a source_id column)"
        )
    source_ids = synthetic["source_id"]
    linked = np.flatnonzero(source_ids.notna().to_numpy())
    row_of = {rid: i for i, rid in enumerate(bundle.source["record_id"].tolist())}
    rows = np.array([row_of[r] for r in source_ids.iloc[linked].tolist()], dtype=np.int64)
    pool_rows, rewrite_pool = np.unique(rows, return_inverse=True)
    if pool_rows.size < config.candidates:
        raise AuditError(
            f"the release rewrites {pool_rows.size} distinct source records; the game needs "
            f"at least candidates = {config.candidates}"
        )
    if config.embedding is None:
        raise AuditError(
            "distinguishability.embedding is unset: build the audit's settings through "
            "gate.policy.Policy, which fills it from the disclosure audit's semantic class"
        )
    return RewriteGame(
        pool_texts=bundle.source["text"].iloc[pool_rows].tolist(),
        rewrite_texts=synthetic["text"].iloc[linked].tolist(),
        pool_rows=pool_rows,
        rewrite_rows=linked,
        rewrite_pool=rewrite_pool,
        store=context.features,
        embedding=config.embedding,
        progress=context.progress,
        judge=config.judge,
    )


# a rewrite at least this cosine-similar to a source record reads as a copy of it
_COPY_SIMILARITY = 0.95
# share of the rewrites copying a source other than theirs above which the ids are wrong
_MISATTRIBUTED_SHARE = 0.1


def _refuse_misattributed_copies(game: RewriteGame) -> int:
    """The rewrites that copy (cosine >= ``_COPY_SIMILARITY``) a pool record other than
    the one their ``source_id`` names, more similar to it than to their own, where that
    record has no near-copy in the pool (a stock reply names no one); an error when
    they are more than ``_MISATTRIBUTED_SHARE`` of the rewrites. The game trusts the ids:
    a verbatim copy of train whose ids were shifted by one record passed it (a review),
    as a pipeline that loses the order of its records would.

    Raises:
        AuditError: too many rewrites copy another record than the one they name.
    """
    from gate.features.embeddings import knn_inner_product

    rewritten, pool = game.rewrite_embeddings, game.pool_embeddings
    nearest, which = knn_inner_product(rewritten, pool, k=1)
    own = np.einsum("td,td->t", rewritten, pool[game.rewrite_pool])
    # a pool record with a near-copy in the pool (a stock reply) names no one: a rewrite
    # into it is no evidence of wrong ids (a review: 25 of 120 correct ids refused so)
    neighbours, _ = knn_inner_product(pool, pool, k=min(2, pool.shape[0]))
    common = neighbours[:, -1] >= _COPY_SIMILARITY
    elsewhere = (
        (nearest[:, 0] >= _COPY_SIMILARITY)
        & (which[:, 0] != game.rewrite_pool)
        & (nearest[:, 0] > own + 0.01)
        & ~common[which[:, 0]]
    )
    found = int(elsewhere.sum())
    if found > _MISATTRIBUTED_SHARE * len(elsewhere):
        raise AuditError(
            f"{found} of {len(elsewhere)} rewrites are near-copies (cosine >= "
            f"{_COPY_SIMILARITY:g}) of a source record other than the one their source_id "
            "names, and closer to it than to their own: the ids do not name the records "
            "rewritten, and the game would measure the ids, not the rewriting; check how "
            "the release's source_id was joined"
        )
    return found


def _epsilon_ceiling(
    trials: int, *, config: DistinguishabilityAudit, game: RewriteGame, level: float
) -> float:
    """The most ``epsilon_emp`` that ``trials`` disjoint trials can show (all of them won).

    Raises:
        AuditError: the ceiling is within ``max_epsilon``: such a game could only pass,
            and a pass it cannot withhold is no evidence.
    """
    k = config.candidates
    ceiling = distinguishability_epsilon(
        successes=trials, trials=trials, candidates=k, alpha_conf=level, delta=config.delta
    ).epsilon_emp
    limit = config.thresholds.max_epsilon
    if limit is not None and ceiling <= limit:
        raise AuditError(
            f"the game cannot fail: {trials} disjoint trials (of {config.trials} asked; "
            f"{len(game.pool_texts)} rewritten records, k = {k}) show at most "
            f"epsilon_emp = {ceiling:.3f} <= max_epsilon = {limit:g}; give a release "
            "with more rewritten records, or a larger max_epsilon"
        )
    return ceiling


def _random_rewrite(game: RewriteGame, targets: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """For each target pool record, one of its rewrites chosen uniformly."""
    order = np.argsort(game.rewrite_pool, kind="stable")
    counts = np.bincount(game.rewrite_pool, minlength=len(game.pool_texts))
    starts = np.r_[0, np.cumsum(counts)[:-1]]
    offset = np.floor(rng.random(targets.size) * counts[targets]).astype(np.int64)
    return order[starts[targets] + offset]


@AUDITS.register("distinguishability")
class DistinguishabilityAuditRunner(Audit[DistinguishabilityAudit]):
    name = "distinguishability"
    config_model = DistinguishabilityAudit
    metrics = MetricSet([*GAME_METRICS, WORST])
    citation = (
        "Li et al. (2026), Beyond Theoretical Bounds: Empirical Privacy Loss Calibration for "
        "Text Rewriting Under Local Differential Privacy (TeDA), §3, App. A, C"
    )

    def checks(self, config: DistinguishabilityAudit) -> list[CheckSpec]:
        if config.thresholds.max_epsilon is None:
            return []
        return [
            CheckSpec.at_most(
                self.name,
                WORST,
                None,
                config.thresholds.max_epsilon,
                "worst game: empirical epsilon of re-identifying a rewrite's source",
            )
        ]

    def run(
        self, bundle: Bundle, config: DistinguishabilityAudit, context: AuditContext
    ) -> AuditResult:
        game = _game(bundle, config, context)
        attacks = [attack_plugin(name) for name in config.attacks]
        games = len(attacks) * len(config.transition_lambdas)
        if config.alpha_conf is None:
            raise AuditError("audits.distinguishability.alpha_conf is unset; the policy fills it")
        level = split_alpha(config.alpha_conf, parts=games, split="(lambda, attack) games")
        k = config.candidates
        metrics: list[Metric] = []
        statements: dict[str, str] = {}
        details: dict[str, object] = {
            "pool_records": len(game.pool_texts),
            "rewrites": len(game.rewrite_texts),
            "release_records_without_source": int(len(bundle.synthetic) - len(game.rewrite_texts)),
            "level_per_game": level,
        }
        confident: list[tuple[float, str, int, int]] = []  # margin, subject, pool, rewrite
        worst = 0.0
        # before any embedding: the most disjoint sets the pool allows may already be too few
        _epsilon_ceiling(
            min(config.trials, len(game.pool_texts) // k), config=config, game=game, level=level
        )
        details["rewrites_copying_another_source"] = _refuse_misattributed_copies(game)
        for lam in config.transition_lambdas:
            started = time.perf_counter()
            needs_embeddings = lam != 0
            with context.progress.step(f"candidate sets, lambda = {lam:g}"):
                sets = transition_candidate_sets(
                    embeddings=game.pool_embeddings if needs_embeddings else None,
                    n=len(game.pool_texts),
                    candidates=k,
                    trials=config.trials,
                    transition_lambda=lam,
                    rng=context.rng,
                )
            trials = sets.shape[0]  # disjoint sets: at most pool // k
            ceiling = _epsilon_ceiling(trials, config=config, game=game, level=level)
            within = (
                float(
                    np.einsum(
                        "tkd,tjd->tkj", game.pool_embeddings[sets], game.pool_embeddings[sets]
                    )[:, np.triu_indices(k, 1)[0], np.triu_indices(k, 1)[1]].mean()
                )
                if needs_embeddings
                else None
            )
            position = context.rng.integers(k, size=trials)
            targets = sets[np.arange(trials), position]
            rewrites = _random_rewrite(game, targets, context.rng)
            sampled = round(time.perf_counter() - started, 3)
            for attack in attacks:
                started = time.perf_counter()
                subject = game_subject(attack.name, lam)
                similarity = attack.similarities(game, rewrites=rewrites, candidates=sets)
                if similarity.shape != sets.shape:
                    raise PluginUnavailableError(
                        f"rewrite attack {attack.name!r} returned shape {similarity.shape}; "
                        f"expected {sets.shape}"
                    )
                picks = pick_candidates(similarity, context.rng)
                success = picks == position
                result = distinguishability_epsilon(
                    successes=int(success.sum()),
                    trials=trials,
                    candidates=k,
                    alpha_conf=level,
                    delta=config.delta,
                )
                worst = max(worst, result.epsilon_emp)
                metrics += self.metrics.values(
                    subject,
                    {
                        "trials": trials,
                        "success_rate": result.success_rate,
                        "success_lower": result.success_lower,
                        "epsilon_emp": result.epsilon_emp,
                        "epsilon_ceiling": ceiling,
                    },
                )
                ordered = np.sort(similarity, axis=1)
                margin = ordered[:, -1] - ordered[:, -2]
                if result.epsilon_emp > 0:  # successes at chance re-identify no one
                    hits = np.flatnonzero(success)
                    best = hits[np.argsort(-margin[hits], kind="stable")[: context.max_witnesses]]
                    confident += [
                        (float(margin[t]), subject, int(targets[t]), int(rewrites[t])) for t in best
                    ]
                details[subject] = {
                    "successes": int(success.sum()),
                    "trials": trials,
                    "trials_asked": config.trials,
                    "candidates": k,
                    "transition_lambda": lam,
                    "mean_within_set_cosine": within,
                    "chance": 1 / k,
                    "sampling_seconds": sampled,
                    "attack_seconds": round(time.perf_counter() - started, 3),
                }
                picked = (
                    f"{attack.name} picked the source in {int(success.sum())} of {trials} "
                    f"trials (chance {1 / k:.3g}); with probability >= {1 - level / 2:.4g} the "
                    f"success probability is >= {result.success_lower:.4f}"
                )
                statements[subject] = picked + (
                    f", so the rewriting is not epsilon-LDP (delta = {config.delta:g}) for "
                    f"epsilon < {result.epsilon_emp:.3f} (at most {ceiling:.3f} with {trials} "
                    "trials)."
                    if result.epsilon_emp > 0
                    else ", no more than chance (and delta) allow: no evidence that rewrites "
                    "identify their sources, which is not evidence that they do not."
                )
        metrics += self.metrics.values(None, {WORST.name: worst})
        statements["all games"] = (
            f"Worst of {games} games (each at level {level:.3g}): empirical epsilon "
            f"{worst:.3f}. A lower bound: it can show that rewrites identify their sources, "
            "never that they do not."
        )
        return AuditResult(
            metrics=tuple(metrics),
            statements=statements,
            witnesses=self._witnesses(bundle, game, confident, context),
            details=details,
        )

    @staticmethod
    def _witnesses(
        bundle: Bundle,
        game: RewriteGame,
        confident: list[tuple[float, str, int, int]],
        context: AuditContext,
    ) -> tuple[Witness, ...]:
        seen: set[tuple[int, int]] = set()
        out: list[Witness] = []
        for margin, subject, pool, rewrite in sorted(confident, key=lambda c: -c[0]):
            if (pool, rewrite) in seen or len(out) >= context.max_witnesses:
                continue
            seen.add((pool, rewrite))
            source = bundle.source.iloc[game.pool_rows[pool]]
            text = game.rewrite_texts[rewrite]
            released = str(bundle.synthetic["record_id"].iloc[game.rewrite_rows[rewrite]])
            out.append(
                Witness(
                    feature_class="rewrite",
                    kind=subject,
                    feature=mask(text) if context.redact else text,
                    feature_hash=feature_hash(text),
                    source_record_id=str(source["record_id"]),
                    user_id=user_hash(str(source["user_id"]))
                    if context.redact
                    else str(source["user_id"]),
                    split=str(source["split"]),
                    synthetic_record_id=release_record_hash(released)
                    if context.redact
                    else released,
                    score=margin if math.isfinite(margin) else None,
                )
            )
        return tuple(out)
