"""Evidence: the GX suite decides, MLflow runs (local SQLite and a real server), HTML,
JUnit and Markdown reports, Data Docs, and redaction of every produced file."""

from __future__ import annotations

import csv
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from xml.etree import ElementTree as ET

import pytest

import gate.api.check
from gate.api import check_release
from gate.evidence.writer import EvidenceWriteError
from gate.quiet import WITHHELD
from gate.redaction import feature_hash, mask, release_record_hash, user_hash
from gate.results import SuiteValidation

from .conftest import write_jsonl, write_policy

POLICY = """\
version: 1
name: evidence
audits:
  disclosure:
    features: [{class: ngram, n_min: 3, n_max: 4}]
    thresholds: {max_epsilon: 0.5, max_excess_disclosures: 100000}
  membership:
    scorers: [ngram]
    thresholds: {max_auc: 0.95}
"""


def rare_text(i: int) -> str:
    """Long, distinctive tokens: a chance match inside base64 or a hash is impossible."""
    return " ".join(f"Zephyrine{i:03d}Quixotic{j:02d}" for j in range(12))


def user_email(i: int) -> str:
    """Users defined by an identifying column (as `gate split --by email` allows)."""
    return f"Ysolde{i:03d}.Farquharson@example.org"


@pytest.fixture
def bundle(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    monkeypatch.chdir(tmp_path)
    rows = [
        {"record_id": f"r{i}", "user_id": user_email(i), "text": rare_text(i)} for i in range(60)
    ]
    write_jsonl(tmp_path / "train.jsonl", rows[:30])
    write_jsonl(tmp_path / "holdout.jsonl", rows[30:])
    write_jsonl(
        tmp_path / "leaky.jsonl", [{"record_id": f"s{i}", "text": rare_text(i)} for i in range(20)]
    )
    write_jsonl(
        tmp_path / "clean.jsonl",
        [{"record_id": f"s{i}", "text": rare_text(900 + i)} for i in range(20)],
    )
    write_policy(tmp_path / "policy.yaml", POLICY)
    return {
        "policy": tmp_path / "policy.yaml",
        "train": tmp_path / "train.jsonl",
        "holdout": tmp_path / "holdout.jsonl",
        "leaky": tmp_path / "leaky.jsonl",
        "clean": tmp_path / "clean.jsonl",
    }


def check(files: dict[str, Path], release: str, out: Path, **kwargs):
    return check_release(
        policy=files["policy"],
        train=files["train"],
        holdout=files["holdout"],
        synthetic=files[release],
        out_dir=out,
        **kwargs,
    )


@pytest.mark.parametrize(("release", "passed"), [("leaky", False), ("clean", True)])
def test_gx_validation_decides_the_verdict(
    bundle, tmp_path: Path, release: str, passed: bool
) -> None:
    outcome = check(bundle, release, tmp_path / "out", mlflow=False)
    report = json.loads(outcome.report_path.read_text())
    gx_result = json.loads((tmp_path / "out" / "gx-validation.json").read_text())
    assert report["passed"] is passed
    assert report["passed"] == gx_result["success"] == report["evidence"]["gx_success"]
    between = {
        r["expectation_config"]["kwargs"]["column"]: r["success"]
        for r in gx_result["results"]
        if r["expectation_config"]["type"] == "expect_column_values_to_be_between"
    }
    checks = [c for a in report["audits"].values() for c in a["checks"]]
    assert len(between) == len(checks) == 3
    assert sorted(between.values()) == sorted(c["passed"] for c in checks)
    suite = json.loads((tmp_path / "out" / "gx-suite.json").read_text())
    types = [e["type"] for e in suite["expectations"]]
    assert types.count("expect_column_values_to_be_between") == 3
    assert types.count("expect_column_values_to_not_be_null") == 3
    assert types.count("expect_column_values_to_be_in_set") == len(report["audits"]) == 2
    assert all(
        r["success"]
        for r in gx_result["results"]
        if "between" not in r["expectation_config"]["type"]
    )


def test_gx_disagreement_is_an_error(
    bundle, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = gate.api.check.validate_checks

    def flipped(values, **kwargs) -> SuiteValidation:
        v = real(values, **kwargs)
        return SuiteValidation(
            not v.success,
            {k: not s for k, s in v.check_success.items()},
            v.completed,
            v.result,
            v.suite,
            None,
        )

    monkeypatch.setattr(gate.api.check, "validate_checks", flipped)
    outcome = check(bundle, "clean", tmp_path / "out", mlflow=False)
    assert outcome.result.status == "error" and outcome.result.exit_code == 3
    assert "disagree" in (outcome.result.evidence_error or "")


def test_gx_failure_is_an_error(bundle, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(values, **kwargs):
        raise RuntimeError("suite store unavailable")

    monkeypatch.setattr(gate.api.check, "validate_checks", broken)
    outcome = check(bundle, "clean", tmp_path / "out", mlflow=False)
    report = json.loads(outcome.report_path.read_text())
    assert report["passed"] is False and report["status"] == "error"
    assert "suite store unavailable" in report["evidence_error"]


def test_data_docs_site(bundle, tmp_path: Path) -> None:
    check(bundle, "leaky", tmp_path / "out", mlflow=False, data_docs=tmp_path / "docs")
    index = tmp_path / "docs" / "index.html"
    assert index.exists()
    assert list((tmp_path / "docs").rglob("validations/**/*.html"))


def test_reports_html_junit_markdown(bundle, tmp_path: Path) -> None:
    outcome = check(bundle, "leaky", tmp_path / "out", mlflow=False)
    out = tmp_path / "out"
    html = (out / "report.html").read_text()
    assert "FAIL" in html and "data:image/png;base64," in html
    assert "http://" not in html and "https://" not in html  # self-contained
    suites = ET.parse(out / "junit.xml").getroot()
    cases = suites.findall(".//testcase")
    failed = [c for c in cases if c.find("failure") is not None]
    checks = [
        c
        for a in json.loads(outcome.report_path.read_text())["audits"].values()
        for c in a["checks"]
    ]
    assert len(cases) == len(checks)
    assert len(failed) == sum(not c["passed"] for c in checks) > 0
    summary = (out / "summary.md").read_text()
    assert "❌ FAIL" in summary and "`ngram.epsilon_lower_exact`" in summary
    assert {p.name for p in (out / "plots").iterdir()} == {
        "disclosures-train-vs-phantoms.png",
        "membership-roc-by-scorer.png",
        "epsilon.png",
    }
    assert (out / "plots" / "membership-roc-by-scorer.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_mlflow_run_in_local_sqlite(bundle, tmp_path: Path) -> None:
    from mlflow import MlflowClient

    outcome = check(bundle, "leaky", tmp_path / "out")
    run_id = outcome.mlflow_run_id
    assert run_id and (tmp_path / "mlflow.db").exists()
    client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}")
    run = client.get_run(run_id)
    assert run.data.tags["gate.passed"] == "false"
    assert run.data.tags["gate.membership.how"] == "declared"
    assert run.data.params["policy.name"] == "evidence" and run.data.params["alpha"] == "0.05"
    # one parameter per setting of each feature class and scorer (a review: the list
    # was one parameter cut at 500 characters, losing the later classes)
    assert run.data.params["policy.disclosure.features.0.n_max"] == "4"
    assert run.data.params["policy.membership.scorers.0.scorer"] == "ngram"
    assert run.data.metrics["disclosure.ngram.epsilon_lower_exact"] > 0.5
    experiment = client.get_experiment(run.info.experiment_id)
    assert experiment.name == "gate/evidence"
    children = client.search_runs(
        [run.info.experiment_id], filter_string=f"tags.mlflow.parentRunId = '{run_id}'"
    )
    assert sorted(r.info.run_name for r in children) == ["disclosure", "membership"]
    artifacts = {a.path for a in client.list_artifacts(run_id)}
    assert {
        "report.json",
        "report.html",
        "junit.xml",
        "witnesses.csv",
        "gx-validation.json",
    } <= artifacts
    assert {a.path for a in client.list_artifacts(run_id, "plots")} >= {
        "plots/membership-roc-by-scorer.png"
    }
    inputs = {i.dataset.name.split(":")[0]: i.dataset.digest for i in run.inputs.dataset_inputs}
    assert set(inputs) == {"train", "holdout", "synthetic"}
    report = json.loads(outcome.report_path.read_text())
    assert report["evidence"]["mlflow_run_id"] == run_id


def test_a_sqlite_stores_artifacts_go_beside_its_database(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A review: with --tracking-uri sqlite:////elsewhere/mlflow.db the report, the HTML and
    the witnesses went to ./mlruns of whatever directory the first run started in."""
    from mlflow import MlflowClient

    from gate.evidence.mlflow_log import _experiment_id

    store = tmp_path / "store" / "mlflow.db"
    store.parent.mkdir()
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    uri = f"sqlite:///{store}"
    client = MlflowClient(tracking_uri=uri)
    experiment = client.get_experiment(_experiment_id(client, "gate/x", uri))
    assert experiment.artifact_location == (store.parent / "mlruns" / "gate_x").as_uri()


def test_dataset_content_only_when_the_policy_allows_it(bundle, tmp_path: Path) -> None:
    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}")
    fingerprint_run = client.get_run(check(bundle, "leaky", tmp_path / "a").mlflow_run_id)
    assert all(
        i.dataset.profile in (None, "", "{}") or "num_rows" not in i.dataset.profile
        for i in fingerprint_run.inputs.dataset_inputs
    )
    bundle["policy"].write_text(
        POLICY + "evidence:\n  redact_witnesses: false\n  mlflow: {log_dataset_content: true}\n"
    )
    content_run = client.get_run(check(bundle, "leaky", tmp_path / "b").mlflow_run_id)
    profiles = {
        i.dataset.name.split(":")[0]: json.loads(i.dataset.profile)
        for i in content_run.inputs.dataset_inputs
    }
    assert profiles["train"]["num_rows"] == 30 and profiles["synthetic"]["num_rows"] == 20


def test_a_failed_evidence_write_leaves_no_stale_verdict(
    bundle, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "out"
    check(bundle, "clean", out, mlflow=False)
    assert json.loads((out / "report.json").read_text())["passed"] is True

    def disk_full(result, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("gate.evidence.writer.html_report", disk_full)
    with pytest.raises(
        EvidenceWriteError, match=r"could not write the evidence to .*No space left"
    ):
        check(bundle, "leaky", out, mlflow=False)
    assert not (out / "report.json").exists() and not (out / "summary.md").exists()
    assert not list(tmp_path.glob(".out.*.tmp")), "a staging directory was left behind"


def test_unreachable_tracking_server_is_an_error(
    bundle, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_TIMEOUT", "5")
    outcome = check(bundle, "clean", tmp_path / "out", tracking_uri="http://127.0.0.1:9/")
    report = json.loads(outcome.report_path.read_text())
    assert outcome.result.exit_code == 3 and report["passed"] is False
    assert "MLflow logging to http://127.0.0.1:9/ failed" in report["evidence_error"]


@pytest.mark.parametrize("after_both_waits", [False, True])
def test_a_verdict_still_in_flight_when_the_gate_gives_up_is_withdrawn(
    bundle, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, after_both_waits: bool
) -> None:
    """A review: the request carrying gate.passed=true, slow to land, landed after the
    gate had given up on the run and tagged it an error, so the run said passed. The gate
    now waits for that request before withdrawing the verdict; when it lands after both
    of the withdrawal's waits (here 1 s each; MLflow's client retries for minutes), in a
    process that lives on, the withdrawal is written again once it does (a review: a
    test landing within the second wait had never reached that code)."""
    from mlflow import MlflowClient

    import gate.evidence.writer as writer

    check(bundle, "clean", tmp_path / "warm")  # creates the SQLite store first
    timeout = 4.0 if after_both_waits else 6.0
    landing = 8.0 if after_both_waits else 6.0  # within the second wait, or seconds after it
    if after_both_waits:
        monkeypatch.setattr(writer, "ABANDON_WAIT_SECONDS", 1.0)
    sent = {"verdicts": 0}

    def slow_when_passing(method):
        def call(self, run_id, *args, **kwargs):
            tags = kwargs.get("tags") or []
            passing = any(t.key == "gate.passed" and t.value == "true" for t in tags)
            if passing or args[:2] == ("gate.passed", "true"):
                sent["verdicts"] += 1
                time.sleep(landing)  # lands after the gate's deadline
            return method(self, run_id, *args, **kwargs)

        return call

    monkeypatch.setattr(MlflowClient, "log_batch", slow_when_passing(MlflowClient.log_batch))
    monkeypatch.setattr(MlflowClient, "set_tag", slow_when_passing(MlflowClient.set_tag))
    outcome = check(bundle, "clean", tmp_path / "out", mlflow_timeout=timeout)
    assert sent["verdicts"] == 1 and outcome.result.exit_code == 3
    assert "did not answer" in outcome.result.evidence_error
    monkeypatch.undo()
    time.sleep(landing + 1)  # the slow request has landed by now, withdrawn or not
    run = MlflowClient(tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}").get_run(
        outcome.mlflow_run_id
    )
    assert run.data.tags["gate.passed"] == "false" and run.data.tags["gate.status"] == "error"
    assert run.info.status == "FAILED"


def test_a_withdrawal_withdraws_the_verdict_before_its_slow_uploads(
    bundle, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run FINISHED with a PASS whose evidence then could not be put in place is
    withdrawn within ABANDON_SECONDS: a review's slow store spent them on the error's
    files, and the run kept gate.passed=true."""
    from mlflow import MlflowClient

    from gate.evidence.mlflow_log import GateRunLog
    from gate.evidence.writer import ABANDON_SECONDS, _abandon

    outcome = check(bundle, "clean", tmp_path / "out")
    store = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = MlflowClient(tracking_uri=store)
    assert client.get_run(outcome.mlflow_run_id).data.tags["gate.passed"] == "true"
    log = GateRunLog(store)
    log.client, log.run_id = client, outcome.mlflow_run_id
    real = MlflowClient.log_artifact

    def slow(self, *args, **kwargs):
        time.sleep(ABANDON_SECONDS / 2 + 1)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(MlflowClient, "log_artifact", slow)
    replacements = {n: tmp_path / "out" / n for n in ("report.json", "junit.xml")}
    _abandon(log, "FAILED", replacements)
    run = client.get_run(outcome.mlflow_run_id)
    assert run.info.status == "FAILED"
    assert run.data.tags["gate.passed"] == "false" and run.data.tags["gate.status"] == "error"


def test_an_infinite_epsilon_is_logged_and_named(tmp_path: Path) -> None:
    from mlflow import MlflowClient

    from gate.evidence.mlflow_log import _log_batches

    client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}")
    run_id = client.create_run(client.create_experiment("x")).info.run_id
    metrics = {"a.epsilon": float("inf"), "a.auc": float("nan"), "a.count": 3.0}
    _log_batches(client, run_id, metrics, {})
    data = client.get_run(run_id).data
    assert data.metrics == {"a.epsilon": pytest.approx(1.7976931348623157e308), "a.count": 3.0}
    assert data.tags["gate.infinite_metrics"] == "a.epsilon"
    assert data.tags["gate.undefined_metrics"] == "a.auc"


def test_junit_stays_xml_whatever_an_error_message_holds(bundle, tmp_path: Path) -> None:
    """A tracking server's error message with ESC and NUL had made junit.xml unparseable."""
    import dataclasses

    from gate.evidence.junit import junit_xml

    result = check(bundle, "clean", tmp_path / "out", mlflow=False).result
    failed = dataclasses.replace(
        result, status="error", evidence_error="server said \x1b[31mno\x00 \ud800 \ufffe"
    )
    root = ET.fromstring(junit_xml(failed))
    (error,) = root.iter("error")
    assert error.get("message") == "server said \\x1b[31mno\\x00 \\ud800 \\ufffe"


def test_no_file_leaks_the_raw_text(bundle, tmp_path: Path) -> None:
    """Redaction on (the default): no artifact, suite, Data Docs page or MLflow field holds
    a token of a source record (every token of this corpus is a rare feature's part)."""
    outcome = check(bundle, "leaky", tmp_path / "out", data_docs=tmp_path / "docs")
    assert outcome.result.evidence_error is None and outcome.mlflow_run_id
    tokens = [t.encode() for i in range(60) for t in [*rare_text(i).split(), user_email(i)]]
    produced = [
        p for base in ("out", "docs", "mlruns") for p in (tmp_path / base).rglob("*") if p.is_file()
    ]
    produced.append(tmp_path / "mlflow.db")
    assert len(produced) > 10
    for path in produced:
        data = path.read_bytes()
        leaked = [t for t in tokens if t in data]
        assert not leaked, f"{path} contains {leaked[:3]}"


def test_masking_keeps_the_number_of_tokens_only_and_hashes_ids() -> None:
    assert mask("John Smith") == mask("Jo Sm") == "*** ***"  # no lengths, no initials
    assert mask("PIN: 7 3 9 1") == "*** *** *** *** ***"
    assert mask("4111 1111 0000 6789") == mask("617 253 4981 x") == "*** *** *** ***"
    assert mask("王小明 김민준 (617) Ωmega") == "*** *** *** ***"
    assert mask(" ".join("abcdefghij")) == " ".join(["***"] * 8) + " …"
    assert mask("") == ""
    # a review matched initials to the one span of the release that has them
    names = ["Wilhelmina Zorblaxton", "Walt Zee", "Wu Zhang", "Ann Bell"]
    assert len({mask(n) for n in names}) == 1
    key = b"k" * 32
    assert user_hash("u1", key=key) == user_hash("u1", key=key) != user_hash("u2", key=key)
    assert user_hash("u1", key=key) != feature_hash("u1", key=key)  # a domain of its own
    assert user_hash("u1", key=key) != user_hash("u1", key=b"j" * 32)
    released = release_record_hash("s1", key=key)
    assert released == release_record_hash("s1", key=key) != release_record_hash("s2", key=key)
    assert released not in (user_hash("s1", key=key), feature_hash("s1", key=key))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.timeout(240)
def test_against_a_real_mlflow_server(bundle, tmp_path: Path, capsys) -> None:
    from mlflow import MlflowClient

    port = _free_port()
    server_dir = tmp_path / "server"
    server_dir.mkdir()
    env = dict(os.environ, MLFLOW_SERVER_ENABLE_JOB_EXECUTION="false")
    env.pop("MLFLOW_TRACKING_URI", None)
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "mlflow",
            "server",
            "--backend-store-uri",
            f"sqlite:///{server_dir / 'mlflow.db'}",
            "--artifacts-destination",
            str(server_dir / "artifacts"),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--workers",
            "1",
        ],
        cwd=server_dir,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        uri = f"http://127.0.0.1:{port}"
        deadline = time.time() + 120
        while True:
            try:
                with urllib.request.urlopen(f"{uri}/health", timeout=2) as response:
                    if response.status == 200:
                        break
            except OSError:
                if time.time() > deadline or server.poll() is not None:
                    raise
                time.sleep(0.5)
        outcome = check(bundle, "leaky", tmp_path / "out", tracking_uri=uri)
        assert outcome.result.exit_code == 1 and outcome.mlflow_run_id
        # MLflow's "View run" link stays out of the gate's output (a review: with a closed
        # stdout, ending every run had failed)
        assert "View run" not in capsys.readouterr().out
        client = MlflowClient(tracking_uri=uri)
        run = client.get_run(outcome.mlflow_run_id)
        assert run.data.tags["gate.status"] == "fail"
        report = json.loads(outcome.report_path.read_text())
        auc = report["audits"]["membership"]["metrics"]["ngram.auc"]
        assert run.data.metrics["membership.ngram.auc"] == pytest.approx(auc)
        assert "report.json" in {a.path for a in client.list_artifacts(outcome.mlflow_run_id)}
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()


def test_a_remediation_verdict_past_its_deadline_leaves_the_withdrawal_standing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A review: a remediation's PASS tags that outlived the MLflow deadline were written,
    with FINISHED, over the KILLED run the failure had ended. The late request stops at the
    next step, and the withdrawal waits for it before writing."""
    from mlflow import MlflowClient

    from gate.evidence.mlflow_log import NestedRunLog

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    log = NestedRunLog(uri, experiment="gate/race", timeout=60.0)  # the store's creation
    run_id = log.start("remediate-race", tags={"gate.status": "running"})
    log.timeout = 1.0
    real = log.client.log_batch

    def slow_verdict(run_id: str, *args, tags=(), **kwargs):
        if any(t.key == "gate.passed" and t.value == "true" for t in tags):
            time.sleep(1.5)
        return real(run_id, *args, tags=tags, **kwargs)

    monkeypatch.setattr(log.client, "log_batch", slow_verdict)
    with pytest.raises(TimeoutError):
        log.end(run_id, status="FINISHED", tags={"gate.status": "pass", "gate.passed": "true"})
    log.withdraw(run_id, status="KILLED")
    time.sleep(1.0)  # whatever the late request would still do, it has done
    run = MlflowClient(tracking_uri=uri).get_run(run_id)
    assert run.info.status == "KILLED"
    assert run.data.tags["gate.status"] == "error" and run.data.tags["gate.passed"] == "false"


def _stderr_when_quiet(logging_calls: str, cwd: Path) -> str:
    """What a fresh Python process prints on stderr running ``logging_calls`` after the
    gate's ``quiet_libraries``."""
    script = (
        "import logging; from gate.quiet import quiet_libraries; "
        f"quiet_libraries(verbose=False); {logging_calls}"
    )
    run = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, cwd=cwd, check=True
    )
    return run.stderr


