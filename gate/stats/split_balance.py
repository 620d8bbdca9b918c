"""Is an observed train/holdout split consistent with Bernoulli(p) membership?"""

from __future__ import annotations

from typing import NamedTuple

from scipy import stats

from gate.stats._validate import check_count, check_probability


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
