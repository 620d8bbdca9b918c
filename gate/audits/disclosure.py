"""Disclosure audit: rare features of the source found in the release, on train and on
the holdout (phantoms), and the tests that turn the imbalance into a lower bound on ε.

*Phantoms and Disclosures: a Causal Framework for Auditing Synthetic Data* (2026):
rare features and phantoms §2-4; feature-match test §5.1, Lemma 1, Theorems 1-2. Per
disclosure class: train disclosures T and holdout disclosures H, the phantom-adjusted
excess with its bounds, and the feature-match test (Hoeffding and exact tails). The unit of
membership is the user: ``c_u`` counts the distinct disclosed rare features of user ``u``.
"""

from __future__ import annotations

import time

import numpy as np

from gate.audits.base import Audit, AuditContext, checks_statement
from gate.audits.feature_store import ClassDisclosures, require_rare_features
from gate.data.bundle import Bundle
from gate.errors import AuditError
from gate.metrics import LOWER_OVER_USERS, Metric, MetricSet, MetricSpec
from gate.plugins import AUDITS
from gate.policy.checks import CheckSpec
from gate.policy.models import DisclosureAudit
from gate.redaction import feature_hash, mask, release_record_hash, user_hash
from gate.registry import PluginUnavailableError
from gate.results import AuditResult, Witness
from gate.stats.excess import phantom_excess
from gate.stats.feature_match import (
    FeatureMatchResult,
    epsilon_from_rate,
    feature_match_test,
    feature_match_test_for_interval,
    largest_rate_lower_bound,
    rate_from_epsilon,
    train_users_to_exceed,
)
from gate.stats.split_balance import ShareInterval

_PAPER = "Phantoms and Disclosures (2026)"

METRICS = MetricSet(
    [
        MetricSpec(
            "rare_features",
            "rare features of the source records",
            "neither",
            f"{_PAPER}, §4",
            kind="count",
        ),
        MetricSpec(
            "disclosed_features",
            "rare features found in the release",
            "higher",
            f"{_PAPER}, §4",
            kind="count",
        ),
        MetricSpec(
            "records_with_disclosures",
            "source records with a disclosed feature",
            "higher",
            f"{_PAPER}, §4",
            kind="count",
        ),
        MetricSpec(
            "users_with_disclosures",
            "users with a disclosed feature",
            "higher",
            f"{_PAPER}, §4",
            kind="count",
        ),
        MetricSpec(
            "train_disclosures",
            "T: disclosed features of train users",
            "higher",
            f"{_PAPER}, §5.1",
            kind="count",
            chart="disclosures: train vs phantoms",
        ),
        MetricSpec(
            "holdout_disclosures",
            "H: disclosed features of holdout users (phantoms)",
            "neither",
            f"{_PAPER}, §5.1",
            kind="count",
            chart="disclosures: train vs phantoms",
        ),
        MetricSpec(
            "train_disclosures_expected",
            "T expected under zero learning: p (T + H); with a declared split's interval "
            "of p, its upper end",
            "neither",
            f"{_PAPER}, §5.1 (the null of Lemma 1)",
            kind="count",
            chart="disclosures: train vs phantoms",
        ),
        MetricSpec(
            "phantom_rate",
            "share of disclosures explained by phantoms",
            "lower",
            f"{_PAPER}, §4",
            kind="rate",
        ),
        MetricSpec(
            "excess_disclosures",
            "phantom-adjusted excess T - H p/(1-p)",
            "higher",
            f"{_PAPER}, §5.1",
            kind="count",
        ),
        MetricSpec(
            "excess_disclosures_lower",
            "lower bound of the excess",
            "higher",
            f"{_PAPER}, §5.1 (feature-match test inverted)",
            LOWER_OVER_USERS,
            kind="count",
        ),
        MetricSpec(
            "excess_disclosures_upper",
            "upper bound of the excess",
            "higher",
            f"{_PAPER}, §5.1",
            "upper confidence bound, level 1 - alpha",
            kind="count",
        ),
        MetricSpec(
            "critical_value",
            "critical value: zero learning is rejected at alpha when T exceeds it",
            "neither",
            f"{_PAPER}, Thm 1",
            kind="count",
        ),
        MetricSpec(
            "p_value",
            "p-value of zero learning (Hoeffding tail)",
            "lower",
            f"{_PAPER}, Thm 1",
            kind="p_value",
        ),
        MetricSpec(
            "p_lower",
            "lower bound on the train share of disclosures (Hoeffding)",
            "higher",
            f"{_PAPER}, Thm 2",
            LOWER_OVER_USERS,
            kind="probability",
        ),
        MetricSpec(
            "epsilon_lower",
            "lower bound on epsilon (Hoeffding tail)",
            "higher",
            f"{_PAPER}, Thm 2",
            LOWER_OVER_USERS,
            kind="epsilon",
        ),
        MetricSpec(
            "p_value_exact",
            "p-value of zero learning (exact weighted-Bernoulli tail)",
            "lower",
            f"{_PAPER}, Lemma 1, App. B",
            kind="p_value",
        ),
        MetricSpec(
            "p_lower_exact",
            "lower bound on the train share of disclosures (exact)",
            "higher",
            f"{_PAPER}, Thm 2, App. C",
            LOWER_OVER_USERS,
            kind="probability",
        ),
        MetricSpec(
            "epsilon_lower_exact",
            "lower bound on epsilon (exact tail)",
            "higher",
            f"{_PAPER}, Thm 2, App. C",
            LOWER_OVER_USERS,
            kind="epsilon",
        ),
    ]
)


