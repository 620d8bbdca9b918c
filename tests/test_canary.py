"""The canary audit (`gate canary`, `audits.canary`): canary-source split, bundle checks,
policy, the audit end to end with a parroting generator (fast) and with the real reference
generator (slow), and its place in the remediation loop."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from gate.api import audit_canaries
from gate.cli import main
from gate.data.bundle import load_bundle
from gate.data.split import split_source
from gate.errors import BundleError, InputError
from gate.policy.loader import load_policy
from gate.policy.models import MembershipPolicy
from gate.remediation.loop import gate_summary
from gate.remediation.schedule import RoundPlan
from gate.remediation.setup import remediation_setup
from tests.conftest import REPO, read_report, write_jsonl, write_policy

EXAMPLE = REPO / "examples" / "bundle"
MANIFEST = EXAMPLE / "split" / "split-manifest.json"
PUBLIC = EXAMPLE / "canary-source.jsonl"

TINY_BASE = (
    "{epochs: 3, config: {layers: 1, hidden: 32, heads: 2, max_length: 128, learning_rate: 0.01}}"
)

PARROT_POLICY = f"""\
version: 1
name: canary-test
seed: 3
audits:
  canary:
    canaries: 48
    n_rep: 2
    prefix_words: 3
    total_words: 10
    target_perplexity: 20
    base_lm: {TINY_BASE}
    sample_size: 400
    references: 2
    signals: [bigram, jaccard]
    thresholds: {{max_auc: 0.6, max_epsilon: 0.5, tpr_at_fpr: {{fpr: 0.05, max_tpr: 0.5}}}}
remediation:
  generator: tests.fake_generators:ParrotGenerator
  epochs: 1
  sample_size: 400
