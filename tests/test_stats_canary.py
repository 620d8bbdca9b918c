"""Canary signals against hand-computed answers (Meeus et al., 2025; docs/methods.md §7)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from gate.stats.canary import (
    balanced_reference_membership,
    bigram_log_probabilities,
    in_perplexity_window,
    member_flags,
    rmia_log_scores,
    search_temperature,
    token_set_matrix,
    top_k_mean_jaccard,
)

A, B, C = 0, 1, 2


def _docs(*docs: list[int]) -> tuple[np.ndarray, np.ndarray]:
    ids = np.array([t for d in docs for t in d], dtype=np.int64)
    starts = np.r_[0, np.cumsum([len(d) for d in docs])].astype(np.int64)
    return ids, starts


def test_bigram_laplace_model_hand_case() -> None:
    # corpus "a b a b" and "b a": C(a,b) = 2, C(b,a) = 2, C(a) = C(b) = 2, V = 3; the
    # pair "b b" across the document boundary is not a bigram
    corpus_ids, corpus_starts = _docs([A, B, A, B], [B, A])
    query_ids, query_starts = _docs([A, B, C], [C, A], [A], [B, B])
    got = bigram_log_probabilities(
        corpus_ids=corpus_ids,
        corpus_starts=corpus_starts,
        query_ids=query_ids,
        query_starts=query_starts,
        vocabulary=3,
    )
    expected = [
        math.log(3 / 5) + math.log(1 / 5),  # P(b|a) = (2+1)/(2+3), P(c|b) = (0+1)/(2+3)
        math.log(1 / 3),  # P(a|c) = (0+1)/(0+3)
        0.0,  # one token: the product over j >= 2 is empty
        math.log(1 / 5),  # P(b|b) = (0+1)/(2+3), not (1+1)/(2+3)
    ]
    np.testing.assert_allclose(got, expected, rtol=1e-12)


def test_bigram_model_probabilities_sum_to_one_over_the_vocabulary() -> None:
    rng = np.random.default_rng(0)
    corpus_ids, corpus_starts = _docs(*(rng.integers(0, 5, size=12).tolist() for _ in range(4)))
    queries = [[a, b] for a in range(5) for b in range(5)]
    query_ids, query_starts = _docs(*queries)
    p = np.exp(
        bigram_log_probabilities(
            corpus_ids=corpus_ids,
            corpus_starts=corpus_starts,
            query_ids=query_ids,
            query_starts=query_starts,
            vocabulary=5,
        )
    ).reshape(5, 5)
    np.testing.assert_allclose(p.sum(axis=1), 1.0, rtol=1e-12)


def test_bigram_model_rejects_ids_outside_the_vocabulary() -> None:
    ids, starts = _docs([A, B, 7])
    with pytest.raises(ValueError, match=r"query_ids must lie in \[0, 3\)"):
        bigram_log_probabilities(
            corpus_ids=ids[:2],
            corpus_starts=np.array([0, 2]),
            query_ids=ids,
            query_starts=starts,
            vocabulary=3,
        )
    with pytest.raises(ValueError, match=r"queries: starts must be non-decreasing; found 2 then 1"):
        bigram_log_probabilities(
            corpus_ids=ids[:2],
            corpus_starts=np.array([0, 2]),
            query_ids=ids[:2],
            query_starts=np.array([0, 2, 1, 2]),
            vocabulary=3,
        )


def test_top_k_mean_jaccard_tiny_sets() -> None:
    q_ids, q_starts = _docs([A, B, B], [C])
    c_ids, c_starts = _docs([A, B], [A], [B, C])
    queries = token_set_matrix(q_ids, q_starts, vocabulary=3)
    corpus = token_set_matrix(c_ids, c_starts, vocabulary=3)
    got = top_k_mean_jaccard(queries, corpus, k=2, block=1)
    # {a,b}: J = 1, 1/2, 1/3 -> top-2 mean 3/4; {c}: J = 0, 0, 1/2 -> 1/4
    np.testing.assert_allclose(got.mean, [0.75, 0.25])
    np.testing.assert_array_equal(got.best, [0, 2])
    everything = top_k_mean_jaccard(queries, corpus, k=10)
    np.testing.assert_allclose(everything.mean, [(1 + 1 / 2 + 1 / 3) / 3, (1 / 2) / 3])


def test_rmia_beta_hand_case() -> None:
    target = np.log([0.2, 0.4])
    references = np.log([[0.1, 0.1], [0.3, 0.1]])
    # beta = alpha_target / mean(alpha_ref): 0.2 / 0.2 = 1, 0.4 / 0.1 = 4
    got = rmia_log_scores(target=target, references=references)
    np.testing.assert_allclose(got, [0, math.log(4)], atol=1e-12)


def test_rmia_is_stable_for_tiny_probabilities() -> None:
    target = np.array([-5000.0])
    references = np.array([[-5000.0], [-5000.0 - math.log(3)]])
    # mean of e^-5000 and e^-5000/3 = (2/3) e^-5000 -> log beta = log(3/2)
    np.testing.assert_allclose(
        rmia_log_scores(target=target, references=references), [math.log(1.5)]
    )


def test_balanced_reference_membership_is_half_per_canary() -> None:
    m = balanced_reference_membership(50, references=4, rng=np.random.default_rng(1))
    assert m.shape == (4, 50)
    np.testing.assert_array_equal(m.sum(axis=0), 2)
    assert 0 < m[0].sum() < 50  # which half varies by canary
    with pytest.raises(ValueError, match="references must be even"):
        balanced_reference_membership(5, references=3, rng=np.random.default_rng(0))


def test_member_flags_are_fair_coins() -> None:
    flags = member_flags(20_000, rng=np.random.default_rng(3))
    assert abs(flags.mean() - 0.5) < 0.02


def test_perplexity_window() -> None:
    inside = in_perplexity_window(np.array([8.9, 9.0, 10.0, 11.0, 11.1, np.inf]), target=10.0)
    np.testing.assert_array_equal(inside, [False, True, True, True, False, False])


def test_temperature_search_finds_the_window_of_a_monotone_measure() -> None:
    found = search_temperature(lambda t: 3.0 * t, target=6.0)
    assert found.hit and abs(found.perplexity - 6.0) <= 0.6
    assert 1.8 <= found.temperature <= 2.2


def test_temperature_search_reports_an_unreachable_target() -> None:
    found = search_temperature(lambda t: 2.0 + 0 * t, target=6.0)
    assert not found.hit and found.perplexity == 2.0


def test_canary_statistics_are_valid_when_signals_do_not_depend_on_membership() -> None:
    """Null simulation at the canary audit's scale: signals of 48 canaries against a
    release that never saw them, fair-coin labels redrawn 1,000 times. The AUC test rejects
    and the one-run bound is positive in at most alpha of the draws (+ 3 standard errors)."""
    from gate.stats.one_run import one_run_epsilon_from_scores
    from gate.stats.roc import roc_auc

    rng = np.random.default_rng(7)
    release_ids, release_starts = _docs(
        *(rng.integers(0, 40, size=30).tolist() for _ in range(200))
    )
    canary_ids, canary_starts = _docs(*(rng.integers(0, 40, size=10).tolist() for _ in range(48)))
    scores = bigram_log_probabilities(
        corpus_ids=release_ids,
        corpus_starts=release_starts,
        query_ids=canary_ids,
        query_starts=canary_starts,
        vocabulary=40,
    )
    draws, alpha = 1000, 0.05
    rejected = positive = 0
    for _ in range(draws):
        members = member_flags(48, rng=rng)
        rejected += roc_auc(scores=scores, is_train=members, rng=rng).p_value <= alpha
        bound = one_run_epsilon_from_scores(scores=scores, is_train=members, rng=rng, alpha=alpha)
        positive += bound.epsilon_lower > 0
    limit = alpha + 3 * math.sqrt(alpha * (1 - alpha) / draws)
    assert rejected / draws <= limit
    assert positive / draws <= limit
