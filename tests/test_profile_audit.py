"""The profile audit end to end: M1/M2 of Stomakhin (2025) §3.5 through the n-gram LBF
profile, the one-run δ bound of membership scorers, the surprisal attack on a released
model (a transformers GPT-2 with a `tokenizers` tokenizer built here, never downloaded)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from gate.api import run_gate
from gate.cli import main
from gate.data.bundle import load_bundle
from gate.errors import InputError
from gate.policy import parse_policy
from gate.policy.models import MembershipPolicy
from tests.conftest import read_report, unique_text, write_jsonl, write_policy

HEAD = "version: 1\nname: profile-test\nseed: 3\nevidence: {mlflow: {enabled: false}}\n"


def _files(tmp_path: Path, train: list[str], holdout: list[str], synthetic: list[str]):
    def rows(prefix: str, texts: list[str]) -> list[dict]:
        return [
            {"record_id": f"{prefix}{i}", "user_id": f"u{prefix}{i}", "text": t}
            for i, t in enumerate(texts)
        ]

    return {
        "train": write_jsonl(tmp_path / "train.jsonl", rows("t", train)),
        "holdout": write_jsonl(tmp_path / "holdout.jsonl", rows("h", holdout)),
        "synthetic": write_jsonl(
            tmp_path / "synthetic.jsonl",
            [{"record_id": f"s{i}", "text": t} for i, t in enumerate(synthetic)],
        ),
    }


def _check(tmp_path: Path, files: dict, policy: str, *extra: str) -> tuple[int, dict | None]:
    policy_path = write_policy(tmp_path / "policy.yaml", HEAD + policy)
    out = tmp_path / "out"
    code = main(
        [
            "check",
            "--quiet",
            "--no-mlflow",
            "--policy",
            str(policy_path),
            "--train",
            str(files["train"]),
            "--holdout",
            str(files["holdout"]),
            "--synthetic",
            str(files["synthetic"]),
            "--out",
            str(out),
            *extra,
        ]
    )
    report = read_report(out) if (out / "report.json").exists() else None
    return code, report


def _metrics(report: dict) -> dict[str, float]:
    return report["audits"]["profile"]["metrics"]


LN_10_9 = math.log(10 / 9)


# the floor describes the train corpus: a policy gating a release checks the release too
RELEASE_CHECK = """  membership:
    scorers: [{scorer: ngram, features: {class: ngram, n_min: 1, n_max: 2}}]
    thresholds: {max_auc: 0.9}
"""


def _lbf_policy(*, delta: float, repeats: int, floor: float) -> str:
    return f"""
audits:
{RELEASE_CHECK}  profile:
    scorers: []
    delta: {delta}
    ngram_lbf: {{n: 1, adjacency_sizes: [1], repeats: {repeats}, top_n: [1]}}
    thresholds: {{target_epsilon: {LN_10_9!r}, max_delta_floor: {floor}}}
