"""Deleted spaces restored (gate.data.deleted_spaces): hand-computed segmentations, and the
dynamic programme against every split of small random runs."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from gate.data.deleted_spaces import (
    CHAR_COST,
    WORD_PENALTY,
    SourceWords,
    _lowered,
    spaces_restored,
)
from gate.features.tokenize import lower_case_by_character


def restored(source: list[str], release: list[str]) -> dict[int, str]:
    return spaces_restored(pd.Series(release), SourceWords.of(pd.Series(source))).to_dict()


def test_a_copy_without_spaces_reads_as_the_copy() -> None:
    source = ["the patient was admitted on tuesday", "I don't know what she said"]
    release = ["thepatientwasadmittedontuesday", "Idon'tknowwhatshesaid", "the patient"]
    assert restored(source, release) == {
        0: "the patient was admitted on tuesday",
        1: "I don't know what she said",  # the apostrophe stays where it was
    }


def test_costs_by_hand() -> None:
    """Source ``ab ab ab cd``: 4 words, so ``ab`` costs log(4/3) + 4 = 4.29 nats, ``cd``
    log 4 + 4 = 5.39, and an unknown piece 5.39 + 3.58 per character (log 36)."""
    words = SourceWords.of(pd.Series(["ab ab ab cd"]))
    assert words.unknown_cost == pytest.approx(math.log(4) + WORD_PENALTY)
    assert words.lengths.tolist() == [2]
    costs = sorted(words.by_length[0][1].tolist())
    assert costs == pytest.approx([math.log(4 / 3) + 4, math.log(4) + 4], rel=1e-6)
    found = spaces_restored(pd.Series(["abcd", "abc", "abdc", "cab", "c", "cdab ab"]), words)
    assert found.to_dict() == {
        0: "ab cd",  # 9.67 nats against 19.72 for one unknown word
        1: "ab c",  # 4.29 + 5.39 + 3.58 = 13.26 against 16.14
        2: "ab dc",  # the unknown characters are one piece: 16.84 against 19.72
        3: "c ab",
        5: "cd ab ab",
    }
    # a letter no source text holds is read as a space
    assert spaces_restored(pd.Series(["abxcd", "x"]), words).to_dict() == {0: "ab cd", 1: " "}


def test_a_run_no_split_explains_better_stays() -> None:
    """Among 8 source words, ``jaroslav`` split into three (log 8 + 4 = 6.08 nats each,
    18.2 in all) is cheaper than one unknown word (log 8 + 4 + 8 · 3.58 = 34.7), so it is
    split; among 200,003 the three cost 48.6 and one unknown word 44.9, so it stays."""
    common = restored(["jar os lav x y z w v"], ["jaroslav"])
    assert common == {0: "jar os lav"}
    rare = ["jar os lav"] + ["common"] * 200_000
    assert restored([" ".join(rare)], ["jaroslav"]) == {}


def test_no_space_between_two_digits() -> None:
    source = ["call 12 34 now", "ab 12"]
    assert restored(source, ["1234", "call1234now", "ab12"]) == {
        1: "call 1234 now",
        2: "ab 12",
    }


def test_words_of_the_source_are_not_split() -> None:
    assert restored(["alpha bravo alphabravo"], ["alphabravo", "bravoalpha"]) == {1: "bravo alpha"}


def test_non_ascii_words_and_long_runs() -> None:
    source = ["größe straße café 東京"]
    assert restored(source, ["größestraßecafé", "東京café"]) == {
        0: "größe straße café",
        1: "東京 café",
    }
    long_run = "".join(["alpha", "bravo"] * 1000)  # 10,000 characters: windows of 4,096
    found = restored(["alpha bravo"], [long_run])
    pieces = found[0].split(" ")
    assert "".join(pieces) == long_run
    assert sum(p in ("alpha", "bravo") for p in pieces) >= len(pieces) - 4


def test_capitals_are_split_as_lower_case() -> None:
    """A review: a copy in capitals (or with its case swapped) matched no source word and
    passed under a lower-casing tokenizer; the words are compared in lower case and the
    text keeps its own."""
    assert restored(["the patient"], ["THEPATIENT", "ThePatient", "tHEpATIENT"]) == {
        0: "THE PATIENT",
        1: "The Patient",
        2: "tHE pATIENT",
    }


def test_words_are_compared_in_the_tokenizers_lower_case() -> None:
    """The restoration's lower case is the tokenizers' one character for one
    (:func:`lower_case_by_character`), on every code point, so a Greek copy in capitals
    finds its final sigmas (``Σ`` is ``σ``, and so is ``ς``) and a Turkish one its ``İ``."""
    points = np.array([c for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF], dtype=np.int64)
    expected = lower_case_by_character(
        pa.array([chr(c) for c in points.tolist()], pa.string())
    ).to_pylist()
    assert all(len(e) == 1 for e in expected)
    assert _lowered(points).tolist() == [ord(e) for e in expected]
    assert restored(["ο λογος της ημερας"], ["ΟΛΟΓΟΣΤΗΣΗΜΕΡΑΣ"]) == {0: "Ο ΛΟΓΟΣ ΤΗΣ ΗΜΕΡΑΣ"}
    assert restored(["istanbul was hot"], ["İSTANBULWASHOT"]) == {0: "İSTANBUL WAS HOT"}


def test_a_mark_no_source_text_holds_is_a_space() -> None:
    """A review: a combining mark in place of each space joined the words (marks are word
    characters). One the source holds (Devanagari's vowel signs) stays."""
    assert restored(["the patient"], ["the\u0334patient", "the \u0334patient"]) == {
        0: "the patient",
        1: "the  patient",
    }
    hindi = "नमस्ते दुनिया"  # its vowel signs and virama are marks
    assert restored([hindi], ["नमस्तेदुनिया", hindi]) == {0: hindi}


def test_marks_deleted_first_where_asked() -> None:
    """A review: a mark the source holds (a Devanagari vowel sign) in each space's place,
    or a mark inside each word, kept the copy apart from its words. Read with every mark
    deleted first, they split again."""
    source = pd.Series(["the patient was here", "नमस्ते"])
    release = pd.Series(["the\u0947patient\u0947was", "p\u0336atient was", "here"])
    words = SourceWords.of(source)
    assert spaces_restored(release, words).to_dict() == {
        0: "the \u0947 patient \u0947 was",  # the source holds U+0947: an unknown piece
        1: "p atient was",  # it lacks U+0336: a space
    }
    assert spaces_restored(release, words, delete_marks=True).to_dict() == {
        0: "the patient was",
        1: "patient was",
    }


def test_texts_are_read_in_slices_of_characters(monkeypatch) -> None:
    """A review: slices of 16,384 texts held about 40 bytes per character, 13 GB for texts
    of 20 KB. Slices of a few characters give what one slice gives."""
    import gate.data.deleted_spaces as module

    rng = np.random.default_rng(5)
    vocab = ["alpha", "bravo", "charlie", "delta", "echo", "12", "34"]
    source = pd.Series([" ".join(rng.choice(vocab, 6)) for _ in range(40)])
    release = pd.Series(["".join(rng.choice(vocab, int(rng.integers(0, 9)))) for _ in range(60)])
    whole_words = SourceWords.of(source)
    whole = spaces_restored(release, whole_words)
    monkeypatch.setattr(module, "_CHARACTERS_AT_ONCE", 37)
    assert len(list(module._chunks(release))) > 10
    sliced_words = SourceWords.of(source)
    assert np.array_equal(sliced_words.hashes, whole_words.hashes)
    for (h1, c1), (h2, c2) in zip(sliced_words.by_length, whole_words.by_length, strict=True):
        assert np.array_equal(h1, h2) and np.array_equal(c1, c2)
    sliced = spaces_restored(release, sliced_words)
    assert sliced.to_dict() == whole.to_dict() and len(whole) > 30


def _cost(piece: str, words: dict[str, float], unknown: float) -> float:
    return words.get(piece, unknown + CHAR_COST * len(piece))


def _best_by_brute_force(run: str, words: dict[str, float], unknown: float) -> float:
    """The cheapest split of ``run`` over all 2^(n-1) cuts; adjacent unknown pieces are
    one piece; no cut between two digits."""
    best = math.inf
    for cuts in itertools.product([False, True], repeat=len(run) - 1):
        if any(c and run[i].isdigit() and run[i + 1].isdigit() for i, c in enumerate(cuts)):
            continue
        pieces, start = [], 0
        for i, cut in enumerate(cuts):
            if cut:
                pieces.append(run[start : i + 1])
                start = i + 1
        pieces.append(run[start:])
        merged: list[str] = []
        for piece in pieces:
            if merged and piece not in words and merged[-1] not in words:
                merged[-1] += piece
            else:
                merged.append(piece)
        best = min(best, sum(_cost(p, words, unknown) for p in merged))
    return best


def test_the_programme_finds_the_cheapest_split() -> None:
    """Random vocabularies over a small alphabet (with digits) and random runs of up to 11
    characters: the split returned costs what the cheapest of all splits costs."""
    rng = np.random.default_rng(7)
    alphabet = list("abcd12")
    checked = 0
    for _ in range(60):
        vocab = {"".join(rng.choice(alphabet, int(rng.integers(1, 5)))) for _ in range(12)}
        vocab |= set(alphabet)  # a character no source text holds would be a space
        counts = {w: int(rng.integers(1, 50)) for w in vocab}
        source = " ".join(w for w, c in counts.items() for _ in range(c))
        words = SourceWords.of(pd.Series([source]))
        total = sum(counts.values())
        costs = {w: math.log(total / c) + WORD_PENALTY for w, c in counts.items()}
        runs = ["".join(rng.choice(alphabet, int(rng.integers(2, 12)))) for _ in range(20)]
        runs = [r for r in runs if r not in vocab]
        found = spaces_restored(pd.Series(runs), words)
        for i, run in enumerate(runs):
            pieces = found[i].split(" ") if i in found.index else [run]
            assert "".join(pieces) == run
            got = sum(_cost(p, costs, words.unknown_cost) for p in pieces)
            best = _best_by_brute_force(run, costs, words.unknown_cost)
            assert got == pytest.approx(best, abs=1e-4), (run, pieces)
            checked += 1
    assert checked > 1000
