"""`gate check` end to end: exit codes, report contract, fail-closed behaviour."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gate.api import check_release, run_gate
from gate.atomic import atomic_write
from gate.audits.base import Audit
from gate.audits.disclosure import METRICS, DisclosureAuditRunner
from gate.cli import main
from gate.data.bundle import load_bundle
from gate.plugins import AUDITS
from gate.policy import load_policy
from gate.results import AuditResult

from .conftest import (
    MINIMAL_POLICY,
    REPO,
    check_args,
    read_report,
    unique_text,
    write_bundle,
    write_jsonl,
    write_policy,
)


def test_leaky_release_fails_with_exit_1(bundle_files: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "out"
    assert main(check_args(bundle_files, out)) == 1
    report = read_report(out)
    assert report["passed"] is False and report["status"] == "fail" and report["exit_code"] == 1
    audit = report["audits"]["disclosure"]
    assert audit["metrics"]["ngram.train_disclosures"] > 0
    assert audit["metrics"]["ngram.holdout_disclosures"] == 0
    assert audit["checks"][0]["passed"] is False
    witness = audit["witnesses"][0]
    assert witness["split"] == "train" and witness["source_record_id"].startswith("t")


def test_release_without_disclosures_passes_with_exit_0(
    bundle_files: dict[str, Path], tmp_path: Path
) -> None:
    write_jsonl(bundle_files["synthetic"], [{"text": unique_text(1000 + i)} for i in range(10)])
    out = tmp_path / "out"
    assert main(check_args(bundle_files, out)) == 0
    report = read_report(out)
    assert report["passed"] is True and report["status"] == "pass"
    assert report["audits"]["disclosure"]["metrics"]["ngram.epsilon_lower_exact"] == 0.0


def test_phantom_only_release_passes(bundle_files: dict[str, Path], tmp_path: Path) -> None:
    """As many holdout as train records copied: disclosures are non-zero but explained
    by phantoms, so zero learning is not rejected."""
    rows = [{"text": unique_text(i)} for i in range(5)] + [
        {"text": unique_text(100 + i)} for i in range(5)
    ]
    write_jsonl(bundle_files["synthetic"], rows)
    out = tmp_path / "out"
    assert main(check_args(bundle_files, out)) == 0
    metrics = read_report(out)["audits"]["disclosure"]["metrics"]
    assert metrics["ngram.train_disclosures"] == metrics["ngram.holdout_disclosures"] > 0
    assert metrics["ngram.phantom_rate"] == 0.5


def test_report_contract(bundle_files: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "out"
    assert main(check_args(bundle_files, out, seed="17")) == 1
    report = read_report(out)
    assert report["schema_version"] == 1
    assert set(report) >= {"passed", "policy", "inputs", "membership", "audits", "evidence"}
    assert report["policy"]["name"] == "test" and len(report["policy"]["sha256"]) == 64
    for name in ("train", "holdout", "synthetic"):
        assert set(report["inputs"][name]) >= {"path", "sha256", "records", "users"}
    assert report["membership"]["p"] == 0.5 and report["membership"]["how"] == "declared"
    assert report["seeds"]["root"] == 17
    check = report["audits"]["disclosure"]["checks"][0]
    assert set(check) >= {"metric", "op", "threshold", "value", "passed"}
    witness = report["audits"]["disclosure"]["witnesses"][0]
    assert set(witness) >= {
        "feature",
        "class",
        "source_record_id",
        "user_id",
        "split",
        "synthetic_record_id",
    }


def test_witnesses_are_redacted_by_default(bundle_files: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "out"
    assert main(check_args(bundle_files, out)) == 1
    text = (out / "report.json").read_text()
    witnesses = json.loads(text)["audits"]["disclosure"]["witnesses"]
    assert witnesses
    for i in range(20):
        for token in unique_text(i).split():
            assert token not in text
    # a review: the release record beside the masked copy let its reader read the copy
    synthetic_ids = {json.loads(line)["record_id"] for line in bundle_files["synthetic"].open()}
    for witness in witnesses:
        assert witness["synthetic_record_id"].startswith("hmac-sha256:")
        assert set(witness["feature"].split()) <= {"***", "…"}
    assert not any(f'"{i}"' in text for i in synthetic_ids)


def test_raw_witnesses_only_when_the_policy_allows(
    bundle_files: dict[str, Path], tmp_path: Path
) -> None:
    policy = bundle_files["policy"]
    policy.write_text(policy.read_text() + "evidence:\n  redact_witnesses: false\n")
    out = tmp_path / "out"
    assert main(check_args(bundle_files, out)) == 1
    witness = read_report(out)["audits"]["disclosure"]["witnesses"][0]
    assert witness["feature"] in unique_text(int(witness["source_record_id"][1:]))


def test_bad_input_exits_2_and_writes_nothing(
    bundle_files: dict[str, Path], tmp_path: Path, capsys
) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"body": 1}\n')
    out = tmp_path / "out"
    assert main(check_args(dict(bundle_files, synthetic=bad), out)) == 2
    err = capsys.readouterr().err
    assert err.startswith("gate: error: ") and "bad.jsonl: no 'text' column" in err
    assert "Traceback" not in err
    assert not out.exists()


def test_bad_policy_exits_2(bundle_files: dict[str, Path], tmp_path: Path, capsys) -> None:
    write_policy(
        bundle_files["policy"], "version: 1\nname: x\naudits: {disclosure: {features: []}}\n"
    )
    assert main(check_args(bundle_files, tmp_path / "out")) == 2
    assert "audits.disclosure.features" in capsys.readouterr().err


def test_usage_error_exits_2(capsys) -> None:
    with pytest.raises(SystemExit) as info:
        main(["check", "--policy", "p.yaml"])
    assert info.value.code == 2
    # one line naming what is missing, not argparse's usage block
    assert capsys.readouterr().err.splitlines() == [
        "gate check: error: the following arguments are required: --synthetic "
        "(`gate check --help` lists the options)"
    ]


def test_a_missing_source_option_is_answered_before_the_policy_is_read(
    tmp_path: Path, capsys
) -> None:
    """A review waited 8 s (the policy's checks load Presidio) to learn that --holdout was
    missing; the policy here does not even exist."""
    args = ["check", "--policy", str(tmp_path / "none.yaml"), "--synthetic", "s.jsonl"]
    assert main([*args, "--train", "t.jsonl", "--out", str(tmp_path / "out")]) == 2
    assert capsys.readouterr().err.splitlines() == [
        "gate: error: --train is given without --holdout: give both (or --source)"
    ]


def test_verbose_is_taken_after_the_command_too(capsys) -> None:
    """A review: `gate check --verbose ...` was an unrecognised argument, while every
    error's hint says to run with --verbose."""
    from gate.cli import _parser

    assert _parser().parse_args(["policy", "schema", "--verbose"]).verbose is True
    assert _parser().parse_args(["audits", "--verbose"]).verbose is True
    assert _parser().parse_args(["--verbose", "audits"]).verbose is True
    assert _parser().parse_args(["audits"]).verbose is False
    assert main(["policy", "schema", "--verbose"]) == 0
    capsys.readouterr()
    with pytest.raises(SystemExit) as info:
        main(["audits", "--noisy"])
    assert info.value.code == 2


class RaisingAudit(DisclosureAuditRunner):
    citation = "test double of a failing audit"

    def run(self, bundle, config, context):
        raise RuntimeError("the feature store went away")


class SilentAudit(DisclosureAuditRunner):
    citation = "test double of an audit that forgets a metric"

    def run(self, bundle, config, context):
        return AuditResult(metrics=METRICS.values("ngram", {"epsilon_lower": 0.0}))


@pytest.mark.parametrize(
    ("audit", "message"),
    [
        # a message not of the gate's own is withheld (it may quote records)
        (RaisingAudit, "RuntimeError raised at test_check.py:"),
        (SilentAudit, "did not report metric 'ngram.epsilon_lower_exact'"),
    ],
)
def test_audit_that_cannot_finish_exits_3_never_pass(
    audit: type[Audit],
    message: str,
    bundle_files: dict[str, Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(AUDITS._loaded, "disclosure", audit)
    out = tmp_path / "out"
    assert main(check_args(bundle_files, out)) == 3
    report = read_report(out)
    assert report["passed"] is False and report["status"] == "error" and report["exit_code"] == 3
    assert message in report["audits"]["disclosure"]["error"]
    assert report["audits"]["disclosure"]["passed"] is False


def test_unavailable_feature_class_exits_3(
    bundle_files: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The semantic class's package is missing (simulated): exit 3 naming the extra."""

    def missing(*args, **kwargs):
        raise ModuleNotFoundError("No module named 'faiss'", name="faiss")

    monkeypatch.setattr("gate.features.embeddings.encode", missing)
    write_policy(
        bundle_files["policy"],
        "version: 1\nname: t\naudits:\n  disclosure:\n    features: [{class: ngram}, {class: semantic}]\n"
        "    thresholds: {max_epsilon: 0.5}\n",
    )
    out = tmp_path / "out"
    assert main(check_args(bundle_files, out)) == 3
    error = read_report(out)["audits"]["disclosure"]["error"]
    assert "audit 'disclosure' needs the package 'faiss'" in error and "gate[text]" in error


def test_unavailable_audit_exits_3(
    bundle_files: dict[str, Path], tmp_path: Path, monkeypatch
) -> None:
    monkeypatch.delitem(AUDITS._loaded, "disclosure", raising=False)
    monkeypatch.setattr(AUDITS, "_builtins", {})
    out = tmp_path / "out"
    assert main(check_args(bundle_files, out)) == 3
    assert "not available" in read_report(out)["audits"]["disclosure"]["error"]


def gate_result(files: dict[str, Path]):
    """``run_gate`` on the bundle's files (no evidence written)."""
    loaded = load_policy(files["policy"])
    bundle = load_bundle(
        membership=loaded.policy.membership,
        train=files["train"],
        holdout=files["holdout"],
        synthetic=files["synthetic"],
    )
    return run_gate(loaded, bundle, seed=3)


def test_one_failing_audit_among_passing_ones_is_not_a_pass(bundle_files: dict[str, Path]) -> None:
    result = gate_result(bundle_files)
    assert result.status == "fail" and not result.passed and result.exit_code == 1


def test_an_infinite_check_value_is_written_as_json(
    bundle_files: dict[str, Path], tmp_path: Path
) -> None:
    """A review: a plug-in's check measuring inf (which GX's range expectations take)
    made report.json unwritable (strict JSON has no inf). It is written as "inf"."""
    from dataclasses import replace

    from gate.evidence.writer import MlflowSettings, write_evidence

    result = gate_result(bundle_files)
    outcome = result.audits["disclosure"]
    infinite = replace(outcome.checks[0], value=math.inf, passed=False)
    result = replace(
        result, audits={**result.audits, "disclosure": replace(outcome, checks=(infinite,))}
    )
    write_evidence(result, tmp_path / "out", mlflow=MlflowSettings(enabled=False))
    check = read_report(tmp_path / "out")["audits"]["disclosure"]["checks"][0]
    assert check["value"] == "inf" and check["passed"] is False


@pytest.mark.parametrize("seconds", [0, -1, math.nan, 3601])
def test_the_python_api_checks_the_mlflow_timeout(
    bundle_files: dict[str, Path], tmp_path: Path, seconds: float
) -> None:
    """The CLI parsed --mlflow-timeout into (0, 3600]; the API took any number (NaN: a
    run that never waits for its store)."""
    from gate.errors import InputError

    with pytest.raises(InputError, match=r"mlflow_timeout must be in \(0, 3600\] seconds"):
        check_release(
            policy=bundle_files["policy"],
            train=bundle_files["train"],
            holdout=bundle_files["holdout"],
            synthetic=bundle_files["synthetic"],
            out_dir=tmp_path / "out",
            mlflow_timeout=seconds,
        )
    assert not (tmp_path / "out").exists()


def test_run_gate_matches_cli(bundle_files: dict[str, Path], tmp_path: Path) -> None:
    outcome = check_release(
        policy=bundle_files["policy"],
        train=bundle_files["train"],
        holdout=bundle_files["holdout"],
        synthetic=bundle_files["synthetic"],
        out_dir=tmp_path / "api",
    )
    assert main(check_args(bundle_files, tmp_path / "cli")) == outcome.result.exit_code
    api, cli = read_report(tmp_path / "api"), read_report(tmp_path / "cli")
    assert api["audits"]["disclosure"]["metrics"] == cli["audits"]["disclosure"]["metrics"]
    assert outcome.result.exit_code == cli["exit_code"]


def test_atomic_write_leaves_old_file_on_failure(tmp_path: Path) -> None:
    target = tmp_path / "report.json"
    target.write_text("old")

    def half_then_crash(tmp: Path) -> None:
        tmp.write_text("half")
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        atomic_write(target, half_then_crash)
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["report.json"]


def test_summary_prints_verdict(bundle_files: dict[str, Path], tmp_path: Path, capsys) -> None:
    main(check_args(bundle_files, tmp_path / "out"))
    out = capsys.readouterr().out
    assert "verdict: FAIL (exit 1)" in out and "ngram.epsilon_lower_exact" in out


def test_console_script_on_the_bundled_example(tmp_path: Path) -> None:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    example = REPO / "examples" / "bundle"
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "gate",
            "check",
            "--quiet",
            "--policy",
            str(REPO / "policies" / "standard.yaml"),
            "--manifest",
            str(example / "split" / "split-manifest.json"),
            "--synthetic",
            str(example / "synthetic.jsonl"),
            "--out",
            str(tmp_path / "r"),
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        check=False,
    )
    assert result.returncode == 1, result.stderr
    assert "verdict: FAIL" in result.stdout
    report = read_report(tmp_path / "r")
    # made by a gate split before the keyed draw: still checked, and said so
    assert report["membership"]["how"] == "gate split seed=7, an earlier unkeyed draw"


INTERVAL_POLICY = MINIMAL_POLICY.replace(
    "audits:\n", "membership:\n  declared_split: {p: interval}\naudits:\n"
)


def _large_declared_bundle(tmp_path: Path, policy: str) -> dict[str, Path]:
    """230 train and 170 holdout users (a share of 0.575), one record each; a release
    that copies 100 train records."""
    return write_bundle(
        tmp_path, train=230, holdout=170, copied=100, policy=policy, holdout_offset=1000
    )


def test_a_declared_split_under_an_interval_of_p(tmp_path: Path) -> None:
    """`declared_split.p: interval`: the report names the interval, every statement holds
    over it, and epsilon-hat is the one at the interval's upper end, below the one that
    takes the policy's p = 0.5 as the split's."""
    files = _large_declared_bundle(tmp_path, INTERVAL_POLICY)
    out = tmp_path / "out"
    assert main(check_args(files, out, "--no-mlflow")) == 1
    report = read_report(out)
    interval = report["membership"]["p_interval"]
    assert interval["gamma"] == pytest.approx(0.01)  # gamma_share 0.2 of alpha 0.05
    assert interval["low"] < 0.575 < interval["high"]
    disclosure = report["audits"]["disclosure"]
    metrics = disclosure["metrics"]
    assert "whatever p in [" in disclosure["statements"]["ngram"]
    assert any("membership.declared_split.p is interval" in w for w in report["warnings"])
    words = f"p in [{interval['low']:.4f}, {interval['high']:.4f}]"
    assert words in (out / "report.html").read_text()
    assert words in (out / "summary.md").read_text()
    # 100 disclosing users, all in train: p-hat = 0.04^(1/100), epsilon-hat at the upper end
    p_hat, high = 0.04 ** (1 / 100), interval["high"]
    assert metrics["ngram.p_lower_exact"] == pytest.approx(p_hat, rel=1e-3)
    expected = math.log(p_hat * (1 - high) / (high * (1 - p_hat)))
    assert metrics["ngram.epsilon_lower_exact"] == pytest.approx(expected, rel=1e-3)

    assumed = tmp_path / "assumed"
    write_policy(files["policy"], INTERVAL_POLICY.replace("p: interval", "p: assume"))
    assert main(check_args(files, assumed, "--no-mlflow")) == 1
    assumed_report = read_report(assumed)
    assert assumed_report["membership"]["p_interval"] is None
    p_hat_assumed = 0.05 ** (1 / 100)
    assert assumed_report["audits"]["disclosure"]["metrics"][
        "ngram.epsilon_lower_exact"
    ] == pytest.approx(math.log(p_hat_assumed / (1 - p_hat_assumed)), rel=1e-3)
    assert metrics["ngram.epsilon_lower_exact"] < math.log(p_hat_assumed / (1 - p_hat_assumed))
    assert any("declared_split.p: interval" in w for w in assumed_report["warnings"])


def test_an_interval_of_p_is_refused_where_an_audit_needs_p_known(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    policy = INTERVAL_POLICY + (
        "  membership: {scorers: [ngram], delta: 1.0e-5, thresholds: {max_epsilon: 1}}\n"
    )
    files = _large_declared_bundle(tmp_path, policy)
    out = tmp_path / "out"
    assert main(check_args(files, out, "--no-mlflow")) == 2
    err = capsys.readouterr().err
    assert f"{files['policy']}: audits.membership.delta = 1e-05 (set delta: 0" in err
    assert "need membership.p = 0.5 known" in err
    assert "membership.declared_split.p is interval" in err
    assert not out.exists()


def test_a_split_with_a_manifest_takes_its_recorded_p_under_interval(tmp_path: Path) -> None:
    """The manifest's draw proves p: the interval is not spent."""
    source = write_jsonl(
        tmp_path / "all.jsonl",
        [{"record_id": f"r{i}", "user_id": f"u{i}", "text": unique_text(i)} for i in range(80)],
    )
    split = tmp_path / "split"
    split_args = ["split", "--source", str(source), "--p", "0.5", "--seed", "3"]
    assert main([*split_args, "--out", str(split)]) == 0
    train = (tmp_path / "split" / "train.jsonl").read_text().splitlines()
    write_jsonl(tmp_path / "synthetic.jsonl", [{"text": json.loads(r)["text"]} for r in train])
    write_policy(tmp_path / "policy.yaml", INTERVAL_POLICY)
    out = tmp_path / "out"
    args = [
        "check",
        "--quiet",
        "--no-mlflow",
        "--policy",
        str(tmp_path / "policy.yaml"),
        "--manifest",
        str(tmp_path / "split" / "split-manifest.json"),
        "--synthetic",
        str(tmp_path / "synthetic.jsonl"),
        "--out",
        str(out),
    ]
    assert main(args) == 1
    report = read_report(out)
    assert report["membership"]["how"].startswith("gate split seed=3")
    assert report["membership"]["p_interval"] is None
    assert "whatever p in" not in report["audits"]["disclosure"]["statements"]["ngram"]


def test_an_interval_of_p_takes_a_declared_split_far_from_the_policys_p(tmp_path: Path) -> None:
    """70 % of the users in train: refused as far from p = 0.5 when p is assumed; taken
    over its interval (around 0.7) when p is an interval."""
    files = _large_declared_bundle(tmp_path, INTERVAL_POLICY.replace("p: interval", "p: assume"))
    write_jsonl(
        files["holdout"],
        [
            {"record_id": f"h{i}", "user_id": f"uh{i}", "text": unique_text(1000 + i)}
            for i in range(100)
        ],
    )
    assert main(check_args(files, tmp_path / "assumed", "--no-mlflow")) == 2
    write_policy(files["policy"], INTERVAL_POLICY)
    out = tmp_path / "out"
    assert main(check_args(files, out, "--no-mlflow")) == 1
    report = read_report(out)
    assert report["membership"]["split_check"]["consistent_with_p"] is False
    assert report["membership"]["p_interval"]["low"] > 0.6


def test_the_interval_of_p_goes_only_where_an_audit_takes_p(tmp_path: Path) -> None:
    from gate.api.preflight import with_declared_p_interval
    from gate.policy import parse_policy

    files = _large_declared_bundle(tmp_path, INTERVAL_POLICY)
    interval = parse_policy(INTERVAL_POLICY)
    bundle = load_bundle(
        train=files["train"],
        holdout=files["holdout"],
        synthetic=files["synthetic"],
        membership=interval.membership,
    )
    bounded = with_declared_p_interval(bundle, interval, where="p.yaml")
    assert bounded.membership.p_interval is not None
    assert bounded.membership.p_interval.gamma == pytest.approx(0.01)
    # a policy that assumes p drops an interval the bundle carried from an earlier run
    assumed = parse_policy(INTERVAL_POLICY.replace("p: interval", "p: assume"))
    assert with_declared_p_interval(bounded, assumed, where="p.yaml").membership.p_interval is None
    # the canary audit draws its own coin: no interval for a run of it alone
    canary = load_policy(REPO / "policies" / "canary.yaml").policy
    canary = canary.model_copy(
        update={
            "membership": canary.membership.model_copy(
                update={"declared_split": interval.membership.declared_split}
            )
        }
    )
    assert with_declared_p_interval(bundle, canary, where="p.yaml").membership.p_interval is None


def test_checks_an_interval_cannot_fail_are_refused_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """One train user of three: at the interval's upper end no copy can fail max_epsilon."""
    files = {
        "train": write_jsonl(
            tmp_path / "train.jsonl",
            [{"record_id": "t0", "user_id": "ut0", "text": unique_text(0)}],
        ),
        "holdout": write_jsonl(
            tmp_path / "holdout.jsonl",
            [
                {"record_id": f"h{i}", "user_id": f"uh{i}", "text": unique_text(10 + i)}
                for i in range(2)
            ],
        ),
        "synthetic": write_jsonl(tmp_path / "synthetic.jsonl", [{"text": unique_text(0)}]),
        "policy": write_policy(tmp_path / "policy.yaml", INTERVAL_POLICY),
    }
    out = tmp_path / "out"
    assert main(check_args(files, out, "--no-mlflow")) == 3
    report = read_report(out)
    error = report["audits"]["disclosure"]["error"]
    assert "at alpha - gamma = 0.04 and p = 0.9586, the upper end of the declared" in error


def test_a_total_leak_check_refused_over_an_interval_says_so() -> None:
    from gate.audits.membership import refuse_score_checks_that_cannot_fail
    from gate.errors import AuditError
    from gate.policy.models import MembershipAudit
    from gate.stats.split_balance import train_share_interval

    share = train_share_interval(train_users=20, total_users=40, gamma=0.01)
    thresholds = MembershipAudit.model_validate({"thresholds": {"max_epsilon": 1.0}}).thresholds
    with pytest.raises(AuditError, match=r"over the declared split's interval of p \[0\.2"):
        refuse_score_checks_that_cannot_fail(
            thresholds,
            records=40,
            train=20,
            holdout=20,
            alpha=0.05,
            p=0.5,
            delta=0.0,
            selection="split_half",
            unit="users",
            share=share,
        )
