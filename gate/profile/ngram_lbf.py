"""LBF profile of the n-gram sampling mechanism, of the corpus and of synthetic releases.

Stomakhin, F. (2025). *Framework for Privacy-Preserving Synthesis of Textual Data*:
§3.2-3.7 (LBF, Theorem 5), §4.3 (direct n-gram sampling: ``Pr[M(D) = o] = f_D(o)``),
§4.4 (censoring), §5.4 (synthetic data from generators trained with and without U) and
§5.4.2 (attackers who know only the top-N outputs by ``|LBF|``). Adjacency is source-wise:
``Y = X`` minus every record of a source set ``U`` of train users. Frequencies are exact for
each ``U``; the worst case over all ``U`` is intractable, so the maximum over the sets
evaluated is a lower bound on it. Besides the random draws, each size evaluates the set of
the users with the most n-gram mass of their own (the n-grams no other user writes): for
``|U| = 1`` that user's floor is the largest of all users' (exactly so without censoring),
which a random draw finds only by chance.
"""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from gate.errors import AuditError, InputError
from gate.generators import resolve_generator
from gate.metrics import LBF_PAPER, Metric, MetricSet, MetricSpec
from gate.policy.loader import setting_error
from gate.results import Curve
from gate.stats.lbf import (
    censor,
    delta_at_epsilon,
    epsilon_at_delta,
    epsilon_delta_curve,
    lbf_profile,
    restricted_delta_at_epsilon,
    top_n_delta_at_epsilon,
    top_outputs,
)

if TYPE_CHECKING:
    from gate.data.bundle import Bundle
    from gate.generators.base import Generator, GeneratorConfig
    from gate.policy.models import GeneratorLbfSettings, NgramLbfSettings
    from gate.progress import Progress

_SAMPLED = (
    "exact for each source set evaluated (random draws and the users with the most n-gram "
    "mass of their own); the maximum over them bounds the worst case below"
)
_SINGLE = (
    "one release per training: a single draw of a random mechanism, so sampling noise "
    "enters (Stomakhin 2025, §5.4 caveat); reported, never gated"
)
LBF_CHART = "profile: (epsilon, delta) of the n-gram mechanism, worst sampled U"
MAX_LBF_POINTS = 201


def _spec(name: str, meaning: str, leak_if: Any, estimator: str, confidence: str, kind: Any):
    return MetricSpec(name, meaning, leak_if, estimator, confidence, kind=kind)


LBF_DELTA = _spec(
    "lbf_delta_at_target_epsilon",
    "minimal delta of strict DP (Def. 7) at the target epsilon of sampling one n-gram "
    "(Theorem 5), worst sampled U",
    "higher",
    f"{LBF_PAPER}, §3.5 Thm 5, §4.3",
    _SAMPLED,
    "delta",
)
LBF_FLOOR = replace(
    _spec(
        "lbf_delta_floor",
        "delta floor: n-gram mass possible with or without U only, worst sampled U",
        "higher",
        f"{LBF_PAPER}, §4.3-4.4",
        _SAMPLED,
        "delta",
    ),
    of_release=False,  # the train corpus's n-gram mechanism
)
LBF_METRICS = (
    _spec("source_sets", "source sets U evaluated", "neither", LBF_PAPER, "", "count"),
    LBF_DELTA,
    LBF_FLOOR,
    _spec(
        "lbf_epsilon_at_delta",
        "epsilon at the audit's delta (inf below the floor), worst sampled U",
        "higher",
        f"{LBF_PAPER}, §3.5",
        _SAMPLED,
        "other",
    ),
)


def top_n_spec(n: int) -> MetricSpec:
    return _spec(
        f"lbf_top_{n}_delta_at_target_epsilon",
        f"delta at the target epsilon of an attacker who knows the {n} n-grams of largest "
        "|LBF| (of the corpus, for synthetic releases: 'Synth Top N from Base')",
        "higher",
        f"{LBF_PAPER}, §5.4.2 (subjective privacy loss)",
        _SAMPLED,
        "delta",
    )


def lbf_specs(settings: NgramLbfSettings) -> list[MetricSpec]:
    return [*LBF_METRICS, *(top_n_spec(n) for n in settings.top_n)]


def corpus_subject(size: int) -> str:
    return f"ngram_lbf_u{size}"


def synthetic_subject(size: int) -> str:
    return f"synthetic_lbf_u{size}"


@dataclass
class LbfOutcome:
    metrics: list[Metric] = field(default_factory=list)
    curves: list[Curve] = field(default_factory=list)
    details: dict[str, object] = field(default_factory=dict)
    worst_floor: float = 0.0
    worst_floor_size: int = 0  # |U| of the source set that gave it


