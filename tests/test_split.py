"""`gate split`: reproducible Bernoulli(p) assignment by user, manifest, verification."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from gate.cli import main
from gate.data.bundle import load_bundle
from gate.data.split import draw_key, draw_sides, read_manifest, split_source
from gate.errors import BundleError
from gate.policy.models import MembershipPolicy

from .conftest import unique_text, write_jsonl


@pytest.fixture
def source(tmp_path: Path) -> Path:
    rows = [
        {"record_id": f"r{i}", "user_id": f"u{i // 3}", "text": unique_text(i)} for i in range(300)
    ]
    return write_jsonl(tmp_path / "source.jsonl", rows)


def test_same_seed_gives_identical_files(source: Path, tmp_path: Path) -> None:
    a = split_source(source, p=0.5, seed=11, by="user_id", out_dir=tmp_path / "a")
    b = split_source(source, p=0.5, seed=11, by="user_id", out_dir=tmp_path / "b")
    for name in ("train.jsonl", "holdout.jsonl"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
    assert a.manifest.train.sha256 == b.manifest.train.sha256
    c = split_source(source, p=0.5, seed=12, by="user_id", out_dir=tmp_path / "c")
    assert c.manifest.train.sha256 != a.manifest.train.sha256


def test_users_stay_together_and_counts_add_up(source: Path, tmp_path: Path) -> None:
    outcome = split_source(source, p=0.3, seed=5, by="user_id", out_dir=tmp_path / "o")
    m = outcome.manifest
    train = [json.loads(line) for line in (tmp_path / "o" / "train.jsonl").read_text().splitlines()]
    holdout = [
        json.loads(line) for line in (tmp_path / "o" / "holdout.jsonl").read_text().splitlines()
    ]
    assert not {r["user_id"] for r in train} & {r["user_id"] for r in holdout}
    assert m.train.records + m.holdout.records == m.source.records == 300
    assert m.train.users + m.holdout.users == m.source.users == 100
    assert (m.p, m.seed, m.by, m.method) == (0.3, 5, "user_id", "bernoulli-keyed")


def _train_flags(users: np.ndarray, *, p: float, seed: int, keyed: bool) -> np.ndarray:
    key = draw_key(users, users) if keyed else None  # each user's one text: its name
    return draw_sides(users, p=p, seed=seed, canary_fraction=0.0, key=key)[0]


@pytest.mark.parametrize("keyed", [False, True])
def test_assignment_ignores_row_order(keyed: bool) -> None:
    users = np.array([f"u{i}" for i in range(50)])
    flags = _train_flags(users, p=0.5, seed=3, keyed=keyed)
    flags_shuffled = _train_flags(users[::-1], p=0.5, seed=3, keyed=keyed)
    assert (flags_shuffled == flags[::-1]).all()


@pytest.mark.parametrize("keyed", [False, True])
def test_assignment_is_bernoulli_p(keyed: bool) -> None:
    """Across seeds, the train count of 200 users is Binomial(200, p): a KS-style check on
    the pooled share and a chi-square on per-user frequencies."""
    users = np.array([f"user-{i}" for i in range(200)])
    p = 0.3
    draws = np.array([_train_flags(users, p=p, seed=s, keyed=keyed) for s in range(400)])
    totals = draws.sum(axis=1)
    # Binomial(200, 0.3): mean 60, var 42; the mean of 400 draws has sd 0.324.
    assert abs(totals.mean() - 60) < 4 * np.sqrt(42 / 400)
    assert abs(totals.var(ddof=1) / 42 - 1) < 0.25
    # Each user is in train with probability p, independently of the others.
    per_user = draws.mean(axis=0)
    assert stats.binomtest(int(draws.sum()), draws.size, p).pvalue > 1e-3
    assert abs(np.corrcoef(draws[:, 0], draws[:, 1])[0, 1]) < 0.2
    assert per_user.min() > 0.15 and per_user.max() < 0.45


def test_manifest_is_accepted_and_recorded(source: Path, tmp_path: Path, bundle_files) -> None:
    outcome = split_source(source, p=0.5, seed=9, by="user_id", out_dir=tmp_path / "s")
    bundle = load_bundle(
        membership=MembershipPolicy(),
        manifest=outcome.manifest_path,
        synthetic=bundle_files["synthetic"],
    )
    assert bundle.membership.how == "gate split seed=9"
    assert bundle.membership.seed == 9
    assert len(bundle.source) == 300


def test_manifest_detects_changed_files(source: Path, tmp_path: Path, bundle_files) -> None:
    outcome = split_source(source, p=0.5, seed=9, by="user_id", out_dir=tmp_path / "s")
    train = tmp_path / "s" / "train.jsonl"
    train.write_text(train.read_text() + json.dumps({"user_id": "new", "text": "x"}) + "\n")
    with pytest.raises(BundleError, match=r"the train file does not match the manifest"):
        load_bundle(
            membership=MembershipPolicy(),
            manifest=outcome.manifest_path,
            synthetic=bundle_files["synthetic"],
        )


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        ({"seed": 10}, "seed 10 and p = 0.5 do not give this split"),
        ({"train": {"users": 1}}, "train: the files hold"),
        ({"holdout": {"records": 999999}}, "holdout: the files hold"),
        ({"swap": True}, "do not give this split"),
        ({"by": "record_id"}, "train: the files hold"),
    ],
)
def test_a_manifest_is_checked_not_trusted(
    source: Path, tmp_path: Path, bundle_files, edit: dict, message: str
) -> None:
    """A review: a manifest's seed, counts and sides were never checked, so anyone could
    give a hand-picked split a manifest (the report then claimed "gate split seed=...")."""
    outcome = split_source(source, p=0.5, seed=9, by="user_id", out_dir=tmp_path / "s")
    data = json.loads(outcome.manifest_path.read_text())
    if edit.pop("swap", False):
        data["train"], data["holdout"] = data["holdout"], data["train"]
    for key, value in edit.items():
        if isinstance(value, dict):
            data[key].update(value)
        else:
            data[key] = value
    outcome.manifest_path.write_text(json.dumps(data))
    with pytest.raises(BundleError, match=re.escape(message)):
        load_bundle(
            membership=MembershipPolicy(),
            manifest=outcome.manifest_path,
            synthetic=bundle_files["synthetic"],
        )


def test_a_split_with_canaries_is_checked_with_its_canary_source(
    source: Path, tmp_path: Path, bundle_files
) -> None:
    outcome = split_source(
        source, p=0.5, seed=9, by="user_id", out_dir=tmp_path / "s", canary_fraction=0.2
    )
    load = dict(membership=MembershipPolicy(), synthetic=bundle_files["synthetic"])
    assert load_bundle(manifest=outcome.manifest_path, **load).canary_source is not None
    data = json.loads(outcome.manifest_path.read_text())
    outcome.manifest_path.write_text(json.dumps({**data, "seed": 8}))
    with pytest.raises(BundleError, match=r"seed 8 and p = 0\.5 do not give this split"):
        load_bundle(manifest=outcome.manifest_path, **load)


def _hand_made_split(tmp_path: Path, rows: list[dict], manifest: dict) -> Path:
    """train.jsonl and holdout.jsonl picked by hand (the first half of the users in
    train) and a manifest with their true hashes and counts and the given fields."""
    from gate.digests import sha256_file

    out = tmp_path / "hand"
    out.mkdir(parents=True)
    half = len(rows) // 2
    entries = {}
    for side, part in (("train", rows[:half]), ("holdout", rows[half:])):
        path = write_jsonl(out / f"{side}.jsonl", part)
        users = {r.get("user_id", r["text"]) for r in part}
        entries[side] = {
            "path": path.name,
            "sha256": sha256_file(path),
            "records": len(part),
            "users": len(users),
        }
    source = write_jsonl(out / "source.jsonl", rows)
    data = {
        "schema_version": 1,
        "kind": "gate-split-manifest",
        "method": "bernoulli",
        "p": 0.5,
        "seed": 42,
        "by": "user_id",
        "gate_version": "0",
        "source": {
            "path": "source.jsonl",
            "sha256": sha256_file(source),
            "records": len(rows),
            "users": len({r.get("user_id", r["text"]) for r in rows}),
        },
        **entries,
        **manifest,
    }
    path = out / "split-manifest.json"
    path.write_text(json.dumps(data))
    return path


def test_a_hand_made_split_cannot_borrow_a_seed(tmp_path: Path, bundle_files) -> None:
    """A review: a manifest with a canary fraction but no canary source, or files without a
    user column (a split by line), skipped the draw's check, and a hand-picked split was
    reported as "gate split seed=42"."""
    load = dict(membership=MembershipPolicy(), synthetic=bundle_files["synthetic"])
    by_user = [{"user_id": f"u{i:02d}", "text": unique_text(i)} for i in range(40)]
    path = _hand_made_split(tmp_path / "a", by_user, {"canary_fraction": 0.25})
    with pytest.raises(BundleError, match=r"canary_fraction 0.25 without a canary_source"):
        load_bundle(manifest=path, **load)
    by_line = [{"text": unique_text(i)} for i in range(40)]
    path = _hand_made_split(tmp_path / "b", by_line, {})
    with pytest.raises(BundleError, match=r"seed 42 and p = 0.5 do not give this split: the train"):
        load_bundle(manifest=path, **load)
    (path.parent / "source.jsonl").unlink()
    with pytest.raises(BundleError, match=r"checked against its source file, .*cannot be read"):
        load_bundle(manifest=path, **load)


def test_draw_key_is_the_hash_of_every_records_user_and_text_sorted() -> None:
    def le(*values: int) -> bytes:
        return np.array(values, dtype="<i8").tobytes()

    # records (b, x), (a, é€), (a, y): sorted (a, y), (a, é€), (b, x) by code point
    expected = hashlib.sha256(le(3) + le(1, 1, 1) + b"aab" + le(1, 5, 1) + "yé€x".encode())
    key = draw_key(np.array(["b", "a", "a"]), np.array(["x", "é€", "y"]))
    assert key == expected.digest()
    # who holds which text, not the names alone: the names swapped are another key
    assert key != draw_key(np.array(["a", "b", "b"]), np.array(["x", "é€", "y"]))
    assert draw_key(np.array(["ab", "c"]), ["t", "t"]) != draw_key(
        np.array(["a", "bc"]), ["t", "t"]
    )
    assert draw_key(np.array([7, 12]), ["s", "t"]) == draw_key(np.array(["12", "7"]), ["t", "s"])
    # a NUL is a character like another (a review: names were cut at it, "T\x00a" was "T")
    assert draw_key(np.array(["T\x00a", "T"], dtype=object), ["s", "t"]) != draw_key(
        np.array(["T", "T"], dtype=object), ["s", "t"]
    )
    assert draw_key(np.array([], dtype=object), []) == hashlib.sha256(le(0)).digest()


def test_the_unkeyed_draw_is_the_one_earlier_splits_made() -> None:
    """Manifests of earlier gate splits are checked against the draw they were made with:
    numpy's sorted distinct names (code-point order), one uniform each from the seed."""
    rng = np.random.default_rng(5)
    alphabet = np.array(list("aZ9_-.@éßΩ語😀\u0301\U0001f600 "))
    names = np.array(["".join(rng.choice(alphabet, size=rng.integers(1, 6))) for _ in range(500)])
    for seed in (0, 7, 2**40):
        distinct = np.unique(names)
        earlier = (np.random.default_rng(seed).random(distinct.size) < 0.3)[
            np.searchsorted(distinct, names)
        ]
        flags, _ = draw_sides(names, p=0.3, seed=seed, canary_fraction=0.0, key=None)
        assert (flags == earlier).all()


