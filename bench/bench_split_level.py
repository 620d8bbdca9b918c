"""The disclosure test's level when a random split was drawn with another p than the
policy's (the README's "Membership must be random").

    .venv/bin/python bench/bench_split_level.py --draws 1000

Per draw: ``users`` users, a fifth of them disclosing 1 + Poisson(2) rare features, the
same on both sides (nothing learnt); each user goes to train with probability ``share``.
A draw the split check refuses (two-sided binomial test of the train share against
p = 0.5 at alpha 0.001, the policy's default) is skipped; of the others, the share in
which the exact feature-match test finds leakage (epsilon-hat > 0 at alpha = 0.05), with
p taken as the policy's 0.5 (``declared_split.p: assume``) and over the Clopper-Pearson
interval of the train share at 1 - 0.01 (``declared_split.p: interval``, the default
``gamma_share`` 0.2 of alpha; Berger and Boos 1994). The split check applies to the
first only: the second is counted over every draw.

    .venv/bin/python bench/bench_split_level.py --draws 500 --learnt 0.5

``--learnt EPS``: a release that learnt, EPS-DP in each user's membership: a disclosing
user's features are disclosed with probability ``a`` in train and 1/2 in holdout, the
largest ``a`` EPS-DP allows. The share of draws with epsilon-hat > 0 is then the power,
and the share with epsilon-hat > EPS must stay at most alpha (the mean epsilon-hat too).
"""

from __future__ import annotations

import argparse
import math

import numpy as np

from gate.stats.feature_match import feature_match_test, feature_match_test_for_interval
from gate.stats.split_balance import split_balance_test, train_share_interval


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--draws", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--learnt", type=float, default=0.0)
    parser.add_argument("--users", type=int, nargs="+", default=[1_000, 10_000])
    parser.add_argument("--shares", type=float, nargs="+", default=[0.5, 0.51, 0.52, 0.53, 0.55])
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    b = 0.5
    a = min(math.exp(args.learnt) * b, 1 - (1 - b) * math.exp(-args.learnt))
    for users in args.users:
        for share in args.shares:
            passed = found = found_interval = over = over_interval = 0
            epsilons, epsilons_interval = [], []
            for _ in range(args.draws):
                counts = np.where(rng.random(users) < 0.2, rng.poisson(2, users) + 1, 0)
                is_train = rng.random(users) < share
                if args.learnt > 0:
                    counts[rng.random(users) >= np.where(is_train, a, b)] = 0
                # the interval does not compare the split with the policy's p: every draw
                interval = train_share_interval(
                    train_users=int(is_train.sum()), total_users=users, gamma=0.01
                )
                bounded = feature_match_test_for_interval(
                    counts=counts, is_train=is_train, share=interval, alpha=0.05
                )
                found_interval += bounded.epsilon_lower_exact > 0
                over_interval += bounded.epsilon_lower_exact > args.learnt
                epsilons_interval.append(bounded.epsilon_lower_exact)
                check = split_balance_test(
                    train_users=int(is_train.sum()), total_users=users, p=0.5
                )
                if check.p_value < 0.001:
                    continue
                passed += 1
                test = feature_match_test(counts=counts, is_train=is_train, p=0.5, alpha=0.05)
                found += test.epsilon_lower_exact > 0
                over += test.epsilon_lower_exact > args.learnt
                epsilons.append(test.epsilon_lower_exact)
            n, d = max(passed, 1), args.draws
            print(
                f"{users:,} users, train share drawn at {share}: split check passed "
                f"{passed}/{d}; leakage found in {found}/{passed} = {found / n:.3f} of "
                f"those (p assumed), in {found_interval}/{d} = {found_interval / d:.3f} of "
                "all draws (p in the interval)"
                + (
                    f"; epsilon-hat > {args.learnt:g} in {over / n:.3f} and "
                    f"{over_interval / d:.3f}, mean epsilon-hat "
                    f"{np.mean(epsilons) if epsilons else math.nan:.3f} and "
                    f"{np.mean(epsilons_interval):.3f}"
                    if args.learnt > 0
                    else ""
                ),
                flush=True,
            )


if __name__ == "__main__":
    main()