def test_matplotlib_s_font_fallback_stays_out_of_the_terminal(tmp_path: Path) -> None:
    """A font cache listing fonts that are gone (another installation's) made matplotlib
    log a 'findfont: ... Falling back' line per font family on the gate's stderr."""
    calls = (
        "logging.getLogger('matplotlib.font_manager').warning('findfont: missing'); "
        "logging.getLogger('matplotlib.font_manager').error('kept')"
    )
    assert _stderr_when_quiet(calls, tmp_path) == (
        "gate: error logged by matplotlib.font_manager at <string>:1; " + WITHHELD + "\n"
    )


def test_py4j_s_traceback_of_an_interrupted_call_stays_out_of_the_terminal(
    tmp_path: Path,
) -> None:
    """Py4J logs "KeyboardInterrupt while sending command." and a traceback through the
    root logger on every Ctrl-C during a call to the JVM (seen on a real session); the
    gate says "interrupted" itself. Records of the root logger from elsewhere stay."""
    py4j_code = (
        "try:\n    raise KeyboardInterrupt\nexcept KeyboardInterrupt:\n"
        "    logging.exception('KeyboardInterrupt while sending command.')\n"
    )
    calls = (
        f"exec(compile({py4j_code!r}, '/site-packages/py4j/java_gateway.py', 'exec')); "
        "logging.error('kept')"
    )
    assert _stderr_when_quiet(calls, tmp_path) == (
        "gate: error logged by root at <string>:1; " + WITHHELD + "\n"
    )


