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
    nearest_release_records,
    record_vectors,
    search_width,
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
    # the last window is the text's last two pieces, not the fragment "ee"
    assert [text[a:b] for a, b in spans] == ["aa bb", "cc dd", "dd ee"]
    # a word of three pieces is not cut while a window has a place between words
    text = "aa bbbbbb cc"
    spans = cut_windows(offsets_of(text, {"bbbbbb": 3}), pieces=3, stride=3)
    assert [text[a:b] for a, b in spans] == ["aa", "bbbbbb", "cc"]
    # one word longer than a window is cut inside, at a pre-tokenised word if it has one
    text = "aaaaaaaaa"
    spans = cut_windows(offsets_of(text, {text: 3}), pieces=2, stride=2)
    assert [text[a:b] for a, b in spans] == ["aaaaaa", "aaaaaa"]
    text = "ab.cd.ef"
    offsets = np.array([[0, 2], [2, 3], [3, 5], [5, 6], [6, 7], [7, 8]])
    word_ids = np.array([0, 1, 2, 3, 4, 4], dtype=float)  # "e" "##f": one word
    spans = cut_windows(offsets, word_ids, pieces=3, stride=3)
    assert [text[a:b] for a, b in spans] == ["ab.cd", ".ef"]
    spans = cut_windows(offsets, word_ids, pieces=2, stride=2)
    assert [text[a:b] for a, b in spans] == ["ab.", "cd.", "ef"]
    spans = cut_windows(offsets, None, pieces=2, stride=2)  # no word boundaries known
    assert [text[a:b] for a, b in spans] == ["ab.", "cd.", "ef"]
    spans = cut_windows(offsets, None, pieces=4, stride=4)
    assert [text[a:b] for a, b in spans] == ["ab.cd.", "cd.ef"]
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
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz0123456789"))
    url = "https://example.org/" + "/".join(
        "".join(rng.choice(letters, size=int(rng.integers(3, 40)))) for _ in range(150)
    )
    texts.append(url)  # no white space: cut where the tokenizer starts a word
    texts.append("-".join(["unbelievably"] * 400))
    cut = text_windows(texts, tokenizer=tokenizer, pieces=pieces)
    counts = np.bincount(cut.owner, minlength=len(texts))
    assert counts[0] == 1 and cut.texts[0] == texts[0] and counts.min() >= 1
    assert list(cut.owner) == sorted(cut.owner)
    for row, text in enumerate(texts):
        windows = [w for w, o in zip(cut.texts, cut.owner, strict=True) if o == row]
        lengths = [len(e.ids) for e in tokenizer.encode_batch(windows, add_special_tokens=False)]
        assert max(lengths) <= pieces
        whole = tokenizer.encode(text, add_special_tokens=False).tokens
        tokens = [e.tokens for e in tokenizer.encode_batch(windows, add_special_tokens=False)]
        # consecutive but the last, which is the text's last pieces: every piece, in order
        head = [t for part in tokens[:-1] for t in part]
        assert head == whole[: len(head)] and tokens[-1] == whole[len(whole) - len(tokens[-1]) :]
        assert len(head) + len(tokens[-1]) >= len(whole)
        if len(windows) > 1:
            assert len(tokens[-1]) > pieces - 8  # not a short tail
    sliding = text_windows(texts, tokenizer=tokenizer, pieces=pieces, stride=64)
    assert np.bincount(sliding.owner, minlength=len(texts))[2] > counts[2]
    with pytest.raises(ValueError, match="stride <= pieces"):
        text_windows(texts, tokenizer=tokenizer, pieces=8, stride=9)


def test_record_vectors_are_the_normalised_mean_of_windows() -> None:
    vectors = np.array([[1, 0], [0, 1], [1, 0]], dtype=np.float32)
    out = record_vectors(vectors, np.array([0, 0, 1]), 2)
    np.testing.assert_allclose(out, [[2**-0.5, 2**-0.5], [1, 0]], rtol=1e-6)
    assert record_vectors(vectors, np.array([0, 1, 2]), 3) is vectors


def brute_force(window_sims: np.ndarray, query_owner, base_owner, n_queries, n_base, k):
    record_sims = np.full((n_queries, n_base), -np.inf)
    np.maximum.at(record_sims, (query_owner[:, None], base_owner[None, :]), window_sims)
    return record_sims, -np.sort(-record_sims, axis=1)[:, :k]