def _fitted_names(want_train: np.ndarray, *, seed: int, key: bytes | None) -> np.ndarray:
    """Names that put the users ``want_train`` picks into train: draw over a set of names,
    then give the names the seed draws for train to the users meant for train (the
    forgery two reviews showed: against the unkeyed draw, and against a draw keyed by the
    set of names, which the handing out leaves as it was)."""
    n = want_train.size
    slots = np.array([f"u{i:03d}" for i in range(n)])
    drawn, _ = draw_sides(slots, p=0.5, seed=seed, canary_fraction=0.0, key=key)
    if drawn.sum() != want_train.sum():
        raise ValueError("choose a seed that draws as many train users as are wanted")
    names = np.empty(n, dtype=object)
    names[want_train], names[~want_train] = slots[drawn], slots[~drawn]
    return names


@pytest.mark.parametrize("names_key", [False, True])
def test_a_hand_picked_split_cannot_be_fitted_by_naming_its_users(
    tmp_path: Path, bundle_files, names_key: bool
) -> None:
    """Two reviews: anyone could name the users of a hand-picked split so that a seed
    draws it, under the unkeyed draw and under a draw keyed by the set of names. Keyed by
    who holds which text, the draw refuses both; the unkeyed one of an earlier gate split
    is still checked, and the report says which it was."""
    load = dict(membership=MembershipPolicy(), synthetic=bundle_files["synthetic"])
    want_train = np.arange(40) < 20  # the first twenty, hand-picked
    slots = np.array([f"u{i:03d}" for i in range(40)])
    # the set of names keyed alone: the key the first keyed draw had (a user holds a name)
    key = draw_key(slots, slots) if names_key else None
    seed = next(
        s
        for s in range(1000)
        if draw_sides(slots, p=0.5, seed=s, canary_fraction=0.0, key=key)[0].sum() == 20
    )
    names = _fitted_names(want_train, seed=seed, key=key)
    assert (
        draw_sides(names, p=0.5, seed=seed, canary_fraction=0.0, key=key)[0] == want_train
    ).all()
    rows = [{"user_id": name, "text": unique_text(i)} for i, name in enumerate(names)]
    if not names_key:
        unkeyed = _hand_made_split(tmp_path / "u", rows, {"seed": seed, "method": "bernoulli"})
        bundle = load_bundle(manifest=unkeyed, **load)
        assert bundle.membership.how == f"gate split seed={seed}, an earlier unkeyed draw"
    keyed = _hand_made_split(tmp_path / "k", rows, {"seed": seed, "method": "bernoulli-keyed"})
    with pytest.raises(BundleError, match=rf"seed {seed} and p = 0\.5 do not give this split"):
        load_bundle(manifest=keyed, **load)