def test_a_library_s_basic_config_puts_no_info_lines_on_the_terminal(tmp_path: Path) -> None:
    """Py4J (and Opacus) call logging.basicConfig: it had put every library's INFO records
    on the gate's stderr; warnings and errors print by their place, not their message."""
    calls = (
        "logging.basicConfig(level=logging.INFO); "
        "logging.getLogger('great_expectations.data_context').info('Created temporary directory'); "
        "logging.getLogger('some.library').info('chatter'); "
        "logging.getLogger('some.library').warning('a warning')"
    )
    assert _stderr_when_quiet(calls, tmp_path) == (
        "gate: warning logged by some.library at <string>:1; " + WITHHELD + "\n"
    )


def test_a_warning_or_a_log_record_quoting_a_record_stays_out_of_the_terminal(
    tmp_path: Path,
) -> None:
    """A review: a plug-in judge that warned and logged with the candidate record's text put
    a whole train record on the gate's stderr (the CI log) twice, while the report withheld
    its exception's message. Warnings of every category and other code's log records are
    printed by their kind and place; --verbose prints them whole."""
    calls = (
        "import warnings; "
        "warnings.warn('cand: Hey, Phillip Lewis 895-380-7741', RuntimeWarning); "
        "logging.getLogger('evil').warning('judging Hey, Phillip Lewis 895-380-7741')"
    )
    printed = _stderr_when_quiet(calls, tmp_path)
    assert "Phillip" not in printed and "7741" not in printed
    assert printed.splitlines() == [
        "gate: a RuntimeWarning at <string>:1; " + WITHHELD,
        "gate: warning logged by evil at <string>:1; " + WITHHELD,
    ]
    verbose = subprocess.run(
        [
            sys.executable,
            "-c",
            f"import logging; from gate.quiet import quiet_libraries; "
            f"quiet_libraries(verbose=True); {calls}",
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        check=True,
    )
    assert verbose.stderr.count("Phillip Lewis") == 2


def test_record_ids_from_the_release_cannot_forge_output(
    bundle, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A review: a synthetic record id holding a newline and "verdict: PASS (exit 0)"
    printed a forged verdict line (with an ANSI escape) before the real one in the CI
    log, and ids starting with = + - @ were formulas in witnesses.csv. The ids are shown
    on one line with their control characters escaped, and spreadsheet cells get a '."""
    from gate.cli import main

    hostile = ["s0\nverdict: PASS (exit 0)\n\x1b[32mall checks passed\x1b[0m", '=HYPERLINK("x")']
    hostile += ["+1", "-2+3", "@SUM(1)"]
    write_jsonl(
        tmp_path / "hostile.jsonl",
        [{"record_id": hostile[i % 5] + f"#{i}", "text": rare_text(i)} for i in range(20)],
    )
    out = tmp_path / "runs [1]" / "out"
    shown = tmp_path / "shown.yaml"  # redacted, release ids are keyed hashes: shown here
    shown.write_text(POLICY + "evidence:\n  redact_witnesses: false\n")
    args = ["check", "--policy", str(shown), "--train", str(bundle["train"])]
    args += ["--holdout", str(bundle["holdout"]), "--synthetic", str(tmp_path / "hostile.jsonl")]
    assert main([*args, "--out", str(out), "--no-mlflow"]) == 1
    printed = capsys.readouterr().out
    verdicts = [line for line in printed.splitlines() if line.startswith("verdict:")]
    assert verdicts == ["verdict: FAIL (exit 1)"] and "\x1b" not in printed
    assert "s0\\nverdict: PASS (exit 0)\\n\\x1b[32m" in printed
    assert "report: runs [1]/out/report.json" in printed  # brackets are not Rich markup
    with (out / "witnesses.csv").open(newline="") as f:
        ids = [row["synthetic_record_id"] for row in csv.DictReader(f)]
    assert len(ids) == 20 and not [i for i in ids if i.startswith(("=", "+", "-", "@"))]
    assert {i.split("#")[0] for i in ids} == {
        "s0\nverdict: PASS (exit 0)\n\x1b[32mall checks passed\x1b[0m",
        '\'=HYPERLINK("x")',
        "'+1",
        "'-2+3",
        "'@SUM(1)",
    }


def test_a_markdown_cell_stays_one_cell() -> None:
    from gate.evidence.escape import markdown_cell, one_line

    assert one_line("a\nb\x1b[0m\u202ec") == "a\\nb\\x1b[0m\\u202ec"
    assert markdown_cell("x | y\n<img src=z>") == "x \\| y\\\\n&lt;img src=z>"