def test_nearest_records_is_brute_force_over_window_pairs() -> None:
    """Random windows of 9 query and 11 base records, one of which has 40 windows: the k
    nearest records by their closest pair of windows, from searches that widen only for
    the query windows the long record crowds."""
    rng = np.random.default_rng(1)
    query_owner = np.sort(np.concatenate([np.arange(9), rng.integers(0, 9, size=21)]))
    base_owner = np.sort(np.concatenate([np.arange(11), rng.integers(0, 11, size=25), [4] * 40]))
    queries = rng.normal(size=(query_owner.size, 4))
    base = rng.normal(size=(base_owner.size, 4))
    base[base_owner == 4] = base[base_owner == 4] * 0.2 + queries[0]  # crowds query 0
    window_sims = queries @ base.T
    widths = []

    def search(q: np.ndarray, b: np.ndarray, width: int):
        widths.append((q.shape[0], width))
        sims = q @ b.T
        top = np.argsort(-sims, axis=1, kind="stable")[:, :width]
        return np.take_along_axis(sims, top, axis=1), top, "how"

    for k in (1, 2, 5, 11, 20):
        widths.clear()
        record_sims, expected = brute_force(window_sims, query_owner, base_owner, 9, 11, min(k, 11))
        sims, ids, how = nearest_release_records(
            queries, query_owner, base, base_owner, k=k, search=search
        )
        assert how == "how" and sims.shape == (9, min(k, 11))
        np.testing.assert_allclose(sims, expected)
        np.testing.assert_allclose(np.take_along_axis(record_sims, ids, axis=1), expected)
        assert widths[0] == (30, min(k, 11))  # every window at width k first
        if k == 1:
            assert len(widths) == 1
        if k == 2:  # only the crowded windows are searched again
            assert len(widths) > 1 and widths[1][0] < 30
    with pytest.raises(ValueError, match="query record 0 has 1 distinct base records"):
        nearest_records(
            np.ones(2), np.zeros(2, dtype=np.int64), np.zeros(2, dtype=np.int64), n_queries=1, k=2
        )
    assert search_width(k=3, most_windows=40) == 81


def write_preamble_bundle(directory: Path) -> dict[str, Path]:
    """Train, holdout and release files: twelve train e-mails of 300-400 words (one
    sender each), twelve holdout ones, and a release that copies each train e-mail
    between 280 words of another e-mail and its next 100."""
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
            {"text": " ".join([*o.split()[:280], t, *o.split()[280:380]])}
            for o, t in zip(other, train, strict=True)
        ],
    }.items():
        files[name] = directory / f"{name}.jsonl"
        files[name].write_text("".join(json.dumps(r) + "\n" for r in rows))
    return files


def test_a_copy_after_a_preamble_is_seen_only_in_windows(tmp_path: Path) -> None:
    """Twelve train e-mails of 300-400 words copied between 280 words of another e-mail
    and its next 100 (aligned with neither end of the release text): the first window
    of each release record is the preamble (no disclosure); read in
    windows, copies are disclosed (those whose best-aligned release window is at cosine
    0.9 or more) and the holdout is not. The counts are blind to membership (what keeps
    the test's level under the null): with train and holdout swapped, the same records
    are disclosed, now on the holdout side."""
    from gate.cli import main

    files = write_preamble_bundle(tmp_path)
    swapped = {**files, "train": files["holdout"], "holdout": files["train"]}
    metrics = {}
    for run, mode, inputs in (
        ("first", "first", files),
        ("all", "all", files),
        ("swapped", "all", swapped),
    ):
        policy = tmp_path / f"{run}.yaml"
        policy.write_text(
            "version: 1\nname: windows\naudits:\n  disclosure:\n"
            f"    features: [{{class: semantic, windows: {mode}, rare_quantile: 1.0, "
            f"cache_dir: {tmp_path / 'cache'}}}]\n"
            "    thresholds: {max_epsilon: 0.5}\n"
        )
        out = tmp_path / run
        args = ["check", "--quiet", "--policy", str(policy), "--no-mlflow", "--out", str(out)]
        args += [f"--{k}={v}" for k, v in inputs.items()]
        main(args)
        report = json.loads((out / "report.json").read_text())
        metrics[run] = report["audits"]["disclosure"]["metrics"]
        windows = report["audits"]["disclosure"]["details"]["semantic"]["windows"]
        assert windows["mode"] == mode
    assert metrics["first"]["semantic.train_disclosures"] == 0
    assert metrics["all"]["semantic.train_disclosures"] >= 4
    assert metrics["all"]["semantic.holdout_disclosures"] == 0
    assert windows["source_records_in_several"] == 24 and windows["release_window_stride"] == 64
    assert metrics["swapped"]["semantic.train_disclosures"] == 0
    assert (
        metrics["swapped"]["semantic.holdout_disclosures"]
        == metrics["all"]["semantic.train_disclosures"]
    )


NEWSLETTER = (
    "Dear valued customer, we are writing to let you know about important changes to our "
    "terms of service and privacy policy, which take effect on the first day of next month. "
    "Starting next month, all refunds will be issued to the original payment method within "
    "five business days of our receiving the returned item. Deliveries to apartment "
    "buildings will require a signature unless you choose a safe place in your account "
    "settings. We have also introduced two-step verification for every account; you will "
    "be asked to confirm a code sent to your phone or e-mail address when you sign in from "
    "a new device. Our customer service team can now be reached by chat seven days a week "
    "between eight in the morning and ten at night, and by telephone on weekdays. We are "
    "also updating how we use cookies on our website: you can review and change your "
    "preferences at any time from the privacy page. None of these changes affect your "
    "existing orders, subscriptions or gift card balances. If you have any questions about "
    "these changes, simply reply to this e-mail and a member of our team will get back to "
    "you within two working days. Thank you for being a loyal customer; we look forward to "
    "serving you for many years to come. Kind regards, the Customer Experience Team. You "
    "are receiving this e-mail because you have an account with us. To unsubscribe from "
    "marketing messages, visit the preferences page of your account; service messages such "
    "as this one cannot be switched off."
)