def witnesses_of(found: ClassDisclosures, bundle: Bundle, context: AuditContext) -> list[Witness]:
    """The class's strongest ``max_witnesses`` witnesses: train first, highest score first.
    Selection is vectorised; only the kept witnesses are built (and their text read)."""
    c = found.candidates
    holdout = ~bundle.is_train[c.source_rows]
    # ties broken by record id, so that witnesses do not depend on the order of the rows
    id_rank = bundle.record_id_rank[c.source_rows]
    order = np.lexsort((id_rank, -c.scores, holdout))
    records = np.ones(order.size, dtype=np.int64)
    if c.feature_ids is not None and order.size:
        # one witness per feature (its strongest candidate), with its records counted
        ids = np.asarray(c.feature_ids)[order]
        _, first, counts = np.unique(ids, return_index=True, return_counts=True)
        keep = np.argsort(first, kind="stable")
        order, records = order[first[keep]], counts[keep]
    order, records = order[: context.max_witnesses], records[: context.max_witnesses]
    source, synthetic = bundle.source, bundle.synthetic
    out = []
    for i, carried in zip(order, records, strict=True):
        row = int(c.source_rows[i])
        text = c.feature_text(int(i))
        user = str(source["user_id"].iat[row])
        released = str(synthetic["record_id"].iat[int(c.synthetic_rows[i])])
        out.append(
            Witness(
                feature_class=found.feature_class,
                feature=mask(text) if context.redact else text,
                feature_hash=feature_hash(text),
                source_record_id=str(source["record_id"].iat[row]),
                user_id=user_hash(user) if context.redact else user,
                split=str(source["split"].iat[row]),
                synthetic_record_id=release_record_hash(released) if context.redact else released,
                score=float(c.scores[i]),
                kind=None if c.feature_kind is None else c.feature_kind(int(i)),
                records=int(carried),
            )
        )
    return out


def exact_tail_words(test: FeatureMatchResult) -> str:
    """How the exact tail was computed, for a statement: exactly, or with the larger
    counts rounded to a coarser lattice (an upper bound on the tail: conservative), or
    not at all where Hoeffding's bound was at least as tight."""
    if test.lattice_grain == 1:
        return "exact tail"
    rounded = f"the larger counts rounded to multiples of {test.lattice_grain}"
    if test.p_lower_exact <= test.p_lower:
        return f"Hoeffding's bound: the exact tail with {rounded} was no tighter"
    return f"exact tail with {rounded} and the rounding error bounded, which can only lower it"