"""


def test_m1_through_the_audit(tmp_path: Path) -> None:
    """X = {1..10} (one token per user), Y = X minus one user: δ(ln(10/9)) = 1/10 and the
    δ floor = 1/10 for every removed user (Stomakhin 2025, §3.5, M1)."""
    files = _files(
        tmp_path, [f"t{i}" for i in range(10)], [f"h{i}" for i in range(10)], ["nothing"]
    )
    code, report = _check(tmp_path, files, _lbf_policy(delta=0.05, repeats=5, floor=0.2))
    assert code == 0, report
    m = _metrics(report)
    assert m["ngram_lbf_u1.lbf_delta_at_target_epsilon"] == pytest.approx(0.1)
    assert m["ngram_lbf_u1.lbf_delta_floor"] == pytest.approx(0.1)
    assert m["ngram_lbf_u1.lbf_epsilon_at_delta"] == "inf" or math.isinf(
        float(m["ngram_lbf_u1.lbf_epsilon_at_delta"])
    )  # δ = 0.05 is below the floor
    code, report = _check(tmp_path, files, _lbf_policy(delta=0.05, repeats=5, floor=0.05))
    assert code == 1 and report["status"] == "fail"


def test_a_floor_that_censoring_makes_0_whatever_the_corpus_is_an_error(tmp_path: Path) -> None:
    """A review: with censor_count at or above every n-gram's count, every n-gram merges into
    one token whose floor is 0 by construction, and max_delta_floor: 0 PASSed; the floor's
    statement names the size of the source set that gave it."""
    files = _files(
        tmp_path, [f"t{i}" for i in range(10)], [f"h{i}" for i in range(10)], ["nothing"]
    )
    policy = _lbf_policy(delta=0.05, repeats=5, floor=0.0).replace(
        "top_n: [1]}", "top_n: [1], censor_count: 1}"
    )
    code, report = _check(tmp_path, files, policy)
    assert code == 3 and report["status"] == "error"
    error = report["audits"]["profile"]["error"]
    assert "merges them all into one token" in error and "censor_count" in error
    code, report = _check(tmp_path, files, _lbf_policy(delta=0.05, repeats=5, floor=0.05))
    assert code == 1
    statement = report["audits"]["profile"]["statements"]["ngram_lbf"]
    assert "(|U| = 1) gives delta floor 0.1: " in statement
    assert "not (epsilon, delta)-DP for one user" in statement


def test_a_floor_alone_cannot_gate_a_release(tmp_path: Path, capsys) -> None:
    """A review: the floor is the train corpus's, so a policy whose only check it is gave
    a verbatim copy of train the verdict of any release (PASS). It is refused where it
    would gate a release (exit 2, nothing written), not where it has company."""
    train = [f"t{i}" for i in range(10)]
    files = _files(tmp_path, train, [f"h{i}" for i in range(10)], train)
    floor_only = _lbf_policy(delta=0.05, repeats=5, floor=0.2).replace(RELEASE_CHECK, "")
    code, report = _check(tmp_path, files, floor_only)
    assert code == 2 and report is None
    err = capsys.readouterr().err
    assert "every check of the policy (profile: " in err and "describes the train corpus" in err
    assert "lbf_delta_floor" in err
    assert not (tmp_path / "out").exists()
    with pytest.raises(InputError, match=r"every check of the policy \(profile: .*lbf_delta_floor"):
        run_gate(
            parse_policy(HEAD + floor_only),
            load_bundle(membership=MembershipPolicy(), **files),
        )
    code, report = _check(tmp_path, files, _lbf_policy(delta=0.05, repeats=5, floor=0.2))
    assert code == 1 and report["audits"]["membership"]["status"] == "fail"


def test_m2_through_the_audit(tmp_path: Path) -> None:
    """One user holds token 1 ten times, nine users hold tokens 1..10 once each: removing the
    first is M2 (f_X(1) = 0.19, f_Y uniform): δ(ln(10/9)) = 0.19, ε at δ = 0 is ln(19/10);
    removing any other user gives less, so the worst sampled U is M2's answer."""
    train = ["t1 " * 10] + [" ".join(f"t{j}" for j in range(1, 11))] * 9
    files = _files(tmp_path, train, [f"h{i}" for i in range(10)], ["nothing"])
    code, report = _check(tmp_path, files, _lbf_policy(delta=0.0, repeats=40, floor=0.5))
    assert code == 0, report
    m = _metrics(report)
    assert m["ngram_lbf_u1.lbf_delta_at_target_epsilon"] == pytest.approx(0.19)
    assert float(m["ngram_lbf_u1.lbf_epsilon_at_delta"]) == pytest.approx(math.log(1.9))
    assert m["ngram_lbf_u1.lbf_delta_floor"] == 0.0
    assert m["ngram_lbf_u1.lbf_top_1_delta_at_target_epsilon"] == pytest.approx(0.19)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_user_with_most_ngrams_of_their_own_is_always_evaluated(
    tmp_path: Path, seed: int
) -> None:
    """A review: one train user of 100 writes a word nobody else does (δ floor 1/100 for
    that user alone); with source sets only drawn at random, max_delta_floor 0.005 PASSed
    in 8 of 10 seeds. The user with the most n-gram mass of their own is now one of the
    sets of every size, so the verdict no longer depends on the seed."""
    files = _files(tmp_path, ["secret"] + ["common"] * 99, ["common"] * 100, ["nothing"])
    policy = _lbf_policy(delta=0.0, repeats=1, floor=0.005)
    code, report = _check(tmp_path, files, policy, "--seed", str(seed))
    assert code == 1, report
    m = _metrics(report)
    assert m["ngram_lbf_u1.lbf_delta_floor"] == pytest.approx(0.01)
    assert m["ngram_lbf_u1.source_sets"] == 2


