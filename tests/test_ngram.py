"""Vectorised n-gram hashing, rarity and disclosure against a plain Python reference."""

from __future__ import annotations

from collections import defaultdict

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

import gate.features.ngram as ngram_module
import gate.features.ngram_spill as ngram_spill
from gate.features.ngram import ngram_disclosures, ngram_index
from gate.features.ngram_spill import spilled_ngram_disclosures
from gate.features.tokenize import split_corpus, tokenize


def corpora(source: list[str], synthetic: list[str], **kwargs):
    corpus = tokenize(source + synthetic, **kwargs)
    return split_corpus(corpus, len(source))


def reference(
    source: list[str], synthetic: list[str], users: list[int], n_min: int, n_max: int, k: int
):
    """Dictionary-based reference: c_i, rare feature count, disclosed feature count."""
    holders: dict[tuple, set] = defaultdict(set)
    grams_of = []
    for text, user in zip(source, users, strict=True):
        tokens = text.split()
        grams = {
            tuple(tokens[i : i + n])
            for n in range(n_min, n_max + 1)
            for i in range(len(tokens) - n + 1)
        }
        grams_of.append(grams)
        for g in grams:
            holders[g].add(user)
    in_synthetic = set()
    for text in synthetic:
        tokens = text.split()
        in_synthetic |= {
            tuple(tokens[i : i + n])
            for n in range(n_min, n_max + 1)
            for i in range(len(tokens) - n + 1)
        }
    rare = {g for g, us in holders.items() if len(us) <= k}
    counts = [len(grams & rare & in_synthetic) for grams in grams_of]
    per_user: dict[int, set] = defaultdict(set)
    for grams, user in zip(grams_of, users, strict=True):
        per_user[user] |= grams & rare & in_synthetic
    user_counts = [len(per_user[u]) for u in range(max(users) + 1)]
    return counts, len(rare), len(rare & in_synthetic), user_counts


def reference_rare_records(
    source: list[str], users: list[int], n_min: int, n_max: int, k: int
) -> list[bool]:
    """Dictionary-based reference: does each source record hold a rare n-gram?"""
    grams_of = [
        {
            tuple(tokens[i : i + n])
            for n in range(n_min, n_max + 1)
            for i in range(len(tokens) - n + 1)
        }
        for tokens in (text.split() for text in source)
    ]
    holders: dict[tuple, set] = defaultdict(set)
    for grams, user in zip(grams_of, users, strict=True):
        for g in grams:
            holders[g].add(user)
    return [any(len(holders[g]) <= k for g in grams) for grams in grams_of]


def witness_grams(found, src) -> list[tuple[int, str, int]]:
    """(source record, witness n-gram as text, synthetic record) of every witness."""
    return [
        (int(row), " ".join(src.tokens(int(src.starts[row] + pos), int(n))), int(s))
        for row, pos, n, s in zip(
            found.witness_record,
            found.witness_offset,
            found.witness_length,
            found.witness_synthetic,
            strict=True,
        )
    ]


def test_hand_case() -> None:
    """doc0 'a b c d e f', doc1 'x y z a b c', doc2 'q r s t'; release 'b c d e', 'y z a',
    's t'. n = 2..3, k = 1: 'a b', 'b c', 'a b c' are shared (not rare): 17 rare n-grams;
    disclosed: cd de bcd cde | yz za yza | st."""
    src, syn = corpora(["a b c d e f", "x y z a b c", "q r s t"], ["b c d e", "y z a", "s t"])
    found = ngram_disclosures(src, syn, users=np.array([0, 1, 2]), n_min=2, n_max=3, max_users=1)
    assert found.rare_features == 17
    assert found.disclosed_features == 8
    assert found.record_counts.tolist() == [4, 3, 1]
    assert found.witness_length.tolist() == [3, 3, 2]
    assert found.rare_records.tolist() == [True, True, True]
    witnesses = [gram for _, gram, _ in witness_grams(found, src)]
    assert witnesses == ["b c d", "y z a", "s t"]  # the first of the longest


def test_same_user_twice_is_still_rare() -> None:
    src, syn = corpora(["a b c", "a b c", "a b c"], ["a b c"])
    found = ngram_disclosures(src, syn, users=np.array([0, 0, 1]), n_min=3, n_max=3, max_users=1)
    assert found.rare_features == 0 and found.rare_records.tolist() == [False] * 3
    found = ngram_disclosures(src, syn, users=np.array([0, 0, 1]), n_min=3, n_max=3, max_users=2)
    assert found.rare_features == 1 and found.record_counts.tolist() == [1, 1, 1]
    assert found.rare_records.tolist() == [True] * 3
    assert found.user_counts.tolist() == [1, 1]  # one feature per user, not per record


