"""Is an observed train/holdout split consistent with Bernoulli(p) membership?"""

from __future__ import annotations

from typing import NamedTuple

from scipy import stats

from gate.stats._validate import StatsError, check_count, check_probability
from gate.stats.binomial import clopper_pearson


class SplitBalance(NamedTuple):
    train_users: int
    total_users: int
    p: float
    train_share: float
    p_value: float


def split_balance_test(*, train_users: int, total_users: int, p: float) -> SplitBalance:
    """Two-sided exact binomial test of ``train_users ~ Binomial(total_users, p)``.

    Every guarantee of the audits assumes users were put in train independently with
    probability ``p`` (*Phantoms and Disclosures: a Causal Framework for Auditing Synthetic
    Data* (2026), §4 and §5.1; docs/methods.md §0). A split far from ``p`` is a
    sign that membership was chosen by hand (by date, by customer), which invalidates them.

    Args:
        train_users: users in train.
        total_users: users in train and holdout.
        p: declared membership probability, in (0, 1).

    Returns:
        The observed share and the two-sided p-value.
    """
    check_count("total_users", total_users, minimum=1)
    check_count("train_users", train_users, maximum=total_users)
    check_probability("p", p, open_low=True, open_high=True)
    result = stats.binomtest(train_users, total_users, p, alternative="two-sided")
    return SplitBalance(
        train_users=train_users,
        total_users=total_users,
        p=p,
        train_share=train_users / total_users,
        p_value=float(result.pvalue),
    )


class ShareInterval(NamedTuple):
    """A confidence interval ``[low, high]`` at level ``1 - gamma`` for the unknown
    probability ``p`` with which users were put in train, from the split's own counts.

    A declared split (no ``gate split`` manifest) may have been drawn with another ``p``
    than the policy's. The audits then spend ``gamma`` of their ``alpha`` on this interval
    and take, in every statement, the ``p`` in it that is worst for the statement
    (Berger and Boos 1994; docs/methods.md §0).
    """

    low: float
    high: float
    gamma: float
    train_users: int
    total_users: int


def train_share_interval(*, train_users: int, total_users: int, gamma: float) -> ShareInterval:
    """Two-sided Clopper-Pearson interval at ``1 - gamma`` for the membership probability
    ``p`` of ``train_users ~ Binomial(total_users, p)``.

    Both ends are used at once (the lower for the upper bounds of the excess, the upper for
    every lower bound on ε), so the interval is two-sided: one event of probability at
    most ``gamma`` covers every statement.

    Args:
        train_users: users in train.
        total_users: users in train and holdout, >= 1.
        gamma: miss probability of the interval, in (0, 1).

    Raises:
        StatsError: a count is out of range, or the split has no user on one side (the
            interval would reach 0 or 1, where no statement about ε holds).
    """
    check_count("total_users", total_users, minimum=1)
    check_count("train_users", train_users, maximum=total_users)
    check_probability("gamma", gamma, open_low=True, open_high=True)
    if train_users in (0, total_users):
        raise StatsError(
            "train_users must be in [1, total_users - 1] for an interval of p inside (0, 1); "
            f"found {train_users} of {total_users}"
        )
    interval = clopper_pearson(
        successes=train_users, trials=total_users, alpha=gamma, side="two-sided"
    )
    return ShareInterval(
        low=interval.lower,
        high=interval.upper,
        gamma=gamma,
        train_users=train_users,
        total_users=total_users,
    )
