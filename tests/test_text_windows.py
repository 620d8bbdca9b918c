"""Long texts read in windows (gate.features.text_windows): cuts on hand-made offsets,
the real tokenizer's windows, record similarities from window matches against brute
force, and the semantic class seeing a copy after a preamble only with ``windows: all``."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from gate.features.text_windows import (
    cut_windows,
    nearest_records,
    record_vectors,
    text_windows,
    window_tokenizer,
)


def offsets_of(text: str, split: dict[str, int] | None = None) -> np.ndarray:
    """Word-piece offsets of ``text``: one piece per word, or ``split[word]`` pieces."""
    spans, position = [], 0
    for word in text.split(" "):
        parts = (split or {}).get(word, 1)
        size = len(word) // parts
        for p in range(parts):
            end = position + len(word) if p == parts - 1 else position + (p + 1) * size
            spans.append((position + p * size, end))
        position += len(word) + 1
    return np.array(spans)


def test_consecutive_windows_end_between_words() -> None:
    text = "aa bb cc dd ee"
    spans = cut_windows(offsets_of(text), pieces=2, stride=2)
    assert [text[a:b] for a, b in spans] == ["aa bb", "cc dd", "ee"]
    # a word of three pieces is not cut while a window has a place between words
    text = "aa bbbbbb cc"
    spans = cut_windows(offsets_of(text, {"bbbbbb": 3}), pieces=3, stride=3)
    assert [text[a:b] for a, b in spans] == ["aa", "bbbbbb", "cc"]
    # one word longer than a window is cut inside
    text = "aaaaaaaaa"
    spans = cut_windows(offsets_of(text, {text: 3}), pieces=2, stride=2)
    assert [text[a:b] for a, b in spans] == ["aaaaaa", "aaa"]
    assert cut_windows(offsets_of("aa bb"), pieces=2, stride=1) == [(0, 5)]
    assert cut_windows(np.zeros((0, 2), dtype=np.int64), pieces=2, stride=2) == []


def test_overlapping_windows_start_every_stride() -> None:
    text = "aa bb cc dd ee ff"
    spans = cut_windows(offsets_of(text), pieces=4, stride=1)
    assert [text[a:b] for a, b in spans] == ["aa bb cc dd", "bb cc dd ee", "cc dd ee ff"]
    spans = cut_windows(offsets_of(text), pieces=4, stride=2)
    assert [text[a:b] for a, b in spans] == ["aa bb cc dd", "cc dd ee ff"]


def test_the_encoder_s_windows_hold_every_piece_within_its_length() -> None:
    from gate.features.embeddings import model_directory

    tokenizer, pieces = window_tokenizer(model_directory(None))
    assert pieces == 254  # MiniLM's 256 less [CLS] and [SEP]
    rng = np.random.default_rng(0)
    words = ["patient", "unbelievably", "Dr.", "Rose", "called,", "9:30", "électricité", "x"]
    texts = [" ".join(rng.choice(words, size=int(n))) for n in (3, 200, 700, 1500)]
    texts.append("y" * 5000)  # one word of many pieces
    cut = text_windows(texts, tokenizer=tokenizer, pieces=pieces)
    counts = cut.windows_per_text(len(texts))
    assert counts[0] == 1 and cut.texts[0] == texts[0] and counts.min() >= 1
    assert list(cut.owner) == sorted(cut.owner)
    for row, text in enumerate(texts):
        windows = [w for w, o in zip(cut.texts, cut.owner, strict=True) if o == row]
        lengths = [len(e.ids) for e in tokenizer.encode_batch(windows, add_special_tokens=False)]
        assert max(lengths) <= pieces
        whole = tokenizer.encode(text, add_special_tokens=False).tokens
        joined = [
            t for e in tokenizer.encode_batch(windows, add_special_tokens=False) for t in e.tokens
        ]
        assert joined == whole  # consecutive: every piece once, in order
    sliding = text_windows(texts, tokenizer=tokenizer, pieces=pieces, stride=64)
    assert sliding.windows_per_text(len(texts))[2] > counts[2]
    with pytest.raises(ValueError, match="stride <= pieces"):
        text_windows(texts, tokenizer=tokenizer, pieces=8, stride=9)


def test_record_vectors_are_the_normalised_mean_of_windows() -> None:
    vectors = np.array([[1, 0], [0, 1], [1, 0]], dtype=np.float32)
    out = record_vectors(vectors, np.array([0, 0, 1]), 2)
    np.testing.assert_allclose(out, [[2**-0.5, 2**-0.5], [1, 0]], rtol=1e-6)
    assert record_vectors(vectors, np.array([0, 1, 2]), 3) is vectors


def test_nearest_records_is_brute_force_over_window_pairs() -> None:
    """Random windows of 9 query and 11 base records: the k nearest records by their
    closest pair of windows, from a search of k·m windows per query window."""
    rng = np.random.default_rng(1)
    query_owner = np.sort(rng.integers(0, 9, size=30))
    query_owner[:9] = np.arange(9)
    query_owner.sort()
    base_owner = np.sort(np.concatenate([np.arange(11), rng.integers(0, 11, size=25)]))
    queries = rng.normal(size=(query_owner.size, 4))
    base = rng.normal(size=(base_owner.size, 4))
    window_sims = queries @ base.T
    record_sims = np.full((9, 11), -np.inf)
    np.maximum.at(record_sims, (query_owner[:, None], base_owner[None, :]), window_sims)
    most = int(np.bincount(base_owner).max())
    for k in (1, 2, 5):
        top = np.argsort(-window_sims, axis=1, kind="stable")[:, : k * most]
        sims, ids = nearest_records(
            np.take_along_axis(window_sims, top, axis=1),
            base_owner[top],
            query_owner,
            n_queries=9,
            k=k,
        )
        expected = -np.sort(-record_sims, axis=1)[:, :k]
        np.testing.assert_allclose(sims, expected)
        np.testing.assert_allclose(np.take_along_axis(record_sims, ids, axis=1), expected)
    with pytest.raises(ValueError, match="query record 0 has 1 distinct base records"):
        nearest_records(
            np.ones((1, 2)), np.zeros((1, 2), dtype=np.int64), np.zeros(1, int), n_queries=1, k=2
        )


def test_a_copy_after_a_preamble_is_seen_only_in_windows(tmp_path: Path) -> None:
    """Twelve train e-mails of 300-400 words copied after 280 words of another e-mail:
    the first window of each release record is the preamble (no disclosure); read in
    windows, copies are disclosed (those whose best-aligned release window is at cosine
    0.9 or more: half of them at a stride of a quarter window) and the holdout is not."""
    from gate.cli import main
    from gate.demo.corpora import email_threads, make_faker

    rng = np.random.default_rng(3)
    mails = [
        r["text"]
        for r in email_threads(36, rng=rng, fake=make_faker(3), min_words=300, max_words=400)
    ]
    train, holdout, other = mails[:12], mails[12:24], mails[24:]
    files = {}
    for name, rows in {
        "train": [{"user_id": f"t{i}", "text": t} for i, t in enumerate(train)],
        "holdout": [{"user_id": f"h{i}", "text": t} for i, t in enumerate(holdout)],
        "synthetic": [
            {"text": " ".join(o.split()[:280]) + " " + t} for o, t in zip(other, train, strict=True)
        ],
    }.items():
        files[name] = tmp_path / f"{name}.jsonl"
        files[name].write_text("".join(json.dumps(r) + "\n" for r in rows))
    metrics = {}
    for mode in ("first", "all"):
        policy = tmp_path / f"{mode}.yaml"
        policy.write_text(
            "version: 1\nname: windows\naudits:\n  disclosure:\n"
            f"    features: [{{class: semantic, windows: {mode}, rare_quantile: 1.0}}]\n"
            "    thresholds: {max_epsilon: 0.5}\n"
        )
        out = tmp_path / mode
        args = ["check", "--quiet", "--policy", str(policy), "--no-mlflow", "--out", str(out)]
        args += [f"--{k}={v}" for k, v in files.items()]
        main(args)
        report = json.loads((out / "report.json").read_text())
        metrics[mode] = report["audits"]["disclosure"]["metrics"]
        windows = report["audits"]["disclosure"]["details"]["semantic"]["windows"]
        assert windows["mode"] == mode
    assert metrics["first"]["semantic.train_disclosures"] == 0
    assert metrics["all"]["semantic.train_disclosures"] >= 4  # 6 of 12 on this machine
    assert metrics["all"]["semantic.holdout_disclosures"] == 0
    assert windows["source_records_in_several"] == 24 and windows["release_window_stride"] == 64