def test_ngrams_never_cross_documents() -> None:
    src, syn = corpora(["a b", "c d"], ["b c"])
    index = ngram_index(src, 2)
    assert index.hashes.size == 2
    found = ngram_disclosures(src, syn, users=np.array([0, 1]), n_min=2, n_max=2, max_users=1)
    assert found.record_counts.tolist() == [0, 0]


@pytest.mark.parametrize("seed", range(5))
def test_matches_reference_on_random_corpora(seed: int) -> None:
    rng = np.random.default_rng(seed)
    vocab = [f"t{i}" for i in range(12)]
    source = [" ".join(rng.choice(vocab, size=rng.integers(0, 25))) for _ in range(40)]
    synthetic = [" ".join(rng.choice(vocab, size=rng.integers(0, 25))) for _ in range(15)]
    users = rng.integers(0, 25, size=40)
    src, syn = corpora(source, synthetic)
    found = ngram_disclosures(src, syn, users=users, n_min=2, n_max=4, max_users=2)
    counts, rare, disclosed, user_counts = reference(source, synthetic, users.tolist(), 2, 4, 2)
    assert found.record_counts.tolist() == counts
    assert found.user_counts.tolist() == user_counts
    assert (found.rare_features, found.disclosed_features) == (rare, disclosed)


@pytest.mark.parametrize("seed", range(6))
def test_matches_reference_over_many_lengths_with_copied_spans(seed: int) -> None:
    """Spans copied between users and into the release, over n = 2..10: every length
    after the first hashes only what the previous one left open (prefix pruning), which
    must not change any count."""
    source, synthetic, users, k = copied_span_corpus(seed)
    src, syn = corpora(source, synthetic)
    counts, rare, disclosed, user_counts = reference(source, synthetic, users.tolist(), 2, 10, k)
    lengths = None
    for shards in (1, 2, 7):  # hash partitions: equal n-grams always meet in one
        found = ngram_disclosures(
            src, syn, users=users, n_min=2, n_max=10, max_users=k, shards=shards
        )
        assert found.disclosed_features > 0
        assert found.record_counts.tolist() == counts
        assert found.user_counts.tolist() == user_counts
        assert (found.rare_features, found.disclosed_features) == (rare, disclosed)
        # the witness is the longest disclosed n-gram of its record, whatever the shards
        for row, gram, s in witness_grams(found, src):
            assert f" {gram} " in f" {source[row]} " and f" {gram} " in f" {synthetic[s]} "
        if lengths is None:
            lengths = witness_grams(found, src)
        assert witness_grams(found, src) == lengths


def test_collisions_never_become_disclosures(monkeypatch: pytest.MonkeyPatch) -> None:
    """With base 1 the 'hash' is the sum of token ids: many collisions. Confirmation on the
    tokens keeps every reported disclosure a true one."""
    monkeypatch.setattr(ngram_module, "_BASE", np.uint64(1))
    monkeypatch.setattr(ngram_module, "_BASE_INV", np.uint64(1))
    rng = np.random.default_rng(3)
    vocab = [f"t{i}" for i in range(400)]
    source = [" ".join(rng.choice(vocab, size=20)) for _ in range(30)]
    synthetic = source[:10] + [" ".join(rng.choice(vocab, size=20)) for _ in range(30)]
    src, syn = corpora(source, synthetic)
    index = ngram_index(src, 3)
    distinct_grams = {tuple(src.ids[p : p + 3]) for p in index.positions}
    assert np.unique(index.hashes).size < len(distinct_grams)  # collisions do happen
    found = ngram_disclosures(src, syn, users=np.arange(30), n_min=3, n_max=3, max_users=1)
    for row, gram, s in witness_grams(found, src):
        assert gram in source[row] and gram in synthetic[s]
    true_counts, _, _, _ = reference(source, synthetic, list(range(30)), 3, 3, 1)
    # collisions can only merge features (less rare, fewer matches), never add evidence
    assert (found.record_counts <= np.array(true_counts)).all()
    assert found.record_counts.sum() > 0