def test_mass_of_their_own_by_hand() -> None:
    from gate.profile.ngram_lbf import mass_of_their_own

    # n-grams 0..3; occurrences (n-gram, user): 0 by u0 twice, 1 by u0 and u1, 2 by u2,
    # 3 by u1 three times
    occurrence = np.array([0, 0, 1, 1, 2, 3, 3, 3])
    owner = np.array([0, 0, 0, 1, 2, 1, 1, 1])
    counts = np.bincount(occurrence).astype(float)
    np.testing.assert_array_equal(
        mass_of_their_own(occurrence, owner, counts=counts, users=4), [2.0, 3.0, 1.0, 0.0]
    )
    # censoring at 2 merges n-grams of count <= 2: only n-gram 3 stays apart
    np.testing.assert_array_equal(
        mass_of_their_own(occurrence, owner, counts=counts, users=4, above=2), [0, 3.0, 0, 0]
    )


SCORER_POLICY = """
audits:
  profile:
    scorers: [ngram]
    ngram_lbf: {enabled: false}
    thresholds: {target_epsilon: 1.0, max_delta: 0.0}
"""


def test_a_copying_release_proves_delta_at_epsilon_one(tmp_path: Path) -> None:
    train = [unique_text(i) for i in range(80)]
    holdout = [unique_text(1000 + i) for i in range(80)]
    files = _files(tmp_path, train, holdout, train[:60])
    code, report = _check(
        tmp_path, files, SCORER_POLICY.replace("scorers: [ngram]", "scorers: [ngram, embedding]")
    )
    assert code == 1
    m = _metrics(report)
    assert m["delta_at_target_epsilon"] > 0
    # the audit's bound is its attacks' largest, each at alpha / 2 (two attacks)
    by_attack = [m["ngram.delta_at_target_epsilon"], m["embedding.delta_at_target_epsilon"]]
    assert m["delta_at_target_epsilon"] == max(by_attack)
    assert by_attack[0] != by_attack[1]
    assert m["epsilon_at_delta"] > 1.0
    outcome = report["audits"]["profile"]
    assert "not (epsilon, delta)-DP at epsilon = 1" in outcome["statements"]["ngram"]
    assert (
        tmp_path / "out" / "plots" / "profile-lower-bounds-on-the-minimal-delta-by-attack.png"
    ).exists()


def test_an_independent_release_proves_nothing(tmp_path: Path) -> None:
    train = [unique_text(i) for i in range(80)]
    holdout = [unique_text(1000 + i) for i in range(80)]
    files = _files(tmp_path, train, holdout, [unique_text(5000 + i) for i in range(60)])
    code, report = _check(tmp_path, files, SCORER_POLICY)
    assert code == 0, report
    assert _metrics(report)["delta_at_target_epsilon"] == 0.0
    # a bound of 0 shows nothing, and is not worded as a finding (a review: "for any delta < 0")
    statements = report["audits"]["profile"]["statements"]
    assert "no attack rejects: no evidence of leakage" in statements["all attacks"]
    assert not any("< 0" in text for text in statements.values()), statements


def test_thresholds_without_an_attack_are_an_error_never_a_pass(tmp_path: Path) -> None:
    files = _files(tmp_path, ["a b c"] * 4, ["d e f"] * 4, ["x"])
    policy = SCORER_POLICY.replace("scorers: [ngram]", "scorers: []")
    code, report = _check(tmp_path, files, policy)
    assert code == 3 and report["audits"]["profile"]["status"] == "error"
    assert "no attack" in report["audits"]["profile"]["error"]


def test_a_required_model_that_is_missing_is_exit_2(tmp_path: Path, capsys) -> None:
    files = _files(tmp_path, ["a b c"] * 4, ["d e f"] * 4, ["x"])
    policy = SCORER_POLICY.replace("ngram_lbf:", "surprisal: {required: true}\n    ngram_lbf:")
    code, report = _check(tmp_path, files, policy)
    assert code == 2 and report is None
    assert "audits.profile.surprisal.required" in capsys.readouterr().err
    code, _ = _check(tmp_path, files, policy, "--model", str(tmp_path / "nowhere"))
    assert code == 2
    assert "--model must be a model directory" in capsys.readouterr().err
    no_profile = "audits:\n  membership: {thresholds: {max_auc: 0.9}}\n"
    code, _ = _check(tmp_path, files, no_profile, "--model", str(tmp_path))
    assert code == 2 and "would go unaudited" in capsys.readouterr().err


