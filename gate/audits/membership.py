"""Membership (user-match) audit: can the release tell train users from holdout users?

Each scorer gives every user of the source a score from the release alone (higher = more
likely in train). Users are the unit: they were assigned to train independently with
probability p, which is what makes the AUC p-value, the one-run ε bound and the RIP bound
valid. Sources: *Phantoms and Disclosures* (2026), §5.2, Theorem 3 (the user-match test);
Steinke, Nasr and Jagielski (2023), *Privacy Auditing with One (1) Training Run* (the
one-run ε bound); *Provable Re-Identification Privacy*, Theorem 4 (η-RIP).
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, ClassVar, Generic, Literal, TypeVar

import numpy as np
from pydantic import BaseModel

from gate.audits.base import Audit, AuditContext, checks_statement
from gate.audits.feature_store import FeatureStore, require_rare_features
from gate.metrics import LOWER_OVER_USERS, ONE_RUN_PAPER, Metric, MetricSet, MetricSpec
from gate.plugins import AUDITS, MEMBERSHIP_SCORERS
from gate.policy.checks import CheckSpec
from gate.policy.models import (
    EmbeddingScorer,
    FeatureClassConfig,
    MembershipAudit,
    NgramFeatures,
    NgramScorer,
    PiiFeatures,
    PiiScorer,
    ScorerConfig,
    SemanticFeatures,
    TprAtFpr,
)
from gate.registry import PluginUnavailableError
from gate.results import AuditResult, Curve
from gate.stats.one_run import (
    OneRunResult,
    TotalLeakPasses,
    one_run_epsilon_from_scores,
    total_leak_passes,
)
from gate.stats.rip import epsilon_from_eta, rip_eta_ceiling, rip_eta_from_scores
from gate.stats.roc import (
    RocCurve,
    RocResult,
    auc_exceedance_under_null,
    roc_auc,
    similarity_two_sample,
    tpr_at_fpr,
)
from gate.stats.split_balance import ShareInterval

if TYPE_CHECKING:
    from gate.data.bundle import Bundle
from gate.errors import AuditError

STANDARD_FPRS = (0.1, 0.01)
MAX_CURVE_POINTS = 201
ScorerConfigT = TypeVar("ScorerConfigT", bound=ScorerConfig)

_PHANTOMS = "Phantoms and Disclosures (2026), §5.2, Thm 3"
_ONE_RUN = f"{ONE_RUN_PAPER}, Thm 3.1"
_RIP = "Provable Re-Identification Privacy, Thm 4"
_RIP_PER_RUN = (
    "Its bound is a confidence bound where each user's guess is right independently of the "
    "others' given them (as under epsilon-DP); eta-RIP bounds the advantage averaged over "
    "trainings, which one run cannot test: a release that reveals every user at once in "
    "some trainings is eta-RIP and can show a larger advantage in one."
)


def tpr_spec(fpr: float) -> MetricSpec:
    """The TPR-at-FPR metric of one false-positive rate."""
    return MetricSpec(
        f"tpr_at_fpr_{fpr:.12g}",
        f"share of train users flagged when {fpr:g} of holdout users are",
        "higher",
        "empirical ROC curve (scikit-learn's roc_curve: tied scores are one threshold; no "
        "interpolation)",
        kind="rate",
    )


BASE_METRICS = (
    MetricSpec("users_scored", "users given a score", "neither", _PHANTOMS, kind="count"),
    MetricSpec(
        "auc",
        "ROC AUC of the scores, train vs holdout users",
        "higher",
        f"{_PHANTOMS}; Mann-Whitney U",
        kind="auc",
    ),
    MetricSpec(
        "auc_p_value",
        "one-sided p-value of AUC = 1/2 under random membership",
        "lower",
        "gate.stats.roc.auc_p_value: exact hypergeometric, permutation, or Mann-Whitney U",
        kind="p_value",
    ),
    MetricSpec(
        "epsilon_lower",
        "one-run lower bound on epsilon at the policy's delta",
        "higher",
        _ONE_RUN,
        LOWER_OVER_USERS,
        kind="epsilon",
    ),
    MetricSpec(
        "rip_eta", "accuracy of the best threshold guess minus 1/2", "higher", _RIP, kind="eta"
    ),
    MetricSpec(
        "rip_epsilon_lower",
        "lower bound on epsilon implied by the RIP bound (epsilon-DP implies eta(epsilon)-RIP)",
        "higher",
        f"{_RIP}: epsilon = ln((1/2 + eta)/(1/2 - eta)) at the eta bound",
        LOWER_OVER_USERS,
        kind="epsilon",
    ),
    MetricSpec(
        "rip_eta_lower",
        "lower bound on this run's RIP advantage (a test of eta-RIP only where users' "
        "guesses are independent, as under epsilon-DP)",
        "higher",
        _RIP,
        f"{LOWER_OVER_USERS} (Clopper-Pearson)",
        kind="eta",
    ),
    *(tpr_spec(f) for f in STANDARD_FPRS),
)


class MembershipScorer(ABC, Generic[ScorerConfigT]):
    """A way to score users from the release (a plug-in of :data:`MEMBERSHIP_SCORERS`).

    Class attributes:
        name: the value of ``scorer`` in a policy's ``scorers`` list.
        config_model: its configuration (a ``ScorerConfig`` with ``scorer: Literal[name]``).
        extra_metrics: metrics it reports besides the common ones.
    """

    name: ClassVar[str]
    config_model: ClassVar[type[ScorerConfig]]
    extra_metrics: ClassVar[tuple[MetricSpec, ...]] = ()

    @abstractmethod
    def user_scores(self, bundle: Bundle, config: ScorerConfigT, store: FeatureStore) -> np.ndarray:
        """One score per user code (``Bundle.user_codes``); higher = more likely train."""

    def extra(
        self,
        bundle: Bundle,
        config: ScorerConfigT,
        store: FeatureStore,
        *,
        rng: np.random.Generator,
    ) -> dict[str, float]:
        """Values of :attr:`extra_metrics` (``rng``: the audit's seeded generator)."""
        return {}

    def details(
        self, bundle: Bundle, config: ScorerConfigT, store: FeatureStore
    ) -> dict[str, object]:
        """JSON-safe facts for the report about how the scores were computed."""
        return {}


class DisclosureCountScorer(MembershipScorer[ScorerConfigT]):
    """A user's score: the distinct rare features of a disclosure class, in its records,
    found in the release. The config's ``features`` names the class and its settings
    (``default_features`` when it is null)."""

    default_features: ClassVar[type[FeatureClassConfig]]

    def user_scores(self, bundle: Bundle, config: ScorerConfigT, store: FeatureStore) -> np.ndarray:
        features = getattr(config, "features", None) or self.default_features.model_validate({})
        found = store.disclosures(features)
        require_rare_features(found, records=len(bundle.source))
        return found.user_counts.astype(np.float64)


@MEMBERSHIP_SCORERS.register("ngram")
class NgramUserScorer(DisclosureCountScorer[NgramScorer]):
    """A user's score: the distinct rare n-grams of its records found in the release."""

    name = "ngram"
    config_model = NgramScorer
    default_features = NgramFeatures


@MEMBERSHIP_SCORERS.register("pii")
class PiiUserScorer(DisclosureCountScorer[PiiScorer]):
    """A user's score: the distinct rare PII strings of its records found in the release."""

    name = "pii"
    config_model = PiiScorer
    default_features = PiiFeatures


def user_maximum(values: np.ndarray, users: np.ndarray, n_users: int | None = None) -> np.ndarray:
    """Per user code, the largest of its values (-inf for a user without any)."""
    out = np.full(int(users.max()) + 1 if n_users is None else n_users, -np.inf)
    np.maximum.at(out, users, values)
    return out


_RARE = "users with a semantically rare record"


@MEMBERSHIP_SCORERS.register("embedding")
class EmbeddingUserScorer(MembershipScorer[EmbeddingScorer]):
    """A user's score: the largest, over its records, top-k mean cosine similarity to the
    release. Also the two-sample test of nearest-release similarity, train vs holdout, on
    users with semantically rare records (Phantoms and Disclosures, 2026, §5.2)."""

    name = "embedding"
    config_model = EmbeddingScorer
    extra_metrics = (
        MetricSpec("rare_users", _RARE, "neither", _PHANTOMS, kind="count"),
        MetricSpec(
            "rare_similarity_auc",
            f"AUC of nearest-release similarity, {_RARE}",
            "higher",
            f"{_PHANTOMS}; Mann-Whitney U",
            kind="auc",
        ),
        MetricSpec(
            "rare_similarity_p_value",
            f"one-sided p-value of that AUC = 1/2, {_RARE}",
            "lower",
            "hypergeometric (two distinct values), permutation (ties), else "
            "scipy.stats.mannwhitneyu",
            kind="p_value",
        ),
        MetricSpec(
            "rare_similarity_median_difference",
            f"median similarity, train minus holdout, {_RARE}",
            "higher",
            _PHANTOMS,
        ),
    )

    @staticmethod
    def _features(config: EmbeddingScorer) -> SemanticFeatures:
        return config.features or SemanticFeatures()

    def user_scores(
        self, bundle: Bundle, config: EmbeddingScorer, store: FeatureStore
    ) -> np.ndarray:
        index = store.semantic_index(self._features(config), k=config.top_k)
        record_scores = index.nearest_similarity[:, : config.top_k].mean(axis=1)
        return user_maximum(record_scores, bundle.user_codes)

    def details(
        self, bundle: Bundle, config: EmbeddingScorer, store: FeatureStore
    ) -> dict[str, object]:
        features = self._features(config)
        _, neighbour_search = store.neighbour_density(features)
        return {
            "nearest_release_search": asdict(store.semantic_index(features, k=config.top_k).search),
            "neighbour_search": asdict(neighbour_search),
        }

    def extra(
        self,
        bundle: Bundle,
        config: EmbeddingScorer,
        store: FeatureStore,
        *,
        rng: np.random.Generator,
    ) -> dict[str, float]:
        """NaN when one side has no user with a rare record."""
        features = self._features(config)
        index = store.semantic_index(features, k=1)
        rare = store.rare_records(features)
        users = bundle.user_codes
        best = user_maximum(
            index.nearest_similarity[rare, 0], users[rare], n_users=int(users.max()) + 1
        )
        has = np.isfinite(best)
        labels = bundle.user_is_train
        train, holdout = best[has & labels], best[has & ~labels]
        out = {"rare_users": float(has.sum())}
        if train.size and holdout.size:
            test = similarity_two_sample(
                train_similarity=train, holdout_similarity=holdout, rng=rng
            )
            auc, p_value, difference = test.auc, test.p_value, test.median_difference
        else:
            auc = p_value = difference = float("nan")
        out.update(
            {
                "rare_similarity_auc": auc,
                "rare_similarity_p_value": p_value,
                "rare_similarity_median_difference": difference,
            }
        )
        return out


def scorer_plugin(name: str) -> MembershipScorer:
    cls = MEMBERSHIP_SCORERS.get(name)
    if not (isinstance(cls, type) and issubclass(cls, MembershipScorer)):
        raise PluginUnavailableError(
            f"membership scorer {name!r} is registered as {cls!r}, which is not a "
            "gate.audits.membership.MembershipScorer"
        )
    return cls()


def thin_curve(curve: RocCurve, limit: int = MAX_CURVE_POINTS) -> tuple[np.ndarray, np.ndarray]:
    """At most ``limit`` ROC points for the report (always keeping both ends)."""
    n = curve.fpr.size
    keep = np.unique(np.r_[np.linspace(0, n - 1, min(n, limit)).round().astype(int), 0, n - 1])
    return curve.fpr[keep], curve.tpr[keep]


def reported_fprs(gated: TprAtFpr | None) -> list[float]:
    """The false-positive rates at which TPR is reported: the standard ones and the
    policy's, largest first."""
    fprs = set(STANDARD_FPRS)
    if gated is not None:
        fprs.add(gated.fpr)
    return sorted(fprs, reverse=True)


def auc_chance(
    *,
    scores: np.ndarray,
    is_member: np.ndarray,
    thresholds: BaseModel,
    rng: np.random.Generator,
) -> str:
    """The sentence of a subject's statement that gives the chance that a release leaking
    nothing has an AUC above the thresholds' ``max_auc`` (a point estimate, no level);
    empty without ``max_auc``. Its permutations draw from a child of ``rng``
    (``Generator.spawn``), which leaves ``rng``'s own draws as they were."""
    max_auc = getattr(thresholds, "max_auc", None)
    if max_auc is None:
        return ""
    chance, method = auc_exceedance_under_null(
        scores=scores, is_train=is_member, threshold=max_auc, rng=rng.spawn(1)[0]
    )
    return (
        f"A release that leaks nothing has AUC > {max_auc:g} with probability {chance:.2g} "
        f"at these scores and numbers of members and non-members (Mann-Whitney null, "
        f"{method}). "
    )


def score_checks(
    audit: str, metrics: MetricSet, subjects: Sequence[str], thresholds: BaseModel
) -> list[CheckSpec]:
    """The checks of a thresholds block over scores of members vs non-members, one set per
    subject (scorer, signal): ``max_auc``, ``tpr_at_fpr``, ``max_epsilon`` and, where the
    block has it, ``max_rip_eta``."""
    max_auc = getattr(thresholds, "max_auc", None)
    tpr: TprAtFpr | None = getattr(thresholds, "tpr_at_fpr", None)
    max_epsilon = getattr(thresholds, "max_epsilon", None)
    max_rip_eta = getattr(thresholds, "max_rip_eta", None)
    checks: list[CheckSpec] = []
    for s in subjects:
        if max_auc is not None:
            checks.append(CheckSpec.at_most(audit, metrics["auc"], s, max_auc, f"{s}: ROC AUC"))
        if tpr is not None:
            checks.append(
                CheckSpec.at_most(
                    audit,
                    metrics[tpr_spec(tpr.fpr).name],
                    s,
                    tpr.max_tpr,
                    f"{s}: TPR at FPR {tpr.fpr:g}",
                )
            )
        if max_epsilon is not None:
            checks.append(
                CheckSpec.at_most(
                    audit,
                    metrics["epsilon_lower"],
                    s,
                    max_epsilon,
                    f"{s}: one-run lower bound on epsilon",
                )
            )
        if max_rip_eta is not None:
            checks.append(
                CheckSpec.at_most(
                    audit,
                    metrics["rip_eta_lower"],
                    s,
                    max_rip_eta,
                    f"{s}: lower confidence bound on this run's RIP advantage",
                )
            )
    return checks


def total_leak_message(
    found: TotalLeakPasses, *, bound: str, threshold_name: str, threshold: float, alpha: float
) -> str | None:
    """Why a threshold on a lower bound is a check a total leak would pass, or ``None``.

    ``found``: how often scores that separate members perfectly give a bound at or under
    ``threshold`` (:func:`gate.stats.one_run.total_leak_passes`). The check is refused
    unless the rate's upper confidence bound is at most ``alpha``: else it could fail a
    release that gives every member away less often than the audit may wrongly fail a
    clean one. Checking only that the largest bound exceeded the threshold let a
    max_epsilon of 0.5 pass such a release in 6 % of runs at 64 canaries (a review).
    """
    if found.upper <= alpha:
        return None
    need = (
        f"{threshold_name} must be below {found.limit:.4g}"
        if found.limit > 0
        else f"they give 0 too often, so no {threshold_name} can fail them often enough"
    )
    return (
        f"scores that separate members from non-members perfectly give {bound} <= "
        f"{threshold_name} = {threshold:g} in {found.passing} of {found.draws} draws (upper "
        f"bound {found.upper:.3g} on the rate at {1 - alpha:g}, above alpha = {alpha:g}); "
        f"{need}"
    )


def refuse_score_checks_that_cannot_fail(
    thresholds: BaseModel,
    *,
    records: int,
    train: int | None,
    holdout: int | None,
    alpha: float,
    p: float,
    delta: float,
    selection: Literal["split_half", "bonferroni"],
    unit: str,
    share: ShareInterval | None = None,
) -> None:
    """Raise when a total leak would pass ``max_epsilon`` or ``max_rip_eta`` of
    ``thresholds``: the one-run bound of perfectly separating scores stays at or under
    ``max_epsilon`` too often (:func:`total_leak_message`), or the RIP bound cannot
    exceed ``max_rip_eta``.
    ``train``/``holdout``: the members and non-members, when known before scoring (the
    canary audit's are drawn by its coin, with probability ``p``). ``share``: the
    interval of an unknown p the bound is computed over (a declared split).

    Raises:
        AuditError: a check a total leak passes, with the threshold it would need.
    """
    needs: list[str] = []
    max_epsilon = getattr(thresholds, "max_epsilon", None)
    if max_epsilon is not None:

        def epsilon_lower(
            scores: np.ndarray, is_train: np.ndarray, rng: np.random.Generator
        ) -> float:
            return one_run_epsilon_from_scores(
                scores=scores,
                is_train=is_train,
                rng=rng,
                alpha=alpha,
                p=p,
                delta=delta,
                selection=selection,
                share=share,
            ).epsilon_lower

        found = total_leak_passes(
            epsilon_lower, threshold=max_epsilon, alpha=alpha, records=records, members=train, p=p
        )
        message = total_leak_message(
            found,
            bound=f"the one-run epsilon bound ({selection})",
            threshold_name="max_epsilon",
            threshold=max_epsilon,
            alpha=alpha,
        )
        if message is not None:
            needs.append(message)
    max_rip_eta = getattr(thresholds, "max_rip_eta", None)
    if max_rip_eta is not None and train is not None and holdout is not None:
        ceiling = rip_eta_ceiling(train=train, holdout=holdout, alpha=alpha)
        if ceiling <= max_rip_eta:
            needs.append(
                f"the RIP eta bound is at most {ceiling:.4g} <= max_rip_eta = {max_rip_eta:g}, "
                "whatever the scores"
            )
    if needs:
        taken = (
            ""
            if share is None
            else f" (the one-run bound at alpha - gamma = {alpha - share.gamma:.4g}, over the "
            f"declared split's interval of p [{share.low:.4f}, {share.high:.4f}]: "
            "membership.declared_split.p: interval)"
        )
        raise AuditError(
            f"checks that a total leak would pass, with {records} {unit} at alpha = "
            f"{alpha:g}{taken}: "
            + "; ".join(needs)
            + f". Audit more {unit}, or lower the threshold, or rely on max_auc or "
            "tpr_at_fpr"
        )


@dataclass(frozen=True)
class ScoreStatistics:
    """The statistics of one set of scores against random membership: the ROC analysis,
    the one-run ε bound and the metric values both depend on."""

    roc: RocResult
    one_run: OneRunResult
    values: dict[str, float]  # auc, auc_p_value, epsilon_lower, tpr_at_fpr_<fpr>

    def roc_curve(self, *, chart: str, subject: str, x_label: str) -> Curve:
        """The (thinned) ROC curve for the report."""
        fpr, tpr = thin_curve(self.roc.curve)
        return Curve(
            chart=chart,
            subject=subject,
            x=tuple(fpr.tolist()),
            y=tuple(tpr.tolist()),
            x_label=x_label,
            y_label="true-positive rate",
            label=f"{subject} (AUC {self.roc.auc:.4g})",
            diagonal=True,
        )

    def one_run_details(self, *, delta: float) -> dict[str, object]:
        o = self.one_run
        return {
            "k_plus": o.k_plus,
            "k_minus": o.k_minus,
            "correct": o.correct,
            "evaluated": o.evaluated,
            "threshold_selection": o.selection,
            "delta": delta,
        }


def score_statistics(
    *,
    scores: np.ndarray,
    is_member: np.ndarray,
    rng: np.random.Generator,
    alpha: float,
    p: float,
    delta: float,
    selection: Literal["split_half", "bonferroni"],
    fprs: Sequence[float],
    share: ShareInterval | None = None,
) -> ScoreStatistics:
    """AUC with its one-sided p-value, TPR at each FPR of ``fprs`` and the one-run ε lower
    bound of ``scores`` (higher = member) against the random membership ``is_member``
    (with ``share``, over every p of that interval: a declared split). The AUC's test and
    the TPRs are conditional on who is a member and hold whatever p was."""
    roc = roc_auc(scores=scores, is_train=is_member, rng=rng)
    one_run = one_run_epsilon_from_scores(
        scores=scores,
        is_train=is_member,
        rng=rng,
        alpha=alpha,
        p=p,
        delta=delta,
        selection=selection,
        share=share,
    )
    values = {
        "auc": roc.auc,
        "auc_p_value": roc.p_value,
        "epsilon_lower": one_run.epsilon_lower,
        **{tpr_spec(f).name: tpr_at_fpr(roc.curve, fpr=f) for f in fprs},
    }
    return ScoreStatistics(roc=roc, one_run=one_run, values=values)


@AUDITS.register("membership")
class MembershipAuditRunner(Audit[MembershipAudit]):
    name = "membership"
    config_model = MembershipAudit
    metrics = MetricSet([*BASE_METRICS, *EmbeddingUserScorer.extra_metrics])
    citation = f"{_PHANTOMS}; {_ONE_RUN}; {_RIP}"

    @staticmethod
    def _fprs(config: MembershipAudit) -> list[float]:
        return reported_fprs(config.thresholds.tpr_at_fpr)

    def declared_metrics(self, config: MembershipAudit) -> MetricSet:
        """The common metrics, the TPR at the policy's FPR, and the scorers' extras. An extra
        may not reuse a common metric's name (a scorer must never replace the gate's own
        AUC or bound), nor declare a name another scorer declares differently.

        Raises:
            PluginUnavailableError: a scorer's extra metrics collide.
        """
        specs = {s.name: s for s in BASE_METRICS}
        for fpr in self._fprs(config):
            specs.setdefault(tpr_spec(fpr).name, tpr_spec(fpr))
        common = set(specs)
        for scorer in config.scorers:
            for spec in scorer_plugin(scorer.scorer).extra_metrics:
                if spec.name in common or specs.get(spec.name, spec) != spec:
                    raise PluginUnavailableError(
                        f"membership scorer {scorer.scorer!r} declares an extra metric "
                        f"{spec.name!r} that collides with a metric of the audit or of "
                        "another scorer"
                    )
                specs[spec.name] = spec
        return MetricSet(specs.values())

    def checks(self, config: MembershipAudit) -> list[CheckSpec]:
        subjects = [scorer.scorer for scorer in config.scorers]
        return score_checks(self.name, self.declared_metrics(config), subjects, config.thresholds)

    def run(self, bundle: Bundle, config: MembershipAudit, context: AuditContext) -> AuditResult:
        labels = bundle.user_is_train
        train_users, holdout_users = int(labels.sum()), int((~labels).sum())
        if min(train_users, holdout_users) < 2:
            raise AuditError(
                "the membership audit compares users: it needs at least 2 train and 2 "
                f"holdout users; found {train_users} and {holdout_users}"
            )
        refuse_score_checks_that_cannot_fail(
            config.thresholds,
            records=train_users + holdout_users,
            train=train_users,
            holdout=holdout_users,
            alpha=context.alpha,
            p=context.p,
            delta=config.delta,
            selection=config.threshold_selection,
            unit="users",
            share=context.p_interval,
        )
        declared = self.declared_metrics(config)
        metrics: list[Metric] = []
        statements: dict[str, str] = {}
        curves = []
        details: dict[str, object] = {}
        for scorer_config in config.scorers:
            started = time.perf_counter()
            name = scorer_config.scorer
            scorer = scorer_plugin(name)
            scores = scorer.user_scores(bundle, scorer_config, context.features)
            stats = score_statistics(
                scores=scores,
                is_member=labels,
                rng=context.rng,
                alpha=context.alpha,
                p=context.p,
                delta=config.delta,
                selection=config.threshold_selection,
                fprs=self._fprs(config),
                share=context.p_interval,
            )
            roc, one_run = stats.roc, stats.one_run
            rip = rip_eta_from_scores(
                scores=scores, is_train=labels, rng=context.rng, alpha=context.alpha
            )
            extra = scorer.extra(bundle, scorer_config, context.features, rng=context.rng)
            values = {
                "users_scored": float(scores.size),
                **stats.values,
                "rip_eta": rip.eta,
                "rip_eta_lower": rip.eta_lower,
                "rip_epsilon_lower": epsilon_from_eta(eta=rip.eta_lower),
            }
            overlap = sorted(set(extra) & set(values))
            if overlap:
                raise PluginUnavailableError(
                    f"membership scorer {name!r} reported {overlap} as extras; those are "
                    "the audit's own metrics"
                )
            values.update(extra)
            metrics += declared.values(name, values)
            curves.append(
                stats.roc_curve(
                    chart="membership: ROC by scorer",
                    subject=name,
                    x_label="false-positive rate (holdout users called train)",
                )
            )
            details[name] = {
                "one_run": stats.one_run_details(delta=config.delta),
                "rip": {"correct": rip.correct, "trials": rip.trials},
                "auc_p_value_method": roc.p_value_method,
                **scorer.details(bundle, scorer_config, context.features),
                "seconds": round(time.perf_counter() - started, 3),
            }
            auc = f"AUC {roc.auc:.4g} (one-sided p = {roc.p_value:.3g}, {roc.p_value_method}). "
            auc += auc_chance(
                scores=scores, is_member=labels, thresholds=config.thresholds, rng=context.rng
            )
            rip_guesses = (
                f"The best threshold guess was right for {rip.correct} of {rip.trials} "
                f"held-aside users (RIP advantage {rip.eta:.4f}); "
            )
            if scores.size and np.ptp(scores) == 0:  # a review: a broken scorer looks clean
                auc = (
                    f"All {scores.size} users scored {float(scores[0]):g}: this scorer had "
                    f"nothing to tell them apart by. {auc}"
                )
            drawn = (
                ""
                if context.p_interval is None
                else f", whatever p in [{context.p_interval.low:.4f}, "
                f"{context.p_interval.high:.4f}] it was drawn with"
            )
            statements[name] = (
                f"{auc}Each with probability >= {1 - context.alpha:g} over the random "
                f"assignment of users{drawn} (both together >= {1 - 2 * context.alpha:g}): the "
                f"release is not (epsilon, {config.delta:g})-DP for any epsilon < "
                f"{one_run.epsilon_lower:.4f}; it is not epsilon-DP for any epsilon < "
                f"{values['rip_epsilon_lower']:.4f} (from the RIP advantage of at least "
                f"{rip.eta_lower:.4f}, Thm 4). {rip_guesses}{_RIP_PER_RUN} Lower bounds: "
                "they can show leakage, never its absence."
                if one_run.epsilon_lower > 0 or rip.eta_lower > 0
                else f"{auc}Neither the one-run epsilon bound nor the RIP advantage's bound "
                f"rejects privacy at level alpha = {context.alpha:g}: no evidence of leakage, "
                f"which is not evidence of safety. {rip_guesses}{_RIP_PER_RUN}"
            )
        verdict = checks_statement(self.checks(config), alpha=context.alpha)
        if verdict is not None:
            statements["checks"] = verdict
        return AuditResult(
            metrics=tuple(metrics), statements=statements, curves=tuple(curves), details=details
        )