@pytest.mark.parametrize("windows", ["first", "all"])
def test_a_quoted_newsletter_every_user_shares_discloses_nothing_by_itself(
    tmp_path: Path, windows: str
) -> None:
    """A review: every record a support chat followed by the same quoted newsletter (more
    than one window), the release a verbatim copy of train. Read in windows, the shared
    last window was a match at cosine 1 for every rare record, train and holdout alike
    (T 11, H 9: PASS). A match now has to be nearer than other users' records are, which
    the shared window never is: train records are disclosed, holdout records are not."""
    from gate.api import run_gate
    from gate.data.bundle import load_bundle
    from gate.demo.corpora import make_faker, support_records
    from gate.policy import parse_policy
    from gate.policy.models import MembershipPolicy
    from tests.conftest import write_jsonl

    records = support_records(240, rng=np.random.default_rng(1), fake=make_faker(1), max_records=1)
    for record in records:
        record["text"] += "\n\nOn 2026-05-01, Customer Experience wrote:\n> " + NEWSLETTER
    users = sorted({r["user_id"] for r in records})
    in_train = set(np.asarray(users)[np.random.default_rng(0).random(len(users)) < 0.5])
    train = [r for r in records if r["user_id"] in in_train]
    files = {
        "train": write_jsonl(tmp_path / "train.jsonl", train),
        "holdout": write_jsonl(
            tmp_path / "holdout.jsonl", [r for r in records if r["user_id"] not in in_train]
        ),
        "synthetic": write_jsonl(
            tmp_path / "synthetic.jsonl",
            [{"record_id": f"s{i}", "text": r["text"]} for i, r in enumerate(train)],
        ),
    }
    policy = parse_policy(
        "version: 1\nname: t\naudits:\n  disclosure:\n"
        f"    features: [{{class: semantic, windows: {windows}}}]\n"
        "    thresholds: {max_epsilon: 0.5}\n"
    )
    result = run_gate(policy, load_bundle(membership=MembershipPolicy(), **files))
    audit = result.audits["disclosure"]
    metrics = audit.result.metric_values
    assert metrics["semantic.train_disclosures"] >= 5
    assert metrics["semantic.holdout_disclosures"] == 0
    assert audit.status == "fail"
    if windows == "all":  # the shared window reaches every rare record at cosine 1
        assert audit.result.details["semantic"]["rare_matches_other_users_explain"] >= 5


@pytest.mark.parametrize("windows", ["first", "all"])
def test_semantic_user_counts_do_not_depend_on_the_split(tmp_path: Path, windows: str) -> None:
    """What the test's level rests on: rarity (other users' records as neighbours) and
    matches nearer than other users' records read the source's records and users and the
    release, never the split, so each user's count is the same under two splits (one
    release copying a third of the records, each with the shared newsletter)."""
    from gate.audits.feature_store import FeatureStore
    from gate.data.bundle import load_bundle
    from gate.demo.corpora import make_faker, support_records
    from gate.plugins import DISCLOSURE_CLASSES
    from gate.policy.models import MembershipPolicy, SemanticFeatures
    from gate.progress import NullProgress
    from tests.conftest import write_jsonl

    records = support_records(150, rng=np.random.default_rng(2), fake=make_faker(2), max_records=1)
    for record in records[::2]:
        record["text"] += "\n\nOn 2026-05-01, Customer Experience wrote:\n> " + NEWSLETTER
    release = [{"record_id": f"s{i}", "text": r["text"]} for i, r in enumerate(records[::3])]
    config = SemanticFeatures.model_validate(
        {"class": "semantic", "windows": windows, "rare_quantile": 0.3}
    )
    counts = []
    for seed in (1, 2):
        in_train = np.random.default_rng(seed).random(len(records)) < 0.5
        folder = tmp_path / str(seed)
        folder.mkdir()
        bundle = load_bundle(
            membership=MembershipPolicy(),
            train=write_jsonl(
                folder / "t.jsonl", [r for r, t in zip(records, in_train, strict=True) if t]
            ),
            holdout=write_jsonl(
                folder / "h.jsonl", [r for r, t in zip(records, in_train, strict=True) if not t]
            ),
            synthetic=write_jsonl(folder / "s.jsonl", release),
        )
        found = DISCLOSURE_CLASSES.get("semantic")().disclosures(
            bundle, config, FeatureStore(bundle, NullProgress())
        )
        users = np.unique(bundle.source["user_id"])
        counts.append(dict(zip(users.tolist(), found.user_counts.tolist(), strict=True)))
    assert counts[0] == counts[1]
    assert sum(counts[0].values()) >= 5
