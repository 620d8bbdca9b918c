"""The distinguishability audit (TeDA) end to end on rewrite releases: light edits are
re-identified, rewrites independent of their sources are not, and every misuse is an
error, never a pass."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from gate.api import run_gate
from gate.cli import main
from gate.data.bundle import load_bundle
from gate.demo.corpora import make_faker, paraphrase, support_records
from gate.errors import PolicyError
from gate.policy.loader import load_policy
from tests.conftest import read_report, write_jsonl, write_policy

HEAD = "version: 1\nname: rewrite-test\nseed: 4\nevidence: {mlflow: {enabled: false}}\n"


def _policy(attacks: str = "[embedding, lexical]", extra: str = "", trials: int = 2000) -> str:
    return f"""{HEAD}
audits:
  distinguishability:
    candidates: 2
    trials: {trials}
    transition_lambdas: [-10000, 0]
    attacks: {attacks}
    {extra}
    thresholds: {{max_epsilon: 1.0}}
"""


@pytest.fixture(scope="module")
def corpus() -> list[dict]:
    rng = np.random.default_rng(0)
    return support_records(120, rng=rng, fake=make_faker(2026))


def _run(tmp_path: Path, corpus: list[dict], policy: str, rewrites) -> tuple[int, dict | None]:
    users = sorted({r["user_id"] for r in corpus})
    in_train = {u for i, u in enumerate(users) if i % 2 == 0}
    train = [r for r in corpus if r["user_id"] in in_train]
    holdout = [r for r in corpus if r["user_id"] not in in_train]
    files = {
        "train": write_jsonl(tmp_path / "train.jsonl", train),
        "holdout": write_jsonl(tmp_path / "holdout.jsonl", holdout),
        "synthetic": write_jsonl(tmp_path / "synthetic.jsonl", rewrites(train)),
        "policy": write_policy(tmp_path / "policy.yaml", policy),
    }
    out = tmp_path / "out"
    code = main(
        ["check", "--quiet", "--no-mlflow", "--out", str(out)]
        + [
            a
            for k in ("policy", "train", "holdout", "synthetic")
            for a in (f"--{k}", str(files[k]))
        ]
    )
    return code, read_report(out) if (out / "report.json").exists() else None


def _light_edits(train: list[dict]) -> list[dict]:
    rng = np.random.default_rng(1)
    return [
        {"record_id": f"w{i}", "source_id": r["record_id"], "text": paraphrase(r["text"], rng)}
        for i, r in enumerate(train)
    ]


def _independent(train: list[dict]) -> list[dict]:
    """Each source gets the rewrite of a record of another, unrelated person (the bundled
    corpus's people share nothing but templates): independent of the source it names."""
    rng = np.random.default_rng(2)
    others = support_records(len(train), rng=rng, fake=make_faker(7))
    return [
        {"record_id": f"w{i}", "source_id": r["record_id"], "text": paraphrase(o["text"], rng)}
        for i, (r, o) in enumerate(zip(train, others, strict=False))
    ]


def test_light_edits_are_re_identified(tmp_path: Path, corpus) -> None:
    code, report = _run(tmp_path, corpus, _policy(), _light_edits)
    assert code == 1
    audit = report["audits"]["distinguishability"]
    m = audit["metrics"]
    assert m["max_epsilon_emp"] > 2
    # alpha_conf null: 2 x the policy's alpha (0.05), over 2 lambdas x 2 attacks
    assert audit["details"]["level_per_game"] == pytest.approx(0.1 / 4)
    for subject in ("embedding_lambda_m10000", "lexical_lambda_0"):
        assert m[f"{subject}.success_rate"] > 0.9
        assert m[f"{subject}.epsilon_emp"] <= m[f"{subject}.epsilon_ceiling"]
    # witnesses: redacted rewrites of train records, the most confident first
    witnesses = audit["witnesses"]
    assert witnesses and all(w["class"] == "rewrite" for w in witnesses)
    assert all("*" in w["feature"] for w in witnesses)
    scores = [w["score"] for w in witnesses]
    assert scores == sorted(scores, reverse=True)
    assert (tmp_path / "out" / "plots").glob("distinguishability-*.png")


def test_rewrites_independent_of_their_sources_show_nothing(tmp_path: Path, corpus) -> None:
    code, report = _run(tmp_path, corpus, _policy(), _independent)
    assert code == 0, report["audits"]["distinguishability"]
    audit = report["audits"]["distinguishability"]
    assert audit["metrics"]["max_epsilon_emp"] == 0.0
    assert audit["details"]["rewrites_copying_another_source"] <= 0.1 * len(corpus)
    # a review: successes at chance were listed as re-identifications, and a bound of 0
    # was worded as a finding ("not epsilon-LDP for epsilon < 0.000")
    assert not audit["witnesses"]
    games = {k: v for k, v in audit["statements"].items() if k != "all games"}
    assert games and all("no more than chance" in text for text in games.values()), games
    assert not any("< 0.000" in text for text in audit["statements"].values())


def _copies_naming_the_next_record(train: list[dict]) -> list[dict]:
    return [
        {
            "record_id": f"w{i}",
            "source_id": train[(i + 1) % len(train)]["record_id"],
            "text": r["text"],
        }
        for i, r in enumerate(train)
    ]


def test_copies_whose_ids_name_other_records_are_an_error(tmp_path: Path, corpus) -> None:
    """A review: a verbatim copy of train, each record's source_id naming the next record
    (ids shifted in a join), PASSed: the game trusts the ids. Rewrites that copy another
    source than they name are now counted, and too many of them are an error (exit 3)."""
    code, report = _run(tmp_path, corpus, _policy(), _copies_naming_the_next_record)
    assert code == 3 and report["status"] == "error"
    error = report["audits"]["distinguishability"]["error"]
    assert "rewrites are near-copies" in error and "source_id" in error
    code, report = _run(tmp_path, corpus, _policy(), _light_edits)  # ids right: none
    assert report["audits"]["distinguishability"]["details"]["rewrites_copying_another_source"] == 0


STOCK_REPLIES = [
    "Thanks, that worked!",
    "Thank you, it works now.",
    "Great, thanks for the help!",
    "Perfect, that fixed it, thanks.",
    "Thanks a lot, all sorted now.",
    "That did it, thank you!",
]


def test_rewrites_into_a_stock_reply_are_no_evidence_of_wrong_ids(tmp_path: Path, corpus) -> None:
    """A review: a fifth of the records are stock replies, and the rewriter turns one stock
    reply into another; with every id right, 25 of 120 rewrites copied a record they do
    not name, and the audit refused the release (exit 3). A stock reply has near-copies
    in the pool and names no one: such rewrites are not counted."""
    rng = np.random.default_rng(0)
    stock = [
        {**r, "text": STOCK_REPLIES[rng.integers(6)]} if rng.random() < 0.2 else r for r in corpus
    ]

    def rewrites(train: list[dict]) -> list[dict]:
        def rewrite(text: str) -> str:
            if text in STOCK_REPLIES:
                return STOCK_REPLIES[(STOCK_REPLIES.index(text) + 1) % 6]
            return paraphrase(text, rng)

        return [
            {"record_id": f"w{i}", "source_id": r["record_id"], "text": rewrite(r["text"])}
            for i, r in enumerate(train)
        ]

    code, report = _run(tmp_path, stock, _policy(), rewrites)
    assert code in (0, 1), report["audits"]["distinguishability"].get("error")
    details = report["audits"]["distinguishability"]["details"]
    assert details["rewrites_copying_another_source"] <= 0.1 * details["rewrites"]


def test_a_judge_callable_is_an_attack(tmp_path: Path, corpus) -> None:
    policy = _policy("[judge]", "judge: tests.rewrite_judges:shared_words", trials=300)
    code, report = _run(tmp_path, corpus, policy, _light_edits)
    assert code == 1
    assert report["audits"]["distinguishability"]["metrics"]["judge_lambda_0.success_rate"] > 0.9


def test_a_judge_returning_the_wrong_shape_is_an_error(tmp_path: Path, corpus) -> None:
    policy = _policy("[judge]", "judge: tests.rewrite_judges:wrong_length", trials=60)
    code, report = _run(tmp_path, corpus, policy, _light_edits)
    assert code == 3 and "one per candidate" in report["audits"]["distinguishability"]["error"]


def test_a_judge_error_never_writes_a_record_into_the_evidence(tmp_path: Path, corpus) -> None:
    """A review: a judge returning the candidates' texts made numpy's error quote a whole
    train record, which went into report.json, the HTML, JUnit, MLflow and the terminal."""
    policy = _policy("[judge]", "judge: tests.rewrite_judges:returns_candidates", trials=60)
    code, report = _run(tmp_path, corpus, policy, _light_edits)
    error = report["audits"]["distinguishability"]["error"]
    assert code == 3 and "returned a list of str, not numbers" in error
    evidence = "".join(p.read_text(errors="replace") for p in (tmp_path / "out").rglob("*.*"))
    for record in corpus:
        assert record["text"][:40] not in evidence
    # a plug-in's own exception: its message is withheld unless witnesses are shown
    policy = _policy("[judge]", "judge: tests.rewrite_judges:raises_with_the_rewrite", trials=60)
    code, report = _run(tmp_path, corpus, policy, _light_edits)
    error = report["audits"]["distinguishability"]["error"]
    assert code == 3 and error.startswith("ValueError raised at rewrite_judges.py:")
    assert "cannot parse" not in error and "redact_witnesses: false to see it" in error
    shown = policy.replace("enabled: false}}", "enabled: false}, redact_witnesses: false}")
    code, report = _run(tmp_path, corpus, shown, _light_edits)
    assert report["audits"]["distinguishability"]["error"].startswith("ValueError: cannot parse")


def test_a_game_too_small_to_fail_is_an_error(tmp_path: Path, corpus) -> None:
    """With k = 2 and few rewritten records, even K = T cannot exceed max_epsilon = 4; the
    audit says so before it embeds anything (its encoder here is a directory that does
    not exist, which embedding would have reported)."""
    absent = tmp_path / "no-encoder-here"
    policy = _policy("[embedding, lexical]", f"embedding: {{model: '{absent}'}}").replace(
        "max_epsilon: 1.0", "max_epsilon: 4.0"
    )
    code, report = _run(tmp_path, corpus, policy, _light_edits)
    assert code == 3
    assert "cannot fail" in report["audits"]["distinguishability"]["error"]


def test_a_release_without_source_ids_is_bad_input(tmp_path: Path, corpus, capsys) -> None:
    def plain(train: list[dict]) -> list[dict]:
        return [{"record_id": f"w{i}", "text": r["text"][::-1]} for i, r in enumerate(train)]

    code, report = _run(tmp_path, corpus, _policy("[lexical]"), plain)
    assert code == 2 and report is None and not (tmp_path / "out").exists()
    err = capsys.readouterr().err
    assert f"{tmp_path / 'synthetic.jsonl'}: no record has a source_id" in err
    assert "audits.distinguishability needs a release of rewrites" in err
    # through the Python API's run_gate (no bundle check before it) the audit refuses
    loaded = load_policy(tmp_path / "policy.yaml")
    bundle = load_bundle(
        synthetic=tmp_path / "synthetic.jsonl",
        train=tmp_path / "train.jsonl",
        holdout=tmp_path / "holdout.jsonl",
        membership=loaded.policy.membership,
        text=loaded.policy.text,
    )
    result = run_gate(loaded, bundle, seed=0)
    assert result.status == "error"
    assert "source_id" in (result.audits["distinguishability"].error or "")


def test_an_unknown_attack_of_a_disabled_game_is_not_refused(tmp_path: Path) -> None:
    path = write_policy(
        tmp_path / "p.yaml",
        HEAD + "audits:\n  distinguishability:\n    enabled: false\n    attacks: [telepathy]\n"
        "    thresholds: {max_epsilon: 1}\n"
        "  membership: {scorers: [ngram], thresholds: {max_auc: 0.9}}\n",
    )
    game = load_policy(path).policy.audits.distinguishability
    assert game is not None and not game.enabled and game.attacks == ("telepathy",)


@pytest.mark.parametrize(
    ("block", "message"),
    [
        ("attacks: [judge]", "go together"),
        ("judge: a:b", "go together"),
        ("transition_lambdas: [0, 0]", "distinct"),
        ("transition_lambdas: [10000, 10000.01]", "distinct"),
        ("transition_lambdas: [-10000, 0, 1.7e308]", r"within \+-1e\+06; found \[1.7e\+308\]"),
        ("attacks: [embedding, telepathy]", r"attacks\[1\]: no rewrite attack 'telepathy'"),
    ],
)
def test_bad_settings_name_their_yaml_path(tmp_path: Path, block: str, message: str) -> None:
    path = write_policy(
        tmp_path / "p.yaml",
        HEAD + f"audits:\n  distinguishability:\n    {block}\n    thresholds: {{max_epsilon: 1}}\n",
    )
    with pytest.raises(PolicyError, match=message) as err:
        load_policy(path)
    assert "audits.distinguishability" in str(err.value)


@pytest.mark.parametrize(
    ("alpha", "block", "level"),
    [(0.001, "", 0.002), (0.2, "alpha_conf: 0.3", 0.3), (0.5, "alpha_conf: 0.05", 0.05)],
)
def test_the_level_of_the_games_follows_the_policy_alpha(
    tmp_path: Path, alpha: float, block: str, level: float
) -> None:
    """The audit uses the lower end of a two-sided interval: with alpha_conf null the
    interval is at 2 x alpha, so the bound is at the policy's level; a set alpha_conf wins."""
    path = write_policy(
        tmp_path / "p.yaml",
        HEAD
        + f"alpha: {alpha}\naudits:\n  distinguishability:\n    {block}\n"
        + "    thresholds: {max_epsilon: 1}\n",
    )
    game = load_policy(path).policy.audits.distinguishability
    assert game is not None and game.alpha_conf == pytest.approx(level)


def test_an_alpha_conf_less_confident_than_the_policy_is_refused(tmp_path: Path) -> None:
    """A review: alpha_conf 0.99 made bounds at confidence 0.505 while the report stated
    1 - alpha for every bound."""
    path = write_policy(
        tmp_path / "p.yaml",
        HEAD + "alpha: 0.001\naudits:\n  distinguishability:\n    alpha_conf: 0.3\n"
        "    thresholds: {max_epsilon: 1}\n",
    )
    with pytest.raises(PolicyError, match=r"alpha_conf <= 2 x alpha = 0.002; found 0.3"):
        load_policy(path)


def test_an_alpha_of_one_half_needs_its_own_interval_level(tmp_path: Path) -> None:
    path = write_policy(
        tmp_path / "p.yaml",
        HEAD + "alpha: 0.5\naudits:\n  distinguishability:\n    thresholds: {max_epsilon: 1}\n",
    )
    with pytest.raises(PolicyError, match=r"alpha_conf: null takes 2 x alpha.*found alpha = 0.5"):
        load_policy(path)
    disabled = write_policy(
        tmp_path / "d.yaml",
        HEAD + "alpha: 0.5\naudits:\n  distinguishability:\n    enabled: false\n"
        "    thresholds: {max_epsilon: 1}\n"
        "  disclosure: {features: [{class: ngram}], thresholds: {max_epsilon: 1}}\n",
    )
    assert load_policy(disabled).policy.audits.distinguishability.alpha_conf is None


def test_the_bundled_rewrite_example_is_re_identified() -> None:
    """examples/bundle/rewrites.jsonl rewrites every train record of the split."""
    repo = Path(__file__).resolve().parents[1]
    rows = [json.loads(line) for line in (repo / "examples/bundle/rewrites.jsonl").open()]
    train = {
        json.loads(line)["record_id"]
        for line in (repo / "examples/bundle/split/train.jsonl").open()
    }
    assert {r["source_id"] for r in rows} == train