"""


def _canary_main(policy: Path, out: Path, *extra: str, command: str = "canary") -> int:
    return main(
        [
            command,
            "--quiet",
            "--no-mlflow",
            "--policy",
            str(policy),
            "--manifest",
            str(MANIFEST),
            "--out",
            str(out),
            *extra,
        ]
    )


# ---------------------------------------------------------------------------- the split


def _source(tmp_path: Path, users: int = 300) -> Path:
    return write_jsonl(
        tmp_path / "source.jsonl",
        [
            {"record_id": f"r{u}-{k}", "user_id": f"u{u:04d}", "text": f"user {u} note {k}"}
            for u in range(users)
            for k in range(2)
        ],
    )


def _users(path: Path) -> set[str]:
    return set(pd.read_json(path, lines=True)["user_id"])


def test_the_canary_split_is_never_train_or_holdout(tmp_path: Path) -> None:
    source = _source(tmp_path)
    plain = split_source(source, p=0.5, seed=11, by="user_id", out_dir=tmp_path / "plain")
    with_canaries = split_source(
        source, p=0.5, seed=11, by="user_id", out_dir=tmp_path / "c", canary_fraction=0.2
    )
    m = with_canaries.manifest
    assert m.canary_source is not None and m.canary_fraction == 0.2
    canary = _users(tmp_path / "c" / m.canary_source.path)
    train, holdout = (
        _users(tmp_path / "c" / "train.jsonl"),
        _users(tmp_path / "c" / "holdout.jsonl"),
    )
    assert canary and not canary & train and not canary & holdout
    assert len(canary | train | holdout) == 300
    assert 0.12 < len(canary) / 300 < 0.28
    # a separate random stream: every other user keeps the train/holdout draw of q = 0
    assert train == _users(tmp_path / "plain" / "train.jsonl") - canary
    assert holdout == _users(tmp_path / "plain" / "holdout.jsonl") - canary
    assert plain.manifest.canary_source is None


def test_split_refuses_a_canary_fraction_out_of_range(tmp_path: Path) -> None:
    with pytest.raises(BundleError, match=r"--canary-fraction must be in \[0, 1\); found 1"):
        split_source(
            _source(tmp_path), p=0.5, seed=1, by="user_id", out_dir=tmp_path, canary_fraction=1
        )


def test_bundle_reads_the_manifest_canary_split_and_checks_its_hash(tmp_path: Path) -> None:
    out = tmp_path / "split"
    outcome = split_source(
        _source(tmp_path), p=0.5, seed=2, by="user_id", out_dir=out, canary_fraction=0.2
    )
    membership = MembershipPolicy()
    bundle = load_bundle(synthetic=None, membership=membership, manifest=outcome.manifest_path)
    assert bundle.canary_source is not None
    assert not set(bundle.canary_source["user_id"]) & set(bundle.source["user_id"])
    assert bundle.synthetic.empty and "synthetic" not in bundle.fingerprints
    path = out / outcome.manifest.canary_source.path  # type: ignore[union-attr]
    path.write_text(path.read_text() + '{"user_id": "zz", "text": "added later"}\n')
    with pytest.raises(BundleError, match="canary-source file does not match the manifest"):
        load_bundle(synthetic=None, membership=membership, manifest=outcome.manifest_path)


@pytest.mark.parametrize("clash", ["user", "text"])
def test_a_canary_source_sharing_users_or_texts_with_the_source_is_refused(
    tmp_path: Path, clash: str
) -> None:
    train = pd.read_json(EXAMPLE / "split" / "train.jsonl", lines=True).iloc[0]
    row = {"record_id": "p1", "user_id": "public-1", "text": "a public sentence of words"}
    row["user_id" if clash == "user" else "text"] = train["user_id" if clash == "user" else "text"]
    public = write_jsonl(tmp_path / "public.jsonl", [row])
    with pytest.raises(
        BundleError, match=f"public.jsonl: line 1: this canary-source record's {clash}"
    ):
        load_bundle(
            synthetic=None,
            membership=MembershipPolicy(),
            manifest=MANIFEST,
            canary_source=public,
        )


# ---------------------------------------------------------------------------- the policy


def _canary_policy(tmp_path: Path, block: str, remediation: str = "") -> Path:
    return write_policy(
        tmp_path / "p.yaml",
        f"version: 1\nname: t\naudits:\n  canary:\n{block}\n{remediation}",
    )


@pytest.mark.parametrize(
    ("block", "message"),
    [
        (
            "    prefix_words: 10\n    total_words: 10\n    thresholds: {max_auc: 0.6}",
            "prefix_words must be < total_words",
        ),
        ("    references: 3\n    thresholds: {max_auc: 0.6}", "references must be even"),
        ("    thresholds: {max_auc: 1.0}", "audits.canary.thresholds.max_auc"),
        ("    n_rep: -1\n    thresholds: {max_auc: 0.6}", "audits.canary.n_rep"),
    ],
)
def test_invalid_canary_settings_name_their_yaml_path(
    tmp_path: Path, block: str, message: str
) -> None:
    with pytest.raises(InputError, match=message):
        load_policy(_canary_policy(tmp_path, block))


def test_the_canary_audit_audits_the_remediation_generator_by_default(tmp_path: Path) -> None:
    remediation = "remediation:\n  generator_config: {layers: 1}\n  epochs: 7\n"
    policy = load_policy(
        _canary_policy(tmp_path, "    thresholds: {max_auc: 0.6}", remediation)
    ).policy
    canary = policy.audits.canary
    assert canary is not None
    assert (canary.generator, canary.generator_config, canary.epochs) == (
        "reference",
        {"layers": 1},
        7,
    )
    own = load_policy(
        _canary_policy(
            tmp_path,
            "    generator: tests.fake_generators:ParrotGenerator\n    thresholds: {max_auc: 0.6}",
            remediation,
        )
    ).policy.audits.canary
    assert own is not None and own.generator_config == {}  # not the other generator's


def test_bad_generator_settings_are_exit_2_before_any_training(tmp_path: Path) -> None:
    policy = _canary_policy(
        tmp_path, "    base_lm: {config: {layers: 0}}\n    thresholds: {max_auc: 0.6}"
    )
    assert _canary_main(policy, tmp_path / "out") == 2
    assert not (tmp_path / "out" / "report.json").exists()


def test_gate_canary_needs_a_policy_with_a_canary_threshold(tmp_path: Path, capsys) -> None:
    policy = write_policy(
        tmp_path / "p.yaml",
        "version: 1\nname: t\naudits:\n  disclosure:\n    features: [{class: ngram}]\n"
        "    thresholds: {max_epsilon: 0.5}\n",
    )
    assert _canary_main(policy, tmp_path / "out") == 2
    assert "audits.canary: the policy has no enabled canary audit" in capsys.readouterr().err


def test_no_canary_source_is_bad_input_before_any_work(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    policy = write_policy(tmp_path / "p.yaml", PARROT_POLICY)
    assert _canary_main(policy, tmp_path / "out") == 2
    err = capsys.readouterr().err
    assert f"{policy}: audits.canary: the canary audit needs canary-source records" in err
    assert not list((tmp_path / "out").glob("*"))  # no verdict, no half-written evidence
    # gate remediate refuses it before it trains anything
    argv = ["remediate", "--quiet", "--no-mlflow", "--policy", str(policy)]
    code = main([*argv, "--manifest", str(MANIFEST), "--out", str(tmp_path / "rem")])
    assert code == 2
    assert "needs canary-source records" in capsys.readouterr().err
    assert not (tmp_path / "rem").exists() or not list((tmp_path / "rem").glob("*"))


def test_a_canary_source_no_audit_uses_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """As --model without the profile audit: the user would believe canaries audited."""
    policy = write_policy(
        tmp_path / "p.yaml",
        "version: 1\nname: t\naudits:\n  disclosure:\n    features: [{class: ngram}]\n"
        "    thresholds: {max_epsilon: 0.5}\n",
    )
    argv = ["check", "--quiet", "--no-mlflow", "--policy", str(policy), "--manifest"]
    argv += [str(MANIFEST), "--synthetic", str(EXAMPLE / "synthetic.jsonl")]
    code = main([*argv, "--canary-source", str(PUBLIC), "--out", str(tmp_path / "out")])
    assert code == 2
    assert "enables no canary audit, so the canary source would go unused" in (
        capsys.readouterr().err
    )
    assert not (tmp_path / "out").exists()


# ---------------------------------------------------------------------------- the audit


def test_a_parroting_generator_fails_the_canary_audit(tmp_path: Path) -> None:
    policy = write_policy(tmp_path / "p.yaml", PARROT_POLICY)
    out = tmp_path / "out"
    outcome = audit_canaries(
        policy=policy, manifest=MANIFEST, canary_source=PUBLIC, out_dir=out, mlflow=False
    )
    assert outcome.result.status == "fail"
    values = outcome.result.audits["canary"].result.metric_values  # type: ignore[union-attr]
    # the parrot copies its training records: member canaries are in the release verbatim
    assert values["bigram.auc"] == 1.0 and values["jaccard.auc"] > 0.8
    assert values["bigram.auc_p_value"] <= 1e-4  # the permutation test's floor
    assert values["bigram.epsilon_lower"] > 0  # 48 canaries cap it near 1
    assert "bigram_rmia.auc" in values and "tpr_at_fpr_0.05" in "".join(values)
    report = read_report(out)
    details = report["audits"]["canary"]["details"]
    canaries = details["canaries"]
    assert canaries["count"] == 48 and len(canaries["set"]) == 48
    assert canaries["n_rep"] == 2 and canaries["target_perplexity"] == 20
    assert all(18 <= c["perplexity"] <= 22 for c in canaries["set"])
    assert len(canaries["insertion_map_sha256"]) == 64
    assert details["trainings"] == 4 and details["seeds"]["target"] >= 0
    # each canary is a member of exactly one of the two references
    assert sum(r["members"] for r in details["references"]) == 48
    # redacted: every word is masked (the base LM was trained on canary-source records)
    witness = report["audits"]["canary"]["witnesses"][0]
    assert all(set(w[1:]) <= {"*"} for w in witness["feature"].split())
    assert all(set(w[1:]) <= {"*"} for c in canaries["set"] for w in c["text"].split())
    assert (out / "report.html").read_text().count("canary") > 3
    # the same seed gives the same canaries and the same verdict
    again = audit_canaries(
        policy=policy,
        manifest=MANIFEST,
        canary_source=PUBLIC,
        out_dir=tmp_path / "again",
        mlflow=False,
    )
    assert (
        read_report(tmp_path / "again")["audits"]["canary"]["details"]["canaries"][
            "insertion_map_sha256"
        ]
        == canaries["insertion_map_sha256"]
    )
    assert again.result.status == "fail"


def test_the_canary_evidence_reaches_mlflow(tmp_path: Path) -> None:
    from mlflow import MlflowClient

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    policy = write_policy(tmp_path / "p.yaml", PARROT_POLICY)
    outcome = audit_canaries(
        policy=policy,
        manifest=MANIFEST,
        canary_source=PUBLIC,
        out_dir=tmp_path / "out",
        tracking_uri=uri,
    )
    client = MlflowClient(tracking_uri=uri)
    run = client.get_run(outcome.mlflow_run_id)  # type: ignore[arg-type]
    assert run.data.metrics["canary.bigram.auc"] == 1.0
    assert run.data.params["policy.canary.n_rep"] == "2"
    assert run.data.params["policy.canary.target_perplexity"] == "20.0"
    inputs = {i.dataset.name.split(":")[0] for i in run.inputs.dataset_inputs}
    assert inputs == {"train", "holdout", "canary_source"}
    (child,) = client.search_runs(
        [run.info.experiment_id], filter_string=f"tags.mlflow.parentRunId = '{run.info.run_id}'"
    )
    details = json.loads(
        Path(
            client.download_artifacts(child.info.run_id, "details.json", str(tmp_path))
        ).read_text()
    )
    report = read_report(tmp_path / "out")["audits"]["canary"]["details"]
    assert details["canaries"]["insertion_map_sha256"] == report["canaries"]["insertion_map_sha256"]
    assert details["seeds"] == report["seeds"]
    assert "plots/canary-roc-by-signal.png" in {
        a.path for a in client.list_artifacts(run.info.run_id, "plots")
    }


def test_no_inserted_canaries_give_no_evidence(tmp_path: Path) -> None:
    """The null control (n_rep = 0: labels drawn, nothing inserted): the signals cannot
    depend on the labels, so no bound is positive and no AUC test rejects in these seeded
    runs. (Over seeds 100-139 the bigram and Jaccard AUC tests each rejected at 0.05 in 1
    of 40 runs, as a valid test does about 5% of the time, and the bound was 0 in all 40;
    tests/test_stats_canary.py checks the rates over 1,000 draws.)"""
    for seed in (0, 3, 4):
        text = PARROT_POLICY.replace("n_rep: 2", "n_rep: 0").replace("seed: 3", f"seed: {seed}")
        policy = write_policy(tmp_path / f"p{seed}.yaml", text)
        outcome = audit_canaries(
            policy=policy,
            manifest=MANIFEST,
            canary_source=PUBLIC,
            out_dir=tmp_path / f"o{seed}",
            mlflow=False,
        )
        canary = outcome.result.audits["canary"].result
        values = canary.metric_values  # type: ignore[union-attr]
        for signal in ("bigram", "jaccard", "bigram_rmia"):
            assert values[f"{signal}.epsilon_lower"] == 0
            assert values[f"{signal}.auc_p_value"] > 0.05
            assert canary.statements[signal].startswith("Null control (n_rep = 0)")  # type: ignore[union-attr]
        assert outcome.result.status == "pass"


def test_the_null_control_cannot_gate_a_release(tmp_path: Path, capsys) -> None:
    """A review: n_rep 0 plants nothing, so its checks fail a leaking pipeline no more
    often than a clean one, and gate check counted its PASS. gate check and gate
    remediate refuse it (exit 2, naming the setting); gate canary runs it (above)."""
    policy = write_policy(tmp_path / "p.yaml", PARROT_POLICY.replace("n_rep: 2", "n_rep: 0"))
    for command, *extra in (
        ["check", "--synthetic", str(EXAMPLE / "synthetic.jsonl")],
        ["remediate"],
    ):
        out = tmp_path / command
        code = _canary_main(policy, out, *extra, "--canary-source", str(PUBLIC), command=command)
        assert code == 2, command
        assert "audits.canary.n_rep: 0 is the null control" in capsys.readouterr().err
        assert not out.exists() or not any(out.iterdir())


def test_run_gate_refuses_the_null_control_where_it_gates_a_release() -> None:
    """The library's run_gate refuses it too when the bundle holds a release, or when
    the policy runs other audits beside it (a review: only the commands refused)."""
    from gate.api import run_gate
    from gate.policy import parse_policy

    null_control = PARROT_POLICY.replace("n_rep: 2", "n_rep: 0")
    with_disclosure = null_control.replace(
        "audits:\n",
        "audits:\n  disclosure:\n    features: [{class: ngram, n_min: 3, n_max: 5}]\n"
        "    thresholds: {max_epsilon: 0.5}\n",
    )
    release = load_bundle(
        membership=MembershipPolicy(),
        manifest=MANIFEST,
        synthetic=EXAMPLE / "synthetic.jsonl",
        canary_source=PUBLIC,
    )
    no_release = load_bundle(
        membership=MembershipPolicy(), manifest=MANIFEST, synthetic=None, canary_source=PUBLIC
    )
    for policy, bundle in (
        (null_control, release),
        (with_disclosure, release),
        (with_disclosure, no_release),
    ):
        with pytest.raises(InputError, match=r"^the policy: audits.canary.n_rep: 0 is the null"):
            run_gate(parse_policy(policy), bundle)


def test_a_generator_writing_one_line_is_an_error(tmp_path: Path) -> None:
    """A review: a generator whose release is one line scored every canary alike, every
    signal at chance, and the audit passed, certifying nothing about the pipeline."""
    text = PARROT_POLICY + "  generator_config: {fail_with: constant}\n"
    outcome = audit_canaries(
        policy=write_policy(tmp_path / "p.yaml", text),
        manifest=MANIFEST,
        canary_source=PUBLIC,
        out_dir=tmp_path / "out",
        mlflow=False,
    )
    assert outcome.result.status == "error"
    error = outcome.result.audits["canary"].error
    assert error is not None and "every signal scored all 48 canaries alike" in error
    assert "400 records (1 distinct)" in error


def test_gate_check_runs_the_canary_audit_next_to_the_passive_ones(tmp_path: Path) -> None:
    text = PARROT_POLICY.replace(
        "audits:\n",
        "audits:\n  disclosure:\n    features: [{class: ngram}]\n"
        "    thresholds: {max_epsilon: 0.5}\n",
    )
    policy = write_policy(tmp_path / "p.yaml", text)
    out = tmp_path / "out"
    code = main(
        [
            "check",
            "--quiet",
            "--no-mlflow",
            "--policy",
            str(policy),
            "--manifest",
            str(MANIFEST),
            "--synthetic",
            str(EXAMPLE / "synthetic.jsonl"),
            "--canary-source",
            str(PUBLIC),
            "--out",
            str(out),
        ]
    )
    assert code == 1
    report = read_report(out)
    assert set(report["audits"]) == {"disclosure", "canary"}
    assert report["audits"]["canary"]["status"] == "fail"
    assert report["inputs"]["canary_source"]["records"] == len(PUBLIC.read_text().splitlines())
    assert (out / "plots" / "canary-roc-by-signal.png").exists()


# ---------------------------------------------------------------------------- remediation


def test_each_remediation_round_audits_its_own_training(tmp_path: Path) -> None:
    loaded = load_policy(
        write_policy(
            tmp_path / "p.yaml",
            PARROT_POLICY + "  dpsgd: {epsilons: [4], epochs: 9, delta: 0.001}\n",
        )
    )
    setup = remediation_setup(loaded, generator=None, method=None)
    round0 = setup.canary_round_policy(loaded, RoundPlan(0, "none", None), train_users=100)
    round1 = setup.canary_round_policy(loaded, RoundPlan(1, "dpsgd", 4.0), train_users=100)
    first, second = round0.policy.audits.canary, round1.policy.audits.canary
    assert first is not None and first.privacy is None and first.epochs == 1
    assert second is not None and second.privacy is not None and second.epochs == 9
    assert (second.privacy.epsilon, second.privacy.delta) == (4.0, 0.001)


def test_the_remediation_summary_carries_the_canary_signals() -> None:
    summary = gate_summary(
        {
            "membership": {"ngram.auc": 0.55, "ngram.epsilon_lower": 0.2},
            "canary": {"bigram.auc": 0.9, "bigram.epsilon_lower": 0.7, "jaccard.auc": 0.6},
        }
    )
    assert summary["auc"] == {"ngram": 0.55, "canary:bigram": 0.9, "canary:jaccard": 0.6}
    # a canary's bound is per canary (n_rep copies), not per user: kept apart
    assert summary["epsilon_lower"] == {"membership:ngram": 0.2}
    assert summary["canary_epsilon_lower"] == {"bigram": 0.7}


def test_remediation_canary_releases_are_as_large_as_the_remediations(tmp_path: Path) -> None:
    """The canary audit samples the remediation's release size unless it sets its own."""
    text = PARROT_POLICY.replace("    sample_size: 400\n    references", "    references")
    loaded = load_policy(write_policy(tmp_path / "p.yaml", text))
    assert loaded.policy.audits.canary is not None
    assert loaded.policy.audits.canary.sample_size is None
    setup = remediation_setup(loaded, generator=None, method=None)
    round1 = setup.canary_round_policy(loaded, RoundPlan(1, "dpsgd", 4.0), train_users=100)
    assert round1.policy.audits.canary is not None
    assert round1.policy.audits.canary.sample_size == setup.remediation.sample_size == 400
    own = setup.canary_round_policy(
        load_policy(
            write_policy(
                tmp_path / "q.yaml",
                PARROT_POLICY.replace("size: 400\n    ref", "size: 90\n    ref"),
            )
        ),
        RoundPlan(1, "dpsgd", 4.0),
        train_users=100,
    )
    assert own.policy.audits.canary is not None and own.policy.audits.canary.sample_size == 90