def test_normalisation_options() -> None:
    src, syn = corpora(
        ["Call ME, at Home now"], ["call me at home now"], lowercase=True, strip_punctuation=True
    )
    found = ngram_disclosures(src, syn, users=np.array([0]), n_min=5, n_max=5, max_users=1)
    assert found.record_counts.tolist() == [1]
    src, syn = corpora(["Call ME, at Home now"], ["call me at home now"])
    found = ngram_disclosures(src, syn, users=np.array([0]), n_min=5, n_max=5, max_users=1)
    assert found.record_counts.tolist() == [0]
    src, syn = corpora(["it's-a match"], ["it s a match"], tokenizer="word")
    found = ngram_disclosures(src, syn, users=np.array([0]), n_min=4, n_max=4, max_users=1)
    assert found.record_counts.tolist() == [1]


def test_lower_case_reads_the_final_sigma_as_sigma_and_sharp_s_as_ss() -> None:
    """A review: ``Σ`` lowers to ``σ`` wherever it stands, so a Greek copy in capitals
    differed from its source's last letters ``ς`` and matched nothing. ``İ`` lowers to
    ``i``, and ``ß`` reads as ``ss`` (German capitals write it ``SS``), as ``str.casefold``
    reads it."""
    texts = ["ο λογος της ημερας", "Ο ΛΟΓΟΣ ΤΗΣ ΗΜΕΡΑΣ", "İSTANBUL istanbul", "GRÜSSE Grüße"]
    corpus = tokenize(texts, lowercase=True)
    assert [
        corpus.tokens(corpus.starts[d], corpus.starts[d + 1] - corpus.starts[d]) for d in range(4)
    ] == [
        ["ο", "λογοσ", "τησ", "ημερασ"],
        ["ο", "λογοσ", "τησ", "ημερασ"],
        ["istanbul", "istanbul"],
        ["grüsse", "grüsse"],
    ]
    src, syn = corpora([texts[0]], [texts[1]], lowercase=True)
    found = ngram_disclosures(src, syn, users=np.array([0]), n_min=4, n_max=4, max_users=1)
    assert found.record_counts.tolist() == [1]


def test_validation() -> None:
    src, syn = corpora(["a b"], ["a b"])
    with pytest.raises(ValueError, match="need 1 <= n_min <= n_max; found n_min=3, n_max=2"):
        ngram_disclosures(src, syn, users=np.array([0]), n_min=3, n_max=2, max_users=1)
    with pytest.raises(ValueError, match="users must have one entry per source document"):
        ngram_disclosures(src, syn, users=np.array([0, 1]), n_min=1, n_max=2, max_users=1)
    with pytest.raises(ValueError, match="shards must be >= 1; found 0"):
        ngram_disclosures(src, syn, users=np.array([0]), n_min=1, n_max=2, max_users=1, shards=0)


def copied_span_corpus(seed: int) -> tuple[list[str], list[str], np.ndarray, int]:
    """Records sharing spans between users and with the release, some empty."""
    rng = np.random.default_rng(100 + seed)
    vocab = [f"t{i}" for i in range(30)]
    source = [" ".join(rng.choice(vocab, size=rng.integers(0, 30))) for _ in range(60)]
    for _ in range(20):
        a, b = rng.integers(0, 60, size=2)
        words = source[a].split()
        start = int(rng.integers(0, max(1, len(words) - 4)))
        source[b] = " ".join(words[start : start + int(rng.integers(3, 12))]) + " " + source[b]
    synthetic = [" ".join(rng.choice(vocab, size=rng.integers(0, 20))) for _ in range(20)]
    for i in range(20):
        words = source[int(rng.integers(0, 60))].split()
        start = int(rng.integers(0, max(1, len(words) - 2)))
        synthetic[i] += " " + " ".join(words[start : start + int(rng.integers(2, 14))])
    return source, synthetic, rng.integers(0, 40, size=60), int(rng.integers(1, 4))


WITNESS_FIELDS = ("witness_record", "witness_offset", "witness_length", "witness_synthetic")