@dataclass(frozen=True)
class NgramCounts:
    """Distinct n-gram hashes of a corpus (sorted), their counts, and for every occurrence
    the index of its hash and the document it is in."""

    hashes: np.ndarray
    counts: np.ndarray
    occurrence: np.ndarray
    docs: np.ndarray


def ngram_counts(*corpora: Sequence[str], n: int) -> list[NgramCounts]:
    """n-gram counts of each corpus (word tokens, case-folded; vectorised hashing). The
    corpora are tokenised together, so equal n-grams get equal hashes across them."""
    from gate.features.ngram import ngram_index
    from gate.features.tokenize import tokenize

    texts = [t for corpus in corpora for t in corpus]
    index = ngram_index(tokenize(texts, tokenizer="word", lowercase=True), n)
    bounds = np.cumsum([0, *(len(c) for c in corpora)])
    out = []
    for first, end in itertools.pairwise(bounds):
        part = (index.docs >= first) & (index.docs < end)
        hashes, occurrence = np.unique(index.hashes[part], return_inverse=True)
        counts = np.bincount(occurrence, minlength=hashes.size).astype(np.float64)
        out.append(NgramCounts(hashes, counts, occurrence, index.docs[part] - first))
    return out


def _aligned(x: NgramCounts, y: NgramCounts) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Counts of two corpora over the union of their n-grams (and that union)."""
    union = np.union1d(x.hashes, y.hashes)
    cx = np.zeros(union.size)
    cy = np.zeros(union.size)
    cx[np.searchsorted(union, x.hashes)] = x.counts
    cy[np.searchsorted(union, y.hashes)] = y.counts
    return union, cx, cy


@dataclass(frozen=True)
class _Row:
    delta: float
    floor: float
    epsilon: float
    top: tuple[float, ...]
    profile: Any


def _row(
    cx: np.ndarray,
    cy: np.ndarray,
    *,
    target: float,
    delta: float,
    top: Callable[[np.ndarray, np.ndarray], tuple[float, ...]],
) -> _Row:
    if cy.sum() == 0 or cx.sum() == 0:  # one side has no n-gram: the outputs never overlap
        return _Row(1.0, 1.0, math.inf, top(cx, cy) if cx.sum() and cy.sum() else (), None)
    profile = lbf_profile(counts_x=cx, counts_y=cy)
    return _Row(
        float(delta_at_epsilon(profile, epsilon=target)),
        profile.delta_floor,
        epsilon_at_delta(profile, delta=delta),
        top(cx, cy),
        profile,
    )


def _thin(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """At most :data:`MAX_LBF_POINTS` points of a curve, both ends kept."""
    keep = np.unique(np.linspace(0, x.size - 1, min(x.size, MAX_LBF_POINTS)).round().astype(int))
    return x[keep], y[keep]


def _summarise(
    rows: list[_Row],
    *,
    subject: str,
    size: int,
    settings: NgramLbfSettings,
    declared: MetricSet,
    target: float,
    outcome: LbfOutcome,
) -> dict[str, object]:
    """Worst over the sampled sets: metrics, the curve of the worst set, details."""
    worst_top = [
        max((r.top[i] if r.top else 1.0) for r in rows) for i in range(len(settings.top_n))
    ]
    values = {
        "source_sets": float(len(rows)),
        LBF_DELTA.name: max(r.delta for r in rows),
        LBF_FLOOR.name: max(r.floor for r in rows),
        "lbf_epsilon_at_delta": max(r.epsilon for r in rows),
        **{top_n_spec(n).name: worst_top[i] for i, n in enumerate(settings.top_n)},
    }
    outcome.metrics += declared.values(subject, values)
    worst = max((r for r in rows if r.profile is not None), key=lambda r: r.delta, default=None)
    if worst is not None:
        eps, deltas = epsilon_delta_curve(worst.profile)
        keep = eps <= max(10.0, 2 * target)
        x, y = _thin(eps[keep], deltas[keep])
        outcome.curves.append(
            Curve(
                chart=LBF_CHART,
                subject=subject,
                x=tuple(x.tolist()),
                y=tuple(y.tolist()),
                x_label="epsilon",
                y_label="minimal delta of strict DP (Theorem 5)",
                label=f"{'synthetic, ' if subject.startswith('synthetic') else ''}|U| = {size}",
                log_y=True,
            )
        )
    return {
        "mean_delta": float(np.mean([r.delta for r in rows])),
        "mean_floor": float(np.mean([r.floor for r in rows])),
        "worst": {k: float(v) for k, v in values.items()},
    }


def mass_of_their_own(
    occurrence: np.ndarray, owner: np.ndarray, *, counts: np.ndarray, users: int, above: int = 0
) -> np.ndarray:
    """For every user, the count of the n-grams that only this user writes and that occur
    more than ``above`` times (those a censoring at ``above`` keeps apart): removing the
    user alone makes exactly these impossible, so their share of all n-grams is the user's
    δ floor (without censoring).

    Args:
        occurrence: the n-gram index of each occurrence.
        owner: the user code of each occurrence.
        counts: the count of each n-gram.
        users: the number of user codes.
        above: count an n-gram only if it occurs more than this.
    """
    lowest = np.full(counts.size, users, dtype=np.int64)
    highest = np.full(counts.size, -1, dtype=np.int64)
    np.minimum.at(lowest, occurrence, owner)
    np.maximum.at(highest, occurrence, owner)
    own = (lowest == highest) & (counts > above)
    return np.bincount(lowest[own], weights=counts[own], minlength=users)


def _removable(sizes: Sequence[int], train_users: int, per_size: dict[str, object]) -> list[int]:
    usable = [s for s in sizes if s < train_users]
    for s in sizes:
        if s >= train_users:
            per_size[str(s)] = f"skipped: |U| must be below the {train_users} train users"
    return usable


def corpus_lbf(
    bundle: Bundle,
    settings: NgramLbfSettings,
    *,
    target: float,
    delta: float,
    rng: np.random.Generator,
    progress: Progress,
    declared: MetricSet,
) -> LbfOutcome:
    """The profile of sampling one n-gram of the train corpus, X vs X minus U.

    Raises:
        AuditError: train has no n-gram, censoring merges every n-gram, or no size is
            below the number of train users.
    """
    started = time.perf_counter()
    train = bundle.is_train
    with progress.step(f"{settings.n}-gram frequencies of train"):
        (base,) = ngram_counts(bundle.source["text"][train].tolist(), n=settings.n)
    if base.counts.sum() == 0:
        raise AuditError(
            f"the train records have no {settings.n}-gram: there is no n-gram mechanism to "
            "profile (lower ngram_lbf.n)"
        )
    if settings.censor_count and base.counts.max() <= settings.censor_count:
        raise AuditError(
            f"every {settings.n}-gram of train occurs at most {int(base.counts.max())} times, "
            f"so censoring at ngram_lbf.censor_count = {settings.censor_count} merges them "
            "all into one token, whose delta floor is 0 whatever the corpus holds; lower "
            "censor_count"
        )
    owner = bundle.user_codes[train][base.docs]
    train_users = np.flatnonzero(bundle.user_is_train)
    own_mass = mass_of_their_own(
        base.occurrence,
        owner,
        counts=base.counts,
        users=bundle.user_is_train.size,
        above=settings.censor_count,
    )[train_users]
    by_own_mass = train_users[np.argsort(-own_mass, kind="stable")]
    outcome = LbfOutcome()
    per_size: dict[str, object] = {}

    def top(cx: np.ndarray, cy: np.ndarray) -> tuple[float, ...]:
        return tuple(
            float(top_n_delta_at_epsilon(counts_x=cx, counts_y=cy, top_n=n, epsilon=target))
            for n in settings.top_n
        )

    for size in _removable(settings.adjacency_sizes, train_users.size, per_size):
        rows = []
        draws = [by_own_mass[:size]] + [
            rng.choice(train_users, size=size, replace=False) for _ in range(settings.repeats)
        ]
        for removed in progress.track(draws, total=len(draws), description=f"LBF |U| = {size}"):
            in_u = np.isin(owner, removed)
            cx = base.counts
            cy = cx - np.bincount(base.occurrence[in_u], minlength=cx.size)
            if settings.censor_count:
                cx, cy = censor(counts_x=cx, counts_y=cy, threshold=settings.censor_count)
            rows.append(_row(cx, cy, target=target, delta=delta, top=top))
        subject = corpus_subject(size)
        per_size[str(size)] = _summarise(
            rows,
            subject=subject,
            size=size,
            settings=settings,
            declared=declared,
            target=target,
            outcome=outcome,
        )
        floor = max(r.floor for r in rows)
        if floor > outcome.worst_floor or not outcome.worst_floor_size:
            outcome.worst_floor, outcome.worst_floor_size = floor, size
    if not outcome.metrics:
        raise AuditError(
            f"every ngram_lbf.adjacency_sizes value is >= the {train_users.size} train users: "
            "no source set can be removed"
        )
    outcome.details = {
        "n": settings.n,
        "distinct_ngrams": int(base.counts.size),
        "occurrences": int(base.counts.sum()),
        "censor_count": settings.censor_count,
        "by_size": per_size,
        "composition": "one sampled n-gram; k independent samples add LBFs (basic "
        "composition, §4.1)",
        "seconds": round(time.perf_counter() - started, 3),
    }
    return outcome


def profile_generator(
    settings: GeneratorLbfSettings,
    *,
    where: tuple[str, ...] = ("audits", "profile", "ngram_lbf", "generator"),
) -> tuple[type[Generator[Any]], GeneratorConfig]:
    """The generator class and its validated settings of the generator mode.

    Raises:
        InputError: unknown generator (named by YAML path); SettingError: settings the
            generator's model rejects (exit 2).
    """
    from pydantic import ValidationError

    at = ".".join(where)
    if settings.generator is None or settings.epochs is None:
        raise InputError(f"{at}: generator and epochs are not set (the policy fills them)")
    cls = resolve_generator(settings.generator, where=f"{at}.generator")
    data = settings.generator_config or {}
    try:
        config = cls.config_model.model_validate(data)
    except ValidationError as exc:
        raise setting_error(
            exc, cls.config_model, data, path=(*where, "generator_config")
        ) from None
    return cls, config


def synthetic_lbf(
    bundle: Bundle,
    settings: NgramLbfSettings,
    *,
    target: float,
    delta: float,
    rng: np.random.Generator,
    progress: Progress,
    declared: MetricSet,
) -> LbfOutcome:
    """The profile of sampling one n-gram of a synthetic release: the generator trained on
    X and on X minus U with the same seed, one release of each (Stomakhin 2025, §5.4).
    Top-N attackers choose their n-grams from the corpus's LBFs for the same U ('Synth
    Top N from Base', §5.4.2). Checkpoints are never written.

    Raises:
        AuditError: a release without n-grams, or no size below the number of train users.
    """
    started = time.perf_counter()
    mode = settings.generator
    cls, config = profile_generator(mode)
    epochs = int(mode.epochs or 1)  # profile_generator checked it is set
    train = bundle.train
    codes = bundle.user_codes[bundle.is_train]
    order = np.argsort(codes, kind="stable")
    texts = train["text"].to_numpy()[order]
    users, starts = np.unique(codes[order], return_index=True)
    records = np.split(texts, starts[1:])
    samples = mode.samples or len(train)
    seed = int(rng.integers(2**31))
    train_texts = train["text"].tolist()

    def release(keep: np.ndarray, description: str) -> list[str]:
        generator = cls(config, seed=seed)
        with progress.step(f"training {mode.generator} ({description})"):
            generator.fit([list(records[i]) for i in np.flatnonzero(keep)], epochs=epochs)
        return generator.sample(samples, progress=progress)

    outcome = LbfOutcome()
    per_size: dict[str, object] = {}
    full = release(np.ones(users.size, dtype=bool), "on X")
    for size in _removable(mode.adjacency_sizes, users.size, per_size):
        rows = []
        for _ in range(mode.repeats):
            removed = rng.choice(users, size=size, replace=False)
            reduced = release(~np.isin(users, removed), f"on X minus {size} users")
            base, with_u, without_u = ngram_counts(train_texts, full, reduced, n=settings.n)
            for counts, name in ((with_u, "on X"), (without_u, f"on X minus {size} users")):
                if counts.counts.sum() == 0:
                    raise AuditError(
                        f"the release of {mode.generator} trained {name} has no {settings.n}-gram"
                    )
            union, cx, cy = _aligned(with_u, without_u)
            base_y = base.counts - np.bincount(
                base.occurrence[np.isin(codes[base.docs], removed)], minlength=base.counts.size
            )

            watched = [
                np.isin(
                    union,
                    base.hashes[top_outputs(counts_x=base.counts, counts_y=base_y, top_n=n)],
                )
                for n in settings.top_n
            ]
            if settings.censor_count:
                rare = (cx <= settings.censor_count) & (cy <= settings.censor_count)
                cx, cy = censor(counts_x=cx, counts_y=cy, threshold=settings.censor_count)
                if rare.any():  # the merged token is one more output, never watched
                    watched = [np.r_[w[~rare], False] for w in watched]

            def top(
                cx: np.ndarray, cy: np.ndarray, watched: list[np.ndarray] = watched
            ) -> tuple[float, ...]:
                return tuple(
                    float(
                        restricted_delta_at_epsilon(
                            counts_x=cx, counts_y=cy, outputs=mask, epsilon=target
                        )
                    )
                    for mask in watched
                )

            rows.append(_row(cx, cy, target=target, delta=delta, top=top))
        per_size[str(size)] = _summarise(
            rows,
            subject=synthetic_subject(size),
            size=size,
            settings=settings,
            declared=declared,
            target=target,
            outcome=outcome,
        )
    if not outcome.metrics:
        raise AuditError(
            f"every ngram_lbf.generator.adjacency_sizes value is >= the {users.size} train "
            "users: no source set can be removed"
        )
    outcome.details = {
        "generator": mode.generator,
        "generator_config": config.model_dump(mode="json"),
        "epochs": mode.epochs,
        "seed": seed,
        "samples_per_release": samples,
        "censor_count": settings.censor_count,
        "by_size": per_size,
        "caveat": _SINGLE,
        "seconds": round(time.perf_counter() - started, 3),
    }
    return outcome