def test_a_keyed_split_is_another_draw_for_other_holders(tmp_path: Path) -> None:
    """Who holds which text keys the draw: the same seed splits the same names holding
    other texts, or the same lines in another order, otherwise."""
    users = np.array([f"u{i:03d}" for i in range(200)])
    texts = np.array([unique_text(i) for i in range(200)])
    draw = dict(p=0.5, seed=9, canary_fraction=0.0)
    a, _ = draw_sides(users, key=draw_key(users, texts), **draw)
    b, _ = draw_sides(users, key=draw_key(users, texts[::-1]), **draw)
    assert (a != b).sum() > 60  # about 100 of 200 differ
    rows = [{"text": unique_text(i)} for i in range(200)]
    (tmp_path / "f").mkdir(), (tmp_path / "b").mkdir()
    forward = write_jsonl(tmp_path / "f" / "source.jsonl", rows)
    backward = write_jsonl(tmp_path / "b" / "source.jsonl", rows[::-1])
    sides = []
    for source in (forward, backward):
        outcome = split_source(source, p=0.5, seed=9, by="user_id", out_dir=source.parent / "s")
        train = (source.parent / "s" / "train.jsonl").read_text().splitlines()
        sides.append({json.loads(line)["text"] for line in train})
        assert outcome.manifest.method == "bernoulli-keyed"
    assert len(sides[0] ^ sides[1]) > 60


