"""The disclosure test's level when a random split was drawn with another p than the
policy's (the README's "Membership must be random").

    .venv/bin/python bench/bench_split_level.py --draws 1000

Per draw: ``users`` users, a fifth of them disclosing 1 + Poisson(2) rare features, the
same on both sides (nothing learnt); each user goes to train with probability ``share``.
A draw the split check refuses (two-sided binomial test of the train share against
p = 0.5 at alpha 0.001, the policy's default) is skipped; of the others, the share in
which the exact feature-match test finds leakage (epsilon-hat > 0 at alpha = 0.05).
"""

from __future__ import annotations

import argparse

import numpy as np

from gate.stats.feature_match import feature_match_test
from gate.stats.split_balance import split_balance_test


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--draws", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    for users in (1_000, 10_000):
        for share in (0.5, 0.51, 0.52, 0.53, 0.55):
            passed = found = 0
            for _ in range(args.draws):
                counts = np.where(rng.random(users) < 0.2, rng.poisson(2, users) + 1, 0)
                is_train = rng.random(users) < share
                check = split_balance_test(
                    train_users=int(is_train.sum()), total_users=users, p=0.5
                )
                if check.p_value < 0.001:
                    continue
                passed += 1
                test = feature_match_test(counts=counts, is_train=is_train, p=0.5, alpha=0.05)
                found += test.epsilon_lower_exact > 0
            print(
                f"{users:,} users, train share drawn at {share}: split check passed "
                f"{passed}/{args.draws}; leakage found in {found}/{passed} = "
                f"{found / max(passed, 1):.3f}",
                flush=True,
            )


if __name__ == "__main__":
    main()