@pytest.mark.parametrize("seed", range(4))
def test_spilled_path_matches_memory_and_reference(
    seed: int, tmp_path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Chunks of one record to all records, one to seven partitions, disclosures confirmed
    three at a time: the same counts as the reference and the same witnesses as the
    in-memory path, and no file left behind."""
    monkeypatch.setattr(ngram_spill, "CONFIRM_BATCH", 3)
    corpus = copied_span_corpus(seed)
    for chunk_chars, partitions in ((1, 1), (60, 3), (400, 7), (10**6, 2)):
        options = {"chunk_chars": chunk_chars, "partitions": partitions, "workdir": tmp_path}
        assert_spilled_as_reference(*corpus, **options)
    assert list(tmp_path.iterdir()) == []


def assert_spilled_as_reference(
    source: list[str], synthetic: list[str], users: np.ndarray, k: int, **options: object
) -> None:
    """The spilled path with ``options`` gives the brute-force reference's counts and the
    in-memory path's witnesses (n = 2..10, max_users ``k``); so does the in-memory path."""
    counts, rare, disclosed, user_counts = reference(source, synthetic, users.tolist(), 2, 10, k)
    src, syn = corpora(source, synthetic)
    in_memory = ngram_disclosures(src, syn, users=users, n_min=2, n_max=10, max_users=k)
    assert in_memory.record_counts.tolist() == counts
    found = spilled_ngram_disclosures(
        source, synthetic, users=users, n_min=2, n_max=10, max_users=k, **options
    )
    assert found.record_counts.tolist() == counts
    assert found.user_counts.tolist() == user_counts
    assert (found.rare_features, found.disclosed_features) == (rare, disclosed)
    for name in WITNESS_FIELDS:
        assert np.array_equal(getattr(found, name), getattr(in_memory, name)), name
    holding = reference_rare_records(source, users.tolist(), 2, 10, k)
    assert in_memory.rare_records.tolist() == holding
    assert found.rare_records.tolist() == holding


def skewed_corpus(seed: int) -> tuple[list[str], list[str], np.ndarray, int]:
    """:func:`copied_span_corpus` with a footer in most source records (of many users), a
    release that repeats one record's rare span in most of its records, and one user's
    span repeated in several of that user's records."""
    source, synthetic, users, k = copied_span_corpus(seed)
    rng = np.random.default_rng(200 + seed)
    footer = "f1 f2 f3 f4 f5 f6 f7 f8 f9"
    source = [f"{text} {footer}" if rng.random() < 0.8 else text for text in source]
    rare = " ".join(source[7].split()[:6]) or "r1 r2 r3"
    synthetic = [f"{rare} {text}" if rng.random() < 0.7 else text for text in synthetic]
    synthetic += [f"{footer} x" for _ in range(12)]
    mine = np.nonzero(users == users[3])[0]
    for i in mine:
        source[i] += " u1 u2 u3 u4"
    return source, synthetic, users, k


@pytest.mark.parametrize("seed", range(4))
def test_spilled_skewed_partitions_match_memory_and_reference(
    seed: int, tmp_path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A partition that one n-gram fills (a footer in most records, a release repeating a
    span) is read in blocks: its common n-grams settled first, the release's occurrences
    deduplicated (a review: one such n-gram made its partition, reduced whole, grow with
    the corpus). Blocks of 1 to 50 records force that path on every partition: the same
    counts as the reference and the same witnesses as the in-memory path."""
    monkeypatch.setattr(ngram_spill, "CONFIRM_BATCH", 3)
    corpus = skewed_corpus(seed)
    reduced = []
    original = ngram_spill._reduce_skewed

    def counting(*args, **kwargs):
        reduced.append(args[2])
        return original(*args, **kwargs)

    monkeypatch.setattr(ngram_spill, "_reduce_skewed", counting)
    for chunk_chars, partitions, block_records in (
        (1, 1, 1),
        (60, 3, 2),
        (400, 2, 7),
        (10**6, 1, 50),
    ):
        reduced.clear()
        assert_spilled_as_reference(
            *corpus,
            chunk_chars=chunk_chars,
            partitions=partitions,
            block_records=block_records,
            workdir=tmp_path,
        )
        assert reduced, "no partition took the skewed path"
    assert list(tmp_path.iterdir()) == []


def repeating_corpus(seed: int) -> tuple[list[str], list[str], np.ndarray, int]:
    """:func:`skewed_corpus` with records that repeat themselves: one token over and over
    (in two records of one user and in one of another), a span repeated within a record,
    and a release that copies part of each."""
    source, synthetic, users, k = skewed_corpus(seed)
    rng = np.random.default_rng(300 + seed)
    source[5] = " ".join(["z"] * 40)
    source[6] = " ".join(["z"] * 25) + " " + source[6]
    source[11] = " ".join(["z"] * 30)
    source[9] += " s1 s2 s3 s4" * 6 + " s1 s2"
    synthetic[2] += " " + " ".join(["z"] * int(rng.integers(3, 12)))
    synthetic[4] = "s2 s3 s4 s1 s2 s3 " + synthetic[4]
    users = users.copy()
    users[[5, 6]] = 41  # a user of their own: the 'z' n-grams of one or two users
    return source, synthetic, users, k


def signed_corpus(seed: int) -> tuple[list[str], list[str], np.ndarray, int]:
    """:func:`repeating_corpus` with one user's 40 records ending in the same signature
    (one of them holding it twice), another user's record holding part of it, and a
    release that copies the signature, part of it and one of the signed records."""
    source, synthetic, users, k = repeating_corpus(seed)
    rng = np.random.default_rng(400 + seed)
    signature = "g1 g2 g3 g4 g5 g6 g7"
    vocab = [f"t{i}" for i in range(30)]
    signed = [
        " ".join(rng.choice(vocab, size=rng.integers(0, 6))) + " " + signature for _ in range(40)
    ]
    signed[3] += " " + signature
    source = source + signed
    source[12] += " g3 g4 g5"
    synthetic[1] += " " + signature
    synthetic[7] = "g2 g3 g4 g5 " + synthetic[7]
    synthetic[9] = signed[int(rng.integers(0, 40))]
    users = np.r_[users, np.full(40, 42)]
    return source, synthetic, users, k


@pytest.mark.parametrize(
    ("make", "seed"),
    [(repeating_corpus, s) for s in range(3)] + [(signed_corpus, s) for s in range(3)],
)
def test_spilled_repeats_of_one_user_are_kept_twice(
    make, seed: int, tmp_path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Reviews: a text of one token repeated kept every occurrence of its n-grams (rare,
    so never settled as common), and the count's memory grew with it (142 MiB at 1M
    tokens, 521 MiB at 4M); so did one user's signature, one entry per signed record. The
    skewed path now hands the kernel the first two occurrences of each n-gram in each
    user's records with the same flags, and settles the others afterwards (flags for the
    next length, records holding a rare n-gram, disclosures confirmed record by record):
    the counts and witnesses stay the reference's."""
    monkeypatch.setattr(ngram_spill, "CONFIRM_BATCH", 3)
    corpus = make(seed)
    users = corpus[2]
    largest: list[int] = []
    original = ngram_spill.NgramTally.match_length

    def counting(self, n, **kwargs):
        source = kwargs["source"]
        if isinstance(source, ngram_spill.SpilledCorpus):  # not the in-memory path's call
            pos, hashes = kwargs["repeated_pos"], kwargs["repeated_hash"]
            pairs = np.stack([hashes.view(np.int64), users[source.doc_of(pos)]])
            _, per_user = np.unique(pairs, axis=1, return_counts=True)
            largest.append(int(per_user.max(initial=0)))
        return original(self, n, **kwargs)

    monkeypatch.setattr(ngram_spill.NgramTally, "match_length", counting)
    for chunk_chars, partitions, block_records in ((1, 1, 1), (60, 3, 4), (10**6, 1, 50)):
        largest.clear()
        assert_spilled_as_reference(
            *corpus,
            chunk_chars=chunk_chars,
            partitions=partitions,
            block_records=block_records,
            workdir=tmp_path,
        )
        assert max(largest) <= 2, "a repeated n-gram of one user reached the kernel more than twice"
    largest.clear()
    assert_spilled_as_reference(*corpus, partitions=1, workdir=tmp_path)  # whole partitions
    assert max(largest) > 2  # the corpus does repeat n-grams within a user's records
    assert list(tmp_path.iterdir()) == []


def test_spilled_hand_case_and_normalisation() -> None:
    found = spilled_ngram_disclosures(
        ["a b c d e f", "x y z a b c", "q r s t"],
        ["b c d e", "y z a", "s t"],
        users=np.array([0, 1, 2]),
        n_min=2,
        n_max=3,
        max_users=1,
        chunk_chars=8,
    )
    assert (found.rare_features, found.disclosed_features) == (17, 8)
    assert found.record_counts.tolist() == [4, 3, 1]
    # the witness is the first of the longest: 'b c d' at offset 1 of record 0
    assert found.witness_offset.tolist() == [1, 1, 2]  # b c d, y z a, s t
    assert found.witness_length.tolist() == [3, 3, 2]
    found = spilled_ngram_disclosures(
        ["Call ME, at Home now"],
        ["call me at home now"],
        users=np.array([0]),
        n_min=5,
        n_max=5,
        max_users=1,
        lowercase=True,
        strip_punctuation=True,
        chunk_chars=4,
    )
    assert found.record_counts.tolist() == [1]


def test_spilled_collisions_never_become_disclosures(monkeypatch: pytest.MonkeyPatch) -> None:
    """With base 1 the n-gram 'hash' is a sum of token hashes; the spilled path confirms
    each disclosure on the token hashes of both occurrences, read back from disk."""
    monkeypatch.setattr(ngram_module, "_BASE", np.uint64(1))
    monkeypatch.setattr(ngram_module, "_BASE_INV", np.uint64(1))
    source = ["a b c d", "q r s t"]
    synthetic = ["b a c d", "d c b a x"]  # the same tokens in other orders: no true match
    both = ngram_index(tokenize(source + synthetic), 4)
    assert np.unique(both.hashes).size < both.hashes.size  # 'a b c d' collides with 'b a c d'
    found = spilled_ngram_disclosures(
        source, synthetic, users=np.array([0, 1]), n_min=3, n_max=4, max_users=1, chunk_chars=5
    )
    assert (found.rare_features, found.disclosed_features) == (6, 0)
    assert found.record_counts.tolist() == [0, 0]


def test_spilled_skewed_partitions_keep_the_kernel_s_counts_under_collisions(
    monkeypatch: pytest.MonkeyPatch, tmp_path
) -> None:
    """A review: with base 1, 'a b c' (repeated, held by two users) and 'a c b' (shared
    with the release, one user) hash alike at n = 3; the skewed path took the hash for
    common on the repeated occurrences and dropped the rare shared one's disclosure."""
    monkeypatch.setattr(ngram_module, "_BASE", np.uint64(1))
    monkeypatch.setattr(ngram_module, "_BASE_INV", np.uint64(1))
    source = ["a b c", "a b c", "a c b", "q r s", "q r s", "q r s"]
    counts = []
    for block_records in (10**9, 2, 1):
        found = spilled_ngram_disclosures(
            source,
            ["a c b"],
            users=np.arange(6),
            n_min=2,
            n_max=3,
            max_users=1,
            partitions=1,
            block_records=block_records,
            workdir=tmp_path,
        )
        counts.append((found.rare_features, found.disclosed_features, found.record_counts.tolist()))
    assert counts[0][1] == 2 and counts == [counts[0]] * 3


def test_spilled_records_are_counted_only_with_their_user_under_collisions(
    monkeypatch: pytest.MonkeyPatch, tmp_path
) -> None:
    """A review: with base 1, 'b a c' and 'a b c' hash alike; one user's first two
    occurrences ('b a c', kept for the count) fail confirmation against the release's
    'a b c', and the dropped one in the third record was then confirmed and counted for
    its record while the user and the n-gram were not. A collision may cost disclosures,
    but a record is never counted without its user."""
    monkeypatch.setattr(ngram_module, "_BASE", np.uint64(1))
    monkeypatch.setattr(ngram_module, "_BASE_INV", np.uint64(1))
    source, release = ["b a c", "b a c", "a b c", "x y z"], ["a b c", "x y z"]
    users = np.array([0, 0, 0, 1])
    src, syn = corpora(source, release)
    in_memory = ngram_disclosures(src, syn, users=users, n_min=3, n_max=3, max_users=1)
    assert in_memory.record_counts.tolist() == [0, 0, 1, 1]
    assert in_memory.user_counts.tolist() == [1, 1]
    found = {
        block_records: spilled_ngram_disclosures(
            source,
            release,
            users=users,
            n_min=3,
            n_max=3,
            max_users=1,
            partitions=1,
            block_records=block_records,
            workdir=tmp_path,
        )
        for block_records in (1, 10**9)  # the skewed path, and the partition reduced whole
    }
    assert found[10**9].record_counts.tolist() == [0, 0, 1, 1]
    assert found[1].record_counts.tolist() == [0, 0, 0, 1]  # fewer, never more
    assert found[1].user_counts.tolist() == [0, 1]
    assert found[1].disclosed_features == 1
    assert found[1].witness_record.tolist() == [3]


LONG_TEXT_CHARACTERS = [
    "a", "B", "é", "Σ", "ς", "ß", "İ", "字", "🙂", "_", "1", ".", "-", "'",
    " ", " ", " ", "\n", "\t", "\r", "\x0b", "\x0c", "\x1c", "\u00a0", "\u3000", "\u2028",
]  # fmt: skip


@pytest.mark.parametrize("tokenizer", ["whitespace", "word"])
@pytest.mark.parametrize("normalised", [False, True])
def test_a_record_longer_than_a_chunk_is_tokenised_in_pieces(
    tokenizer: str, normalised: bool, tmp_path
) -> None:
    """A record of more than ``chunk_chars`` is cut after ASCII white space into pieces of
    about that many bytes: its token hashes are those of the record tokenised whole,
    whatever characters (multi-byte, other white space, punctuation, cased) stand where,
    and the n-gram pass reads it in windows of about a piece (the whole record before)."""
    rng = np.random.default_rng(7)
    texts = [
        "".join(rng.choice(LONG_TEXT_CHARACTERS, size=int(size)))
        for size in rng.integers(0, 300, size=20)
    ] + ["w" * 300, "x " * 200, ""]  # a word longer than a piece; only ASCII white space
    options = {
        "tokenizer": tokenizer,
        "lowercase": normalised,
        "strip_punctuation": normalised,
        "key": "0123456789abcdef",
    }
    whole = ngram_spill.spill_tokens(texts, tmp_path / "whole.bin", chunk_chars=10**6, **options)
    assert whole.windows.tolist() == [0, whole.tokens]
    for chunk_chars in (5, 64):
        pieces = ngram_spill.spill_tokens(
            texts, tmp_path / f"{chunk_chars}.bin", chunk_chars=chunk_chars, **options
        )
        assert np.array_equal(pieces.starts, whole.starts)
        assert np.array_equal(pieces.read(0, pieces.tokens), whole.read(0, whole.tokens))
        assert pieces.windows[0] == 0 and pieces.windows[-1] == pieces.tokens
    long_record = ["a b", "w" + " w".join(str(i) for i in range(1000)), "c d"]
    corpus = ngram_spill.spill_tokens(long_record, tmp_path / "long.bin", chunk_chars=64, **options)
    assert corpus.starts.tolist() == [0, 2, 1002, 1004]
    assert np.diff(corpus.windows).max() <= 128 // 3  # a piece: at most 128 bytes, "w1 " up


def test_text_pieces_cut_after_ascii_white_space() -> None:
    text = pa.array(["ab cd\u3000ef\tgh ij"], type=pa.large_string())
    pieces = ngram_spill.text_pieces(text.slice(0), piece_bytes=4)
    assert pieces.to_pylist() == ["ab ", "cd\u3000ef\t", "gh ij"]
    offset = pa.array(["zz", "a b c"], type=pa.large_string()).slice(1)
    assert ngram_spill.text_pieces(offset, piece_bytes=2).to_pylist() == ["a ", "b ", "c"]
    assert ngram_spill.text_pieces(offset, piece_bytes=10).to_pylist() == ["a b c"]


def test_spilled_validation() -> None:
    with pytest.raises(ValueError, match="chunk_chars must be >= 1; found 0"):
        spilled_ngram_disclosures(
            ["a b"], ["a b"], users=np.array([0]), n_min=1, n_max=2, max_users=1, chunk_chars=0
        )
    with pytest.raises(ValueError, match="partitions must be >= 1; found 0"):
        spilled_ngram_disclosures(
            ["a b"], ["a b"], users=np.array([0]), n_min=1, n_max=2, max_users=1, partitions=0
        )
    with pytest.raises(ValueError, match="block_records must be >= 1; found 0"):
        spilled_ngram_disclosures(
            ["a b"], ["a b"], users=np.array([0]), n_min=1, n_max=2, max_users=1, block_records=0
        )
    with pytest.raises(ValueError, match="users must have one entry per source document"):
        spilled_ngram_disclosures(
            ["a b"], ["a b"], users=np.array([0, 1]), n_min=1, n_max=2, max_users=1
        )


def test_crafted_token_hash_collisions_cannot_hide_a_copy() -> None:
    """Two tokens whose SipHash values under pandas' public default key agree in the low 38
    bits: a Thue–Morse sequence of 64 of them and its complement have the same n-gram hash
    (v2(Π (1 - B^{2^i})) >= 26 for odd B). Under that key the spilled path would merge
    the two 64-grams (not rare) and miss the copy; its token hashes are keyed by a secret
    drawn for each run, so it finds the copy like the in-memory path."""
    words = np.array([f"w{i}" for i in range(1 << 20)], dtype=object)
    low = pd.util.hash_array(words, categorize=False) & np.uint64((1 << 38) - 1)
    order = np.argsort(low, kind="stable")
    first = int(np.nonzero(low[order][1:] == low[order][:-1])[0][0])
    a, b = words[order[first]], words[order[first + 1]]
    pattern = [bin(x).count("1") % 2 for x in range(64)]
    s1 = " ".join(a if t == 0 else b for t in pattern)
    s2 = " ".join(b if t == 0 else a for t in pattern)
    # under the public key the two 64-grams collide: the attack is real
    ids = ngram_module.token_hashes(pa.array(s1.split() + s2.split()), key="0123456789123456")
    hasher = ngram_module.NgramHasher(ids, np.array([0, 64, 128]))
    assert hasher.hashes(np.array([0]), 64) == hasher.hashes(np.array([64]), 64)
    users = np.array([0, 1])
    # the copy of a rare 64-gram alone, then after a colliding decoy in the release
    for source, synthetic, rare in (([s1, s2], [s1], 2), ([s1, "q r s"], [s2, s1], 1)):
        src, syn = corpora(source, synthetic)
        expected = ngram_disclosures(src, syn, users=users, n_min=64, n_max=64, max_users=1)
        found = spilled_ngram_disclosures(
            source, synthetic, users=users, n_min=64, n_max=64, max_users=1
        )
        assert expected.record_counts.tolist() == [1, 0]
        assert found.record_counts.tolist() == [1, 0]
        assert (found.rare_features, found.disclosed_features) == (rare, 1)


def test_decoys_colliding_under_public_token_ids_cannot_hide_a_copy() -> None:
    """A review's attack on the in-memory path: d is a short vector with
    Σ d_t B^(7-t) ≡ 0 (mod 2^64) for the module's base (found by lattice reduction), so
    an 8-gram of token ids x and the decoy x - d (then the copy's tokens) hash alike at
    every length from 8 to 16. Decoys placed before a verbatim copy made the confirmation,
    which reads the first release occurrence of a hash, fail: 0 disclosures instead of
    117. Keyed token hashes make the decoys ordinary n-grams."""
    d = [142, 73, 16, -63, -158, 0, -23, 97]
    base, modulus = int(ngram_module._BASE), 1 << 64
    assert sum(v * pow(base, 7 - t, modulus) for t, v in enumerate(d)) % modulus == 0
    rng = np.random.default_rng(0)
    vocabulary = [f"w{i}" for i in range(20_000)]  # the first record fixes ids: w{i} is i + 1
    target_ids = rng.integers(5000, 15000, size=24)
    target = " ".join(f"w{i - 1}" for i in target_ids)
    decoys = []
    for i in range(target_ids.size - 8 + 1):
        x = [int(v) for v in target_ids[i : i + 16]]
        shifted = [a - b for a, b in zip(x[:8], d, strict=True)]
        decoys.append(" ".join(f"w{v - 1}" for v in shifted + x[8:]))
    source = [" ".join(vocabulary), target] + [
        " ".join(rng.choice(vocabulary, 30)) for _ in range(40)
    ]
    users = np.arange(len(source))
    src, syn = corpora(source, [" ".join(decoys[::-1]), target])
    assert src.ids[src.starts[1] : src.starts[2]].tolist() == target_ids.tolist()
    public = ngram_module.NgramHasher.of(syn)  # the decoys collide under the public ids
    # the release's first decoy is that of the copy's last 8-gram
    last = int(syn.starts[1]) + target_ids.size - 8
    assert public.hashes(np.array([0]), 8) == public.hashes(np.array([last]), 8)
    found = ngram_disclosures(src, syn, users=users, n_min=8, n_max=16, max_users=1)
    plain_src, plain_syn = corpora(source, [target])
    plain = ngram_disclosures(plain_src, plain_syn, users=users, n_min=8, n_max=16, max_users=1)
    assert found.record_counts[1] == plain.record_counts[1] == 117
    assert found.user_counts.tolist() == plain.user_counts.tolist()