def test_users_the_draw_set_aside_as_canaries_are_not_taken_in_holdout(
    source: Path, tmp_path: Path, bundle_files
) -> None:
    """A review: only the train side was compared with the draw, so canary users moved
    into holdout (hashes and counts mended in the manifest) were accepted."""
    from gate.digests import sha256_file

    outcome = split_source(
        source, p=0.5, seed=3, by="user_id", out_dir=tmp_path / "s", canary_fraction=0.2
    )
    split = tmp_path / "s"
    canary_lines = (split / "canary-source.jsonl").read_text().splitlines(keepends=True)
    moved_user = json.loads(canary_lines[0])["user_id"]
    moved = [line for line in canary_lines if json.loads(line)["user_id"] == moved_user]
    kept = [line for line in canary_lines if json.loads(line)["user_id"] != moved_user]
    (split / "canary-source.jsonl").write_text("".join(kept))
    holdout = split / "holdout.jsonl"
    holdout.write_text(holdout.read_text() + "".join(moved))
    data = json.loads(outcome.manifest_path.read_text())
    data["holdout"].update(
        sha256=sha256_file(holdout),
        records=data["holdout"]["records"] + len(moved),
        users=data["holdout"]["users"] + 1,
    )
    data["canary_source"].update(
        sha256=sha256_file(split / "canary-source.jsonl"),
        records=data["canary_source"]["records"] - len(moved),
        users=data["canary_source"]["users"] - 1,
    )
    outcome.manifest_path.write_text(json.dumps(data))
    load = dict(membership=MembershipPolicy(), synthetic=bundle_files["synthetic"])
    with pytest.raises(BundleError, match=r"do not give this split: \d+ records are on another"):
        load_bundle(manifest=outcome.manifest_path, **load)


@pytest.mark.parametrize("canary_fraction", [0.0, 0.2])
def test_a_split_by_line_is_checked_against_its_source(
    tmp_path: Path, bundle_files, canary_fraction: float
) -> None:
    """A source without a user column is split by line; its draw is checked against the
    source file the manifest names (which must then be there, unchanged)."""
    source = write_jsonl(tmp_path / "source.jsonl", [{"text": unique_text(i)} for i in range(60)])
    outcome = split_source(
        source, p=0.5, seed=9, by="user_id", out_dir=tmp_path / "s", canary_fraction=canary_fraction
    )
    load = dict(membership=MembershipPolicy(), synthetic=bundle_files["synthetic"])
    assert load_bundle(manifest=outcome.manifest_path, **load).membership.how == "gate split seed=9"
    data = json.loads(outcome.manifest_path.read_text())
    outcome.manifest_path.write_text(json.dumps({**data, "seed": 8}))
    with pytest.raises(BundleError, match=r"seed 8 and p = 0\.5 do not give this split"):
        load_bundle(manifest=outcome.manifest_path, **load)
    outcome.manifest_path.write_text(json.dumps(data))
    source.write_text(source.read_text() + json.dumps({"text": "one more"}) + "\n")
    with pytest.raises(BundleError, match=r"the source file .* does not match the manifest"):
        load_bundle(manifest=outcome.manifest_path, **load)


def test_a_split_with_canaries_is_checked_when_another_canary_source_is_given(
    source: Path, tmp_path: Path, bundle_files
) -> None:
    """The draw runs over the manifest's own canary users even when the audit is given
    another canary source (before, the check was skipped then)."""
    outcome = split_source(
        source, p=0.5, seed=9, by="user_id", out_dir=tmp_path / "s", canary_fraction=0.2
    )
    public = write_jsonl(
        tmp_path / "public.jsonl",
        [{"user_id": f"p{i}", "text": f"public text number {i} of many"} for i in range(5)],
    )
    load = dict(
        membership=MembershipPolicy(), synthetic=bundle_files["synthetic"], canary_source=public
    )
    assert load_bundle(manifest=outcome.manifest_path, **load).membership.how == "gate split seed=9"
    data = json.loads(outcome.manifest_path.read_text())
    outcome.manifest_path.write_text(json.dumps({**data, "seed": 8}))
    with pytest.raises(BundleError, match=r"seed 8 and p = 0\.5 do not give this split"):
        load_bundle(manifest=outcome.manifest_path, **load)