def round_robin(lists: list[list[Witness]], limit: int) -> tuple[Witness, ...]:
    """Take witnesses from each class in turn, so that one prolific class does not hide
    the others."""
    out: list[Witness] = []
    depth = 0
    while len(out) < limit and any(depth < len(items) for items in lists):
        out.extend(items[depth] for items in lists if depth < len(items))
        depth += 1
    return tuple(out[:limit])


def refuse_checks_that_cannot_fail(
    config: DisclosureAudit,
    *,
    train_users: int,
    p: float,
    alpha: float,
    feature_class: str | None = None,
    share: ShareInterval | None = None,
) -> None:
    """Raise when the thresholds ``config`` sets (if any) cannot fail with ``train_users``
    train users, whatever the release holds (a copy of every train record included): with
    few users the test cannot reject zero learning at ``alpha``, and a PASS would say
    nothing. With ``feature_class``, ``train_users`` are the train users holding a rare
    feature of that class: only they can be disclosed (a review: 4 of 100 train users
    held a rare n-gram, and a copy of every train record passed max_epsilon 0).

    With ``share`` (a declared split's interval of p) the bounds are at ``alpha -
    share.gamma`` and the interval's upper end, as the audit computes them; ``p`` is
    then unused.

    Raises:
        AuditError: every check is bounded below its threshold; the message names how many
            train users the thresholds need.
    """
    if share is not None:
        p, alpha = share.high, alpha - share.gamma
    t = config.thresholds
    if t.max_epsilon is None and t.max_excess_disclosures is None:
        return  # the audit reports and another audit gates
    if t.max_excess_disclosures is not None and (
        t.excess_statistic == "point" or t.max_excess_disclosures < 0
    ):
        return  # the point excess grows with the disclosures; a bound can pass below 0
    unit = "train users" if feature_class is None else "train users holding one"
    needs: list[str] = []
    if t.max_epsilon is not None:
        rate = largest_rate_lower_bound(
            train_users=train_users, alpha=alpha, estimator=t.epsilon_estimator
        )
        ceiling = epsilon_from_rate(rate=rate, p=p)
        if ceiling > t.max_epsilon:
            return
        target = rate_from_epsilon(epsilon=t.max_epsilon, p=p)
        estimator = t.epsilon_estimator
        fewest = (
            f"at least {train_users_to_exceed(rate=target, alpha=alpha, estimator=estimator)}"
            if target < 1
            else "more than any number of"
        )
        needs.append(
            f"the {t.epsilon_estimator} epsilon bound is at most {ceiling:.4g} <= max_epsilon "
            f"= {t.max_epsilon:g} (it needs {fewest} {unit})"
        )
    if t.max_excess_disclosures is not None:  # the lower bound: > 0 only if the test rejects
        rate = largest_rate_lower_bound(train_users=train_users, alpha=alpha, estimator="exact")
        if rate > p:
            return
        needed = train_users_to_exceed(rate=p, alpha=alpha, estimator="exact")
        needs.append(
            "the excess's lower bound is at most 0 <= max_excess_disclosures = "
            f"{t.max_excess_disclosures:g} (it needs at least {needed} {unit})"
        )
    users = (
        f"{train_users} train users"
        if feature_class is None
        else f"only {train_users} train users holding a rare {feature_class} feature"
    )
    point = ", or gate on excess_statistic: point" if t.max_excess_disclosures is not None else ""
    taken = (
        f"at alpha = {alpha:g} and p = {p:g}"
        if share is None
        else f"at alpha - gamma = {alpha:.4g} and p = {p:.4g}, the upper end of the declared "
        "split's interval of p (membership.declared_split.p: interval; it narrows as users "
        "are added, so fewer may do)"
    )
    raise AuditError(
        f"the {feature_class + ' ' if feature_class else ''}checks cannot fail: with {users} "
        f"{taken}, even a release that copies every train record "
        "passes: " + "; ".join(needs) + f". Audit more users{point}"
    )