def test_remediation_with_rip_refuses_the_canary_audit(tmp_path: Path) -> None:
    loaded = load_policy(write_policy(tmp_path / "p.yaml", PARROT_POLICY))
    with pytest.raises(InputError, match="cannot reproduce RIP noise"):
        remediation_setup(loaded, generator=None, method="rip")


# ---------------------------------------------------------------------------- slow


REFERENCE_POLICY = """\
version: 1
name: canary-reference
seed: 0
audits:
  canary:
    canaries: 40
    n_rep: {n_rep}
    prefix_words: 4
    total_words: 16
    target_perplexity: 3.0
    base_lm: {{epochs: 15, config: {{max_length: 160}}}}
    references: 0
    signals: [bigram, jaccard]
    thresholds: {{max_auc: 0.6, max_epsilon: 0.5}}
remediation:
  generator_config: {{layers: 2, hidden: 128, heads: 4, max_length: 128, batch_size: 8, learning_rate: 0.002}}
  epochs: 40
"""


@pytest.mark.slow
@pytest.mark.timeout(1800)  # two trainings of 40 epochs: 600 s ran out on a slower CPU
def test_the_reference_generator_echoes_its_canaries_and_the_null_control_does_not(
    tmp_path: Path,
) -> None:
    """With 8 copies of each member canary, 40 epochs: the release alone tells members
    (the AUC test rejects, AUC well above 1/2); with no canary inserted (labels still
    drawn) the AUC test does not reject and ε̂ = 0. Every canary lies in the perplexity
    window.

    Measured at policy seeds 0, 1, 2: 2-gram AUC 0.83, 0.87, 0.94 with 8 copies (ε̂ > 0);
    with 6 copies 0.66 to 0.95 (ε̂ = 0 at seed 0), too close to chance for a test of power.
    A fresh install on 2026-11-29 (the same code: the training's numbers follow the
    installed libraries) gave AUC 0.75, p = 0.0037, and ε̂ = 0 at seed 0: with 40 canaries
    the one-run bound has little power, so ε̂ > 0 is no longer asked for here."""
    results = {}
    for n_rep in (8, 0):
        policy = write_policy(tmp_path / f"p{n_rep}.yaml", REFERENCE_POLICY.format(n_rep=n_rep))
        out = tmp_path / f"out{n_rep}"
        outcome = audit_canaries(
            policy=policy, manifest=MANIFEST, canary_source=PUBLIC, out_dir=out, mlflow=False
        )
        results[n_rep] = outcome.result.audits["canary"].result.metric_values  # type: ignore[union-attr]
        canaries = read_report(out)["audits"]["canary"]["details"]["canaries"]
        ppl = np.array([c["perplexity"] for c in canaries["set"]])
        assert ((ppl >= 2.7) & (ppl <= 3.3)).all()
    planted, null = results[8], results[0]
    assert planted["bigram.auc"] >= 0.7 and planted["bigram.auc_p_value"] < 0.05, planted
    for signal in ("bigram", "jaccard"):
        assert null[f"{signal}.auc_p_value"] >= 0.05
        assert null[f"{signal}.epsilon_lower"] == 0


def test_a_private_canary_trainings_record_holds_no_loss() -> None:
    """A review: the canary audit's record of a DP-SGD training gave its final loss (an
    exact statistic of the train users its epsilon does not cover) and called its unit
    a user, where a canary copy is an example of its own."""
    from gate.canary.audit import _fit_summary
    from gate.generators.base import FitReport, PrivacySpent

    spent = PrivacySpent(
        accountant="prv",
        epsilon=4.0,
        delta=1e-3,
        noise_multiplier=1.1,
        sample_rate=0.1,
        steps=50,
        max_grad_norm=1.0,
        unit="user",
    )
    fit = FitReport(epochs=2, steps=50, losses=(3.2, 2.9), seconds=1.0, examples=40)
    assert _fit_summary(fit)["final_loss"] == 2.9 and _fit_summary(fit)["privacy"] is None
    private = _fit_summary(FitReport(**{**fit.__dict__, "privacy": spent}))
    assert private["final_loss"] is None
    assert private["privacy"]["unit"] == "example (a train user or a canary copy)"
    assert private["privacy"]["epsilon"] == 4.0