def test_a_max_delta_the_bound_cannot_reach_is_an_error(tmp_path: Path) -> None:
    """δ̂ < α/(2(1-α)) whatever the data: a larger max_delta could never fail."""
    train = [unique_text(i) for i in range(80)]
    files = _files(tmp_path, train, [unique_text(1000 + i) for i in range(80)], train)
    code, report = _check(
        tmp_path, files, SCORER_POLICY.replace("max_delta: 0.0", "max_delta: 0.03")
    )
    assert code == 3 and "a total leak would pass" in report["audits"]["profile"]["error"]


def test_a_verbatim_copy_with_users_too_few_to_fail_max_delta_0_is_an_error(
    tmp_path: Path,
) -> None:
    """A review: 10 train and 9 holdout users, a release copying every train record,
    max_delta 0: no split of 19 users lets the one-run bound exceed 0 at epsilon 1, yet the
    guard took a half of 10 users that cannot occur and the run PASSed (exit 0)."""
    train = [unique_text(i) for i in range(10)]
    files = _files(tmp_path, train, [unique_text(1000 + i) for i in range(9)], train)
    code, report = _check(tmp_path, files, SCORER_POLICY)
    assert code == 3 and "a total leak would pass" in report["audits"]["profile"]["error"]


def _tiny_gpt2(directory: Path, texts: list[str]) -> Path:
    """A one-layer GPT-2 and a word-level tokenizer trained on public ``texts``."""
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import GPT2Config, GPT2LMHeadModel, PreTrainedTokenizerFast

    tokenizer = Tokenizer(models.WordLevel(unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer.train_from_iterator(
        texts, trainers.WordLevelTrainer(special_tokens=["[UNK]", "[PAD]"])
    )
    fast = PreTrainedTokenizerFast(tokenizer_object=tokenizer, unk_token="[UNK]", pad_token="[PAD]")
    torch.manual_seed(0)
    config = GPT2Config(vocab_size=len(fast), n_positions=64, n_embd=32, n_layer=1, n_head=2)
    GPT2LMHeadModel(config).save_pretrained(directory)
    fast.save_pretrained(directory)
    return directory


def test_surprisal_that_tells_no_user_apart_is_an_error(tmp_path: Path) -> None:
    """A review: records of one word under a tokenizer without a BOS token have no scored
    token, every user's surprisal is 0, scipy's control test says p = 1, and the audit
    went on to report delta 0 as if it had measured something."""
    rng = np.random.default_rng(1)
    words = [f"w{i}" for i in range(50)]
    model = _tiny_gpt2(tmp_path / "model", [" ".join(rng.choice(words, 12)) for _ in range(50)])
    one_word = lambda: str(rng.choice(words))  # noqa: E731
    files = _files(
        tmp_path, [one_word() for _ in range(20)], [one_word() for _ in range(20)], ["w1"]
    )
    policy = SCORER_POLICY.replace("scorers: [ngram]", "scorers: []").replace(
        "ngram_lbf:", "surprisal: {required: true}\n    ngram_lbf:"
    )
    code, report = _check(tmp_path, files, policy, "--model", str(model))
    assert code == 3 and "every user has the same surprisal" in report["audits"]["profile"]["error"]


def test_surprisal_of_a_released_transformers_model(tmp_path: Path) -> None:
    """An untrained model knows nothing of train: the attack runs (batched, every record),
    the control passes, the bound is 0, and the evidence names the model by its hash."""
    rng = np.random.default_rng(0)
    words = [f"w{i}" for i in range(50)]
    text = lambda: " ".join(rng.choice(words, 12))  # noqa: E731
    model = _tiny_gpt2(tmp_path / "model", [text() for _ in range(200)])
    files = _files(tmp_path, [text() for _ in range(40)], [text() for _ in range(40)], [text()])
    policy = SCORER_POLICY.replace("scorers: [ngram]", "scorers: []").replace(
        "ngram_lbf:", "surprisal: {required: true, batch_size: 7}\n    ngram_lbf:"
    )
    code, report = _check(tmp_path, files, policy, "--model", str(model))
    assert code == 0, report
    m = _metrics(report)
    assert m["surprisal.users_evaluated"] == 40
    assert m["surprisal.delta_at_target_epsilon"] == 0.0
    assert m["surprisal.control_p_value"] >= 0.001
    assert 0 <= m["surprisal.auc"] <= 1
    details = report["audits"]["profile"]["details"]["surprisal"]
    assert details["records_scored"] == 80 and len(details["model"]["sha256"]) == 64
    assert details["model"]["kind"] == "GPT2LMHeadModel"


GENERATOR_POLICY = (
    "\naudits:\n"
    + RELEASE_CHECK
    + """  profile:
    scorers: []
    ngram_lbf:
      n: 2
      adjacency_sizes: [1]
      repeats: 3
      top_n: [5]
      generator: {enabled: true, generator: "tests.fake_generators:ParrotGenerator", adjacency_sizes: [1], repeats: 2}
    thresholds: {max_delta_floor: 0.5}
"""
)


def test_generator_mode_profiles_releases_trained_with_and_without_u(tmp_path: Path) -> None:
    """A generator that parrots its training records: the release trained on X holds the
    removed user's n-grams, the release trained without it does not, so the synthetic δ
    floor is that user's share of the release, 1/40 (one record of 12 words each)."""
    train = [unique_text(i) for i in range(40)]
    files = _files(tmp_path, train, [unique_text(100 + i) for i in range(40)], ["x"])
    code, report = _check(tmp_path, files, GENERATOR_POLICY)
    assert code == 0, report
    m = _metrics(report)
    assert m["ngram_lbf_u1.lbf_delta_floor"] == pytest.approx(1 / 40)
    assert m["synthetic_lbf_u1.lbf_delta_floor"] == pytest.approx(1 / 40)
    assert m["synthetic_lbf_u1.source_sets"] == 2
    # the corpus's top-5 n-grams for U are U's own: watched in the release they give δ
    assert m["synthetic_lbf_u1.lbf_top_5_delta_at_target_epsilon"] == pytest.approx(5 / 11 / 40)
    details = report["audits"]["profile"]["details"]["synthetic_lbf"]
    assert details["generator"] == "tests.fake_generators:ParrotGenerator"
    assert "single draw" in details["caveat"]
    assert not list(tmp_path.rglob("parrot.txt"))  # no checkpoint is written


def test_bad_generator_settings_of_the_profile_are_exit_2(tmp_path: Path, capsys) -> None:
    files = _files(tmp_path, ["a b c"] * 4, ["d e f"] * 4, ["x"])
    policy = GENERATOR_POLICY.replace("repeats: 2}", "repeats: 2, generator_config: {bogus: 1}}")
    code, report = _check(tmp_path, files, policy)
    assert code == 2 and report is None
    assert "audits.profile.ngram_lbf.generator.generator_config" in capsys.readouterr().err


# ---------------------------------------------------------------------------- slow


def _reference_model(directory: Path, users: list[list[str]], *, epochs: int) -> Path:
    from gate.generators.reference import ReferenceConfig, ReferenceGenerator

    config = ReferenceConfig(
        layers=2, hidden=128, heads=4, max_length=128, batch_size=8, learning_rate=0.002
    )
    generator = ReferenceGenerator(config, seed=0)
    generator.fit(users, epochs=epochs)
    generator.save(directory)
    return directory


@pytest.mark.slow
def test_surprisal_proves_delta_for_an_overfit_model_and_not_for_a_public_one(
    tmp_path: Path,
) -> None:
    """The reference generator (a Llama over bytes) trained 60 epochs on 60 train users
    remembers them: the surprisal attack proves δ > 0 at ε = 1. The same model trained on
    60 public users (neither train nor holdout) proves nothing, and its control passes."""
    from gate.demo.corpora import make_faker, support_records

    rng = np.random.default_rng(0)
    records = support_records(180, rng=rng, fake=make_faker(11), max_records=1)
    texts = [r["text"] for r in records]
    train, holdout, public = texts[:60], texts[60:120], texts[120:]
    files = _files(tmp_path, train, holdout, ["nothing"])
    policy = SCORER_POLICY.replace("scorers: [ngram]", "scorers: []").replace(
        "ngram_lbf:", "surprisal: {required: true}\n    ngram_lbf:"
    )
    results = {}
    for name, users in (("overfit", train), ("public", public)):
        model = _reference_model(tmp_path / name, [[t] for t in users], epochs=60)
        code, report = _check(tmp_path, files, policy, "--model", str(model))
        results[name] = (code, _metrics(report))
    code, overfit = results["overfit"]
    assert code == 1 and overfit["surprisal.delta_at_target_epsilon"] > 0
    assert overfit["surprisal.auc"] > 0.9 and overfit["surprisal.median_difference"] > 0
    code, public = results["public"]
    assert code == 0 and public["surprisal.delta_at_target_epsilon"] == 0
    assert public["surprisal.control_p_value"] >= 0.001