HOLDOUT_SHARE_WARNED = 0.5  # of the holdout users holding a rare feature, disclosed


def _holders(found: ClassDisclosures, bundle: Bundle) -> np.ndarray:
    """Per user code: the user holds a rare feature of the class (every user when the
    class does not say)."""
    users = bundle.user_is_train.size
    if found.rare_records is None:
        return np.ones(users, dtype=bool)
    return np.bincount(bundle.user_codes[found.rare_records], minlength=users) > 0


def holdout_disclosure_warning(
    feature_class: str, *, counts: np.ndarray, is_train: np.ndarray, holders: np.ndarray
) -> str | None:
    """A warning when the release discloses rare features of at least
    :data:`HOLDOUT_SHARE_WARNED` of the holdout users that hold one, or ``None``.

    A generator that never saw the holdout rarely writes what only a holdout user wrote;
    a release holding the private corpus itself (a copy of train and holdout, or a split
    drawn after training) discloses as much of the holdout as of train, and the test,
    which compares the two, finds nothing (a review: a copy of every source record
    passed). Not a check: generic text shared by many users can be rare under a small
    ``max_users`` too.
    """
    holding = holders & ~is_train
    held = int(holding.sum())
    disclosed = int((holding & (counts > 0)).sum())
    if held == 0 or disclosed < HOLDOUT_SHARE_WARNED * held:
        return None
    return (
        f"disclosure ({feature_class}): the release discloses rare features of {disclosed} of "
        f"the {held} holdout users that hold one: a generator that never saw "
        "them rarely does. If holdout records reached its training, or the split was drawn "
        "after it, comparing train with the holdout cannot show a leak (every statement "
        "here assumes the holdout was held out)"
    )