def test_a_path_from_a_manifest_cannot_forge_a_line_of_output(
    source: Path, tmp_path: Path, bundle_files, capsys: pytest.CaptureFixture[str]
) -> None:
    """A review: a manifest's train path holding a newline and `verdict: PASS (exit 0)`
    was printed as its own line of the error."""
    outcome = split_source(source, p=0.5, seed=9, by="user_id", out_dir=tmp_path / "s")
    data = json.loads(outcome.manifest_path.read_text())
    data["train"]["path"] = "x\nverdict: PASS (exit 0)\n\x1b[32mgreen"
    outcome.manifest_path.write_text(json.dumps(data))
    args = ["check", "--policy", str(bundle_files["policy"]), "--no-mlflow", "--quiet"]
    args += [
        "--manifest",
        str(outcome.manifest_path),
        "--synthetic",
        str(bundle_files["synthetic"]),
    ]
    assert main([*args, "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "\x1b" not in err
    assert "x\\nverdict: PASS (exit 0)\\n\\x1b[32mgreen" in err


def test_float_and_padded_user_ids_are_split_as_gate_check_reads_them(tmp_path: Path) -> None:
    """A review: 240 float user ids became 3 after `gate split` (pandas wrote them to 10
    decimals) and "u1" / "u1 " were two users split to both sides."""
    floats = write_jsonl(
        tmp_path / "floats.jsonl",
        [{"user_id": 1000.0 + i, "text": unique_text(i)} for i in range(40)],
    )
    outcome = split_source(floats, p=0.5, seed=3, by="user_id", out_dir=tmp_path / "f")
    assert outcome.manifest.train.users + outcome.manifest.holdout.users == 40
    load_bundle(membership=MembershipPolicy(), manifest=outcome.manifest_path, synthetic=floats)
    fractions = write_jsonl(
        tmp_path / "fractions.jsonl",
        [{"user_id": 1.0000000000001 + i, "text": unique_text(i)} for i in range(40)],
    )
    with pytest.raises(BundleError, match="'user_id' must be a string or an integer"):
        split_source(fractions, p=0.5, seed=3, by="user_id", out_dir=tmp_path / "g")
    padded = write_jsonl(
        tmp_path / "padded.jsonl",
        [{"user_id": "u1" + " " * (i % 2), "text": unique_text(i)} for i in range(4)],
    )
    with pytest.raises(BundleError, match="line 2: 'user_id' has white space"):
        split_source(padded, p=0.5, seed=3, by="user_id", out_dir=tmp_path / "h")
    assert not (tmp_path / "g").exists() and not (tmp_path / "h").exists()


def test_a_record_a_writer_cannot_write_leaves_no_split(tmp_path: Path) -> None:
    """A lone surrogate nested in a field had failed the writer after train.jsonl was
    written (exit 3, train.jsonl left without a manifest). It is bad input now, and a
    split that fails for any reason removes what it wrote."""
    bad = tmp_path / "bad.jsonl"
    rows = [json.dumps({"user_id": f"u{i}", "text": unique_text(i)}) for i in range(10)]
    bad.write_text("\n".join(rows) + '\n{"user_id": "x", "text": "t", "meta": ["\\ud800"]}\n')
    with pytest.raises(BundleError, match=r"line 11: a field holds an unpaired surrogate"):
        split_source(bad, p=0.5, seed=3, by="user_id", out_dir=tmp_path / "o")
    assert not (tmp_path / "o").exists()


def test_manifest_p_must_match_policy(source: Path, tmp_path: Path, bundle_files) -> None:
    outcome = split_source(source, p=0.5, seed=9, by="user_id", out_dir=tmp_path / "s")
    with pytest.raises(
        BundleError, match=r"split was made with p = 0.5 but the policy declares membership.p = 0.4"
    ):
        load_bundle(
            membership=MembershipPolicy(p=0.4),
            manifest=outcome.manifest_path,
            synthetic=bundle_files["synthetic"],
        )


def test_bad_manifest(tmp_path: Path) -> None:
    path = tmp_path / "m.json"
    path.write_text('{"kind": "gate-split-manifest", "schema_version": 1}')
    with pytest.raises(BundleError, match=r"m.json: p: Field required"):
        read_manifest(path)
    for text, message in [
        ('{"schema_version": 1}', "kind: required key is missing"),
        ('{"kind": "gate-split-manifest"}', "schema_version: required key is missing"),
        (
            '{"kind": "gate-split-manifest", "schema_version": 2}',
            "schema_version: Input should be 1",
        ),
    ]:
        path.write_text(text)
        with pytest.raises(BundleError, match=message):
            read_manifest(path)


def test_a_manifest_is_read_strictly_and_its_user_column_must_exist(
    source: Path, tmp_path: Path, bundle_files
) -> None:
    outcome = split_source(source, p=0.5, seed=2, by="user_id", out_dir=tmp_path / "o")
    data = json.loads(outcome.manifest_path.read_text())
    outcome.manifest_path.write_text(json.dumps({**data, "p": "0.5"}))
    with pytest.raises(BundleError, match=r"p: Input should be a valid number"):
        read_manifest(outcome.manifest_path)
    for p, found in [("NaN", "nan"), ("Infinity", "inf")]:  # NaN had read "less than 1"
        outcome.manifest_path.write_text(json.dumps(data).replace('"p": 0.5', f'"p": {p}'))
        with pytest.raises(
            BundleError, match=rf"p: Input should be a finite number; found {found}"
        ):
            read_manifest(outcome.manifest_path)
    outcome.manifest_path.write_text(json.dumps({**data, "by": "author"}))
    with pytest.raises(BundleError, match=r"no 'author' column, by which the split manifest"):
        load_bundle(
            membership=MembershipPolicy(),
            manifest=outcome.manifest_path,
            synthetic=bundle_files["synthetic"],
        )


def test_split_without_user_column_splits_records(tmp_path: Path) -> None:
    source = write_jsonl(tmp_path / "s.csv.jsonl", [{"text": unique_text(i)} for i in range(40)])
    outcome = split_source(source, p=0.5, seed=1, by="user_id", out_dir=tmp_path / "o")
    assert outcome.manifest.source.users == 40


def test_split_by_missing_column(source: Path, tmp_path: Path) -> None:
    with pytest.raises(BundleError, match=r"no 'patient' column to split by"):
        split_source(source, p=0.5, seed=1, by="patient", out_dir=tmp_path / "o")


@pytest.mark.parametrize("by", ["text", "split", "__line__", "__file__"])
def test_split_by_what_names_no_user_is_refused(tmp_path: Path, by: str) -> None:
    """A review: ``--by __line__`` split by the gate's own line numbers (exit 0, one user's
    records on both sides), and ``--by text`` took identical texts for one user."""
    rows = [{"user_id": f"u{i % 10}", "text": unique_text(i)} for i in range(40)]
    source = write_jsonl(tmp_path / "s.jsonl", rows)
    with pytest.raises(BundleError, match=rf"--by {by}: .*split by the column that names users"):
        split_source(source, p=0.5, seed=1, by=by, out_dir=tmp_path / "o")
    assert not (tmp_path / "o").exists()


def test_split_that_would_put_a_user_on_both_sides_is_refused(tmp_path: Path) -> None:
    """A review: ``--by record_id`` on a file with a ``user_id`` column put users on both
    sides, and ``gate check --manifest`` of the split, reading the manifest's column,
    passed what ``--train``/``--holdout`` refuses. A column that keeps each user's records
    in one group (a clinic of several patients) is a split by a coarser unit, accepted."""
    rows = [
        {
            "record_id": f"r{i}",
            "user_id": f"u{i % 10}",
            "clinic": f"c{i % 5}",
            "text": unique_text(i),
        }
        for i in range(40)
    ]
    source = write_jsonl(tmp_path / "s.jsonl", rows)
    with pytest.raises(
        BundleError, match=r"--by record_id: 10 of 10 users of the 'user_id' column .*both sides"
    ):
        split_source(source, p=0.5, seed=1, by="record_id", out_dir=tmp_path / "o")
    assert not (tmp_path / "o").exists()
    outcome = split_source(source, p=0.5, seed=1, by="clinic", out_dir=tmp_path / "c")
    assert outcome.manifest.source.users == 5
    # records without a user id are no user's: a sparse column is no error (a review)
    for row in rows[::3]:
        row["user_id"] = None
    sparse = write_jsonl(tmp_path / "sparse.jsonl", rows)
    outcome = split_source(sparse, p=0.5, seed=1, by="clinic", out_dir=tmp_path / "sparse")
    assert outcome.manifest.source.users == 5
    with pytest.raises(BundleError, match=r"--by record_id: 10 of 10 users"):
        split_source(sparse, p=0.5, seed=1, by="record_id", out_dir=tmp_path / "o")


def test_a_manifest_by_another_column_with_a_user_on_both_sides_is_refused(
    tmp_path: Path,
) -> None:
    """The same review: the manifest's files, given a ``user_id`` column that puts a user
    on both sides, are refused as ``--train``/``--holdout`` refuses them."""
    rows = [{"record_id": f"r{i}", "text": unique_text(i)} for i in range(40)]
    source = write_jsonl(tmp_path / "s.jsonl", rows)
    split_source(source, p=0.5, seed=1, by="record_id", out_dir=tmp_path / "o")
    manifest_path = tmp_path / "o" / "split-manifest.json"
    manifest = json.loads(manifest_path.read_text())
    for side in ("train", "holdout"):  # the same four people wrote both sides' records
        path = tmp_path / "o" / manifest[side]["path"]
        records = [json.loads(line) for line in path.read_text().splitlines()]
        path.unlink()
        write_jsonl(path, [{**r, "user_id": f"u{i % 4}"} for i, r in enumerate(records)])
        manifest[side]["sha256"] = hashlib.sha256(path.read_bytes()).hexdigest()
    manifest_path.write_text(json.dumps(manifest))
    with pytest.raises(
        BundleError, match=r"holdout.jsonl: 4 of its users .* the split by 'record_id' put them"
    ):
        load_bundle(synthetic=None, membership=MembershipPolicy(p=0.5), manifest=manifest_path)


def test_split_cli(source: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert (
        main(
            [
                "split",
                "--source",
                str(source),
                "--p",
                "0.5",
                "--seed",
                "4",
                "--out",
                str(tmp_path / "o"),
            ]
        )
        == 0
    )
    assert "manifest:" in capsys.readouterr().out
    assert (
        main(
            [
                "split",
                "--source",
                str(source),
                "--p",
                "1.5",
                "--seed",
                "4",
                "--out",
                str(tmp_path / "o"),
            ]
        )
        == 2
    )
    assert "--p must be in (0, 1); found 1.5" in capsys.readouterr().err


def test_split_preserves_format(tmp_path: Path) -> None:
    import pandas as pd

    frame = pd.DataFrame(
        {"user_id": [f"u{i}" for i in range(30)], "text": [unique_text(i) for i in range(30)]}
    )
    frame.to_parquet(tmp_path / "src.parquet", index=False)
    split_source(tmp_path / "src.parquet", p=0.5, seed=2, by="user_id", out_dir=tmp_path / "o")
    back = pd.concat(
        [pd.read_parquet(tmp_path / "o" / f"{n}.parquet") for n in ("train", "holdout")]
    )
    assert sorted(back["user_id"]) == sorted(frame["user_id"])


def test_a_second_split_into_the_same_directory_leaves_none_of_the_first(
    source: Path, tmp_path: Path
) -> None:
    out = tmp_path / "o"
    first = split_source(source, p=0.5, seed=3, by="user_id", out_dir=out, canary_fraction=0.2)
    assert first.manifest.canary_source is not None and (out / "canary-source.jsonl").exists()
    (out / "notes.txt").write_text("the user's own file")
    second = split_source(source, p=0.5, seed=3, by="user_id", out_dir=out)
    assert second.manifest.canary_source is None
    assert sorted(p.name for p in out.iterdir()) == [
        "holdout.jsonl",
        "notes.txt",  # not a file the earlier split wrote: kept
        "split-manifest.json",
        "train.jsonl",
    ]


def test_split_refuses_what_gate_check_would_and_an_empty_side(
    source: Path, tmp_path: Path
) -> None:
    """Nothing is written for a source gate check would refuse, or a split with a side
    without users."""
    cases = {
        "dup.jsonl": (
            [{"record_id": "a", "text": "x"}, {"record_id": "a", "text": "y"}],
            "one record_id is used more than once, at .*dup.jsonl:1, .*dup.jsonl:2",
        ),
        "null.jsonl": ([{"text": "x"}, {"text": None}], "line 2: 'text' must be a string"),
        "one.jsonl": (
            [{"user_id": "u", "text": "x"}, {"user_id": "u", "text": "y"}],
            "the split leaves no user in",
        ),
        "blank-user.jsonl": ([{"user_id": " ", "text": "x"}], "line 1: empty 'user_id'"),
        "blank-id.jsonl": ([{"record_id": " ", "text": "x"}], "line 1: empty 'record_id'"),
        "blank.jsonl": ([{"text": " "}, {"text": ""}], "all 2 records are empty or white space"),
    }
    for name, (rows, message) in cases.items():
        out = tmp_path / f"out-{name}"
        with pytest.raises(BundleError, match=message):
            split_source(
                write_jsonl(tmp_path / name, rows), p=0.5, seed=1, by="user_id", out_dir=out
            )
        assert not out.exists(), name
    with pytest.raises(BundleError, match="the split leaves no user in"):
        split_source(
            source, p=0.5, seed=1, by="user_id", out_dir=tmp_path / "c", canary_fraction=0.999
        )


def test_a_split_overwrites_no_file_it_did_not_write(source: Path, tmp_path: Path) -> None:
    """A review's `gate split --out dd` replaced the user's own train.jsonl and
    canary-source.jsonl there (exit 0): a file of an output's name that no earlier split
    wrote, or a split-manifest.json that is no manifest, is refused, and nothing changes.
    A canary fraction that leaves no canary user is refused too (it had given none
    without a word), and a manifest with a byte-order mark is read."""
    out = tmp_path / "dd"
    out.mkdir()
    for name in ("train.jsonl", "split-manifest.json"):
        (out / name).write_text('{"text": "mine"}\n')
        with pytest.raises(BundleError, match=rf"--out .*dd: would overwrite {name}"):
            split_source(source, p=0.5, seed=1, by="user_id", out_dir=out)
        assert sorted(p.name for p in out.iterdir()) == [name], name
        assert (out / name).read_text() == '{"text": "mine"}\n'
        (out / name).unlink()
    (out / "canary-source.jsonl").write_text("mine\n")
    with pytest.raises(BundleError, match=r"would overwrite canary-source.jsonl, which no"):
        split_source(source, p=0.5, seed=1, by="user_id", out_dir=out, canary_fraction=0.3)
    with pytest.raises(BundleError, match=r"the split leaves no user in the canary source"):
        split_source(source, p=0.5, seed=1, by="user_id", out_dir=out, canary_fraction=1e-4)
    assert sorted(p.name for p in out.iterdir()) == ["canary-source.jsonl"]
    done = split_source(source, p=0.5, seed=1, by="user_id", out_dir=tmp_path / "fresh")
    # a file of the earlier split that the user has since replaced is the user's (a review)
    mine = done.manifest_path.with_name("train.jsonl")
    mine.write_text('{"user_id": "mine", "text": "my own records"}\n')
    with pytest.raises(BundleError, match=r"would overwrite train.jsonl, which no earlier"):
        split_source(source, p=0.5, seed=2, by="user_id", out_dir=tmp_path / "fresh")
    assert "my own records" in mine.read_text()
    done = split_source(source, p=0.5, seed=1, by="user_id", out_dir=tmp_path / "fresh2")
    bom = done.manifest_path.with_name("bom.json")
    bom.write_bytes(b"\xef\xbb\xbf" + done.manifest_path.read_bytes())
    assert read_manifest(bom) == done.manifest


def test_a_split_writes_each_value_as_the_source_holds_it(tmp_path: Path) -> None:
    """A review: a JSON column of integers with a null became floating point through
    pandas (12345678901234567 written 1.23456789012346e+16, 1 written 1.0), so the
    generator trained on altered records. JSON Lines and Parquet keep every value."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = [
        {
            "user_id": f"u{i}",
            "text": unique_text(i),
            "account": 12345678901234567 + i if i % 3 else None,
            "score": 1 if i % 2 else 1.5,
            "split": "ignored",
        }
        for i in range(60)
    ]
    source = write_jsonl(tmp_path / "extra.jsonl", rows)
    split_source(source, p=0.5, seed=1, by="user_id", out_dir=tmp_path / "j")
    written = [
        json.loads(line)
        for name in ("train.jsonl", "holdout.jsonl")
        for line in (tmp_path / "j" / name).read_text().splitlines()
    ]
    expected = {r["user_id"]: {k: v for k, v in r.items() if k != "split"} for r in rows}
    assert len(written) == 60
    for record in written:
        assert record == expected[record["user_id"]]
        assert type(record["score"]) is type(expected[record["user_id"]]["score"])
    # a record without a split member is written as it stands (every number's text); a
    # number JSON cannot write back is refused (a review: 1e400 came out as Infinity)
    exact = tmp_path / "exact.jsonl"
    exact.write_text(
        "".join(
            f'{{"user_id": "u{i}", "text": "{unique_text(i)}", "score": 0.10000000000000000555}}\n'
            for i in range(40)
        )
    )
    split_source(exact, p=0.5, seed=1, by="user_id", out_dir=tmp_path / "e")
    lines = (tmp_path / "e" / "train.jsonl").read_text().splitlines()
    assert lines and all(line.endswith('"score": 0.10000000000000000555}') for line in lines)
    huge = write_jsonl(tmp_path / "huge.jsonl", [*rows[:3]])
    huge.write_text(huge.read_text().replace('"score": 1.5', '"score": 1e400'))
    with pytest.raises(BundleError, match=r"huge.jsonl: line \d: a number beyond JSON's range"):
        split_source(huge, p=0.5, seed=3, by="user_id", out_dir=tmp_path / "h")
    assert not (tmp_path / "h").exists() or not list((tmp_path / "h").iterdir())
    table = pa.table(
        {
            "user_id": [r["user_id"] for r in rows],
            "text": [r["text"] for r in rows],
            "account": pa.array([r["account"] for r in rows], pa.int64()),
        }
    )
    pq.write_table(table, tmp_path / "extra.parquet")
    split_source(tmp_path / "extra.parquet", p=0.5, seed=1, by="user_id", out_dir=tmp_path / "p")
    halves = [pq.read_table(tmp_path / "p" / f"{n}.parquet") for n in ("train", "holdout")]
    assert all(h.schema.field("account").type == pa.int64() for h in halves)
    assert sorted(v for h in halves for v in h["account"].to_pylist() if v is not None) == sorted(
        r["account"] for r in rows if r["account"] is not None
    )


def test_splitting_an_earlier_output_into_its_directory_keeps_that_file(
    source: Path, tmp_path: Path
) -> None:
    out = tmp_path / "o"
    split_source(source, p=0.5, seed=3, by="user_id", out_dir=out, canary_fraction=0.3)
    public = out / "canary-source.jsonl"
    before = public.read_bytes()
    again = split_source(public, p=0.5, seed=4, by="user_id", out_dir=out)
    assert public.read_bytes() == before and again.manifest.canary_source is None


def test_an_unusable_out_is_bad_input_and_a_failed_write_leaves_no_split(
    source: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch
) -> None:
    """A review: a file as --out was exit 3 with a bare system error, and a full disk
    left train and holdout files without their manifest."""
    import gate.data.split as split_module

    (tmp_path / "afile").write_text("x")
    for out in ("afile", "afile/sub"):
        args = ["split", "--source", str(source), "--seed", "1", "--out", str(tmp_path / out)]
        assert main(args) == 2
        assert f"--out {tmp_path / out}: cannot write the split there" in capsys.readouterr().err
    real, written = split_module.os.replace, []

    def full_disk(*args):
        if written:
            raise OSError(28, "No space left on device", "holdout.jsonl")
        written.append(args)
        return real(*args)

    monkeypatch.setattr(split_module.os, "replace", full_disk)
    out = tmp_path / "full"
    assert main(["split", "--source", str(source), "--seed", "1", "--out", str(out)]) == 3
    assert "No space left on device; no split was left there" in capsys.readouterr().err
    assert written and not out.exists()  # made for the split, removed with it


def test_an_interrupted_split_leaves_no_directory_it_made(
    source: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    """A review: an interrupted `gate split` left an empty --out and said "no verdict was
    written"."""
    import gate.data.split as split_module

    def interrupted(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(split_module, "write_json_lines_sides", interrupted)
    out = tmp_path / "new" / "split"
    args = ["split", "--source", str(source), "--seed", "1", "--out", str(out)]
    assert main(args) == 3
    assert not out.exists() and (tmp_path / "new").is_dir()
    assert capsys.readouterr().err == "gate: error: interrupted; no split was written\n"


BOM = "\ufeff"


def test_json_lines_sides_are_the_source_lines_as_written(tmp_path: Path) -> None:
    """A JSON Lines source is read once for every side (it had been read again for each):
    each side holds the source's lines of its users, as written, without a leading
    byte-order mark or trailing carriage returns, each ended by a newline; blank lines
    are no records."""
    raw = [
        '\ufeff{"user_id": "u0", "text": "first \u00e9t\u00e9 line"}\r\n',
        '{"user_id": "u1", "text": "a\u2028b", "n": 12345678901234567}\n',
        "\n",
        '{"user_id": "u2", "text": "two carriage returns"}\r\r\n',
        '{"user_id": "u3", "text": "\\ufeff escaped, not a mark"}\n',
        '{"user_id": "u4", "text": "caf\\u00e9 escaped", "x": 1.50}\n',
    ] + [f'{{"user_id": "u{i}", "text": "line {i}"}}\n' for i in range(5, 40)]
    raw[-1] = raw[-1].rstrip("\n")  # no newline at the end of the file
    source = tmp_path / "source.jsonl"
    source.write_bytes("".join(raw).encode("utf-8"))
    outcome = split_source(source, p=0.5, seed=3, by="user_id", out_dir=tmp_path / "s")
    records = [line for line in raw if line.strip()]
    written = {
        side: (tmp_path / "s" / f"{side}.jsonl").read_bytes().decode("utf-8")
        for side in ("train", "holdout")
    }
    for side, text in written.items():
        expected = [
            line.removeprefix(BOM).rstrip("\r\n") + "\n"
            for line in records
            if '"user_id": "{}"'.format(json.loads(line.removeprefix(BOM))["user_id"]) in text
        ]
        assert text == "".join(expected), side
    assert outcome.manifest.train.records + outcome.manifest.holdout.records == len(records)
    assert {outcome.manifest.train.records, outcome.manifest.holdout.records} != {0}