@AUDITS.register("disclosure")
class DisclosureAuditRunner(Audit[DisclosureAudit]):
    name = "disclosure"
    config_model = DisclosureAudit
    metrics = METRICS
    citation = f"{_PAPER}, §2-5, Lemma 1, Theorems 1-2"

    def checks(self, config: DisclosureAudit) -> list[CheckSpec]:
        t = config.thresholds
        checks: list[CheckSpec] = []
        for feature in config.features:
            c = feature.feature_class
            if t.max_epsilon is not None:
                exact = t.epsilon_estimator == "exact"
                checks.append(
                    CheckSpec.at_most(
                        self.name,
                        METRICS["epsilon_lower_exact" if exact else "epsilon_lower"],
                        c,
                        t.max_epsilon,
                        f"{c}: lower confidence bound on epsilon ({t.epsilon_estimator} tail)",
                    )
                )
            if t.max_excess_disclosures is not None:
                lower = t.excess_statistic == "lower_bound"
                checks.append(
                    CheckSpec.at_most(
                        self.name,
                        METRICS["excess_disclosures_lower" if lower else "excess_disclosures"],
                        c,
                        t.max_excess_disclosures,
                        f"{c}: phantom-adjusted excess disclosures T - H p/(1-p)"
                        + (" (lower confidence bound)" if lower else ""),
                    )
                )
        return checks

    def run(self, bundle: Bundle, config: DisclosureAudit, context: AuditContext) -> AuditResult:
        metrics: list[Metric] = []
        statements: dict[str, str] = {}
        details: dict[str, object] = {}
        per_class: list[list[Witness]] = []
        warnings: list[str] = []
        user_is_train = bundle.user_is_train
        share = context.p_interval
        refuse_checks_that_cannot_fail(
            config,
            train_users=int(user_is_train.sum()),
            p=context.p,
            alpha=context.alpha,
            share=share,
        )
        for feature_config in config.features:
            started = time.perf_counter()
            found = context.features.disclosures(feature_config)
            name = feature_config.feature_class
            if found.feature_class != name:
                raise PluginUnavailableError(
                    f"disclosure class {name!r} returned disclosures of class "
                    f"{found.feature_class!r}"
                )
            holders = _holders(found, bundle)
            if config.sets_threshold():
                require_rare_features(found, records=len(bundle.source))
                if found.rare_records is not None:
                    refuse_checks_that_cannot_fail(
                        config,
                        train_users=int((user_is_train & holders).sum()),
                        p=context.p,
                        alpha=context.alpha,
                        feature_class=name,
                        share=share,
                    )
            counts = found.user_counts
            if share is None:
                test = feature_match_test(
                    counts=counts, is_train=user_is_train, p=context.p, alpha=context.alpha
                )
            else:
                test = feature_match_test_for_interval(
                    counts=counts, is_train=user_is_train, share=share, alpha=context.alpha
                )
            excess = phantom_excess(
                counts=counts,
                is_train=user_is_train,
                p=context.p,
                alpha=context.alpha,
                test=test,
                share=share,
            )
            metrics += METRICS.values(
                name,
                {
                    "rare_features": found.rare_features,
                    "disclosed_features": found.disclosed_features,
                    "records_with_disclosures": (found.record_counts > 0).sum(),
                    "users_with_disclosures": (counts > 0).sum(),
                    "train_disclosures": test.statistic,
                    "holdout_disclosures": test.holdout_statistic,
                    "train_disclosures_expected": test.expected,
                    "phantom_rate": excess.phantom_rate,
                    "excess_disclosures": excess.estimate,
                    "excess_disclosures_lower": excess.lower,
                    "excess_disclosures_upper": excess.upper,
                    "critical_value": test.critical_value,
                    "p_value": test.p_value,
                    "p_lower": test.p_lower,
                    "epsilon_lower": test.epsilon_lower,
                    "p_value_exact": test.p_value_exact,
                    "p_lower_exact": test.p_lower_exact,
                    "epsilon_lower_exact": test.epsilon_lower_exact,
                },
            )
            assignment, compared = (
                (f"p = {context.p:g}", "p")
                if share is None
                else (
                    f"whatever p in [{share.low:.4f}, {share.high:.4f}] it was drawn with; "
                    f"that interval of the split's train share misses p with probability "
                    f"<= {share.gamma:g}, counted in it",
                    f"{share.high:.4f}",
                )
            )
            rate = (
                f"With probability >= {1 - context.alpha:g} over the random assignment of "
                f"users to train ({assignment}), the train share of disclosed {name} "
                f"features is >= {test.p_lower_exact:.4f} ({exact_tail_words(test)}; "
                f"Hoeffding {test.p_lower:.4f})"
            )
            statements[name] = (
                f"{rate}, so the release is not epsilon-DP for any epsilon < "
                f"{test.epsilon_lower_exact:.4f}. A lower bound: an audit can show leakage, "
                "never its absence."
                if test.epsilon_lower_exact > 0
                else f"{rate}, not above {compared}: no evidence of leakage at level alpha = "
                f"{context.alpha:g} ({int(test.statistic)} train, "
                f"{int(test.holdout_statistic)} holdout disclosures). This is not evidence "
                "of safety: an audit can show leakage, never its absence."
            )
            warning = holdout_disclosure_warning(
                name, counts=counts, is_train=user_is_train, holders=holders
            )
            if warning is not None:
                warnings.append(warning)
            per_class.append(witnesses_of(found, bundle, context))
            details[name] = {
                "excess_interval": [excess.lower, excess.upper],
                "excess_interval_level": f"each side at alpha = {context.alpha:g}",
                "exact_tail_grain": test.lattice_grain,
                # the first audit to ask for a class (or embeddings) pays for computing it
                "seconds": round(time.perf_counter() - started, 3),
                **found.details,
            }
        verdict = checks_statement(self.checks(config), alpha=context.alpha)
        if verdict is not None:
            statements["checks"] = verdict
        return AuditResult(
            metrics=tuple(metrics),
            witnesses=round_robin(per_class, context.max_witnesses),
            statements=statements,
            details=details,
            warnings=tuple(warnings),
        )
