"""The fault and bad-input suite: no fault, odd input or interruption makes the gate say
PASS, leave a PASS behind, answer with a misleading exit code, or leak the text it
protects. Each case was a defect found by trying the gate as a new user and as an
adversary would (see the README, "Faults and bad input")."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
import unicodedata
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

from gate.api import run_gate
from gate.cli import main
from gate.data.bundle import load_bundle
from gate.policy import parse_policy
from gate.policy.models import MembershipPolicy

from .conftest import (
    MINIMAL_POLICY,
    REPO,
    check_args,
    read_report,
    unique_text,
    write_jsonl,
    write_policy,
)

GATE = [sys.executable, "-m", "gate"]
SECRET = "Zebulon Quarrington"  # a private name that must never reach a message


def gate(*args: str, cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    env.pop("MLFLOW_TRACKING_URI", None)
    return subprocess.run(
        [*GATE, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout
    )


def test_the_cli_module_runs_the_cli(tmp_path: Path) -> None:
    """``python -m gate.cli`` is the command, as ``python -m gate`` is: a review found it
    imported the module and exited 0 having checked nothing (a PASS to a CI script)."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "gate.cli", "check", "--policy", str(tmp_path / "none.yaml")],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr
    assert "gate check: error: the following arguments are required" in done.stderr


def clean_release(files: dict[str, Path], tmp_path: Path) -> dict[str, Path]:
    """The bundle of conftest with a release that copies nothing: PASS."""
    clean = write_jsonl(
        tmp_path / "clean.jsonl", [{"text": unique_text(900 + i)} for i in range(10)]
    )
    return {**files, "synthetic": clean}


def no_verdict(out: Path) -> bool:
    return not any((out / name).exists() for name in ("report.json", "summary.md", "junit.xml"))


def gate_parent_run(store: str) -> Any:
    """The gate's own MLflow run (not an audit's nested run) in the store ``store``."""
    import mlflow

    client = mlflow.MlflowClient(tracking_uri=store)
    runs = client.search_runs([e.experiment_id for e in client.search_experiments()])
    return next(r for r in runs if "gate.audit" not in r.data.tags)


# ---------------------------------------------------------------- false or stale PASS


def accented(i: int) -> str:
    return " ".join(f"café{i}x{j} résumé{i}y{j} Zoë{i}z{j}" for j in range(4))


def assert_copies_fail(tmp_path: Path, transform, policy: str) -> None:
    """20 train and 20 holdout users of accented text; a release of every train record
    through ``transform`` FAILs under ``policy`` with n-gram disclosures on train only."""
    train = write_jsonl(
        tmp_path / "t.jsonl", [{"user_id": f"t{i}", "text": accented(i)} for i in range(20)]
    )
    holdout = write_jsonl(
        tmp_path / "h.jsonl", [{"user_id": f"h{i}", "text": accented(100 + i)} for i in range(20)]
    )
    release = write_jsonl(
        tmp_path / "s.jsonl", [{"text": transform(accented(i))} for i in range(20)]
    )
    files = {"train": train, "holdout": holdout, "synthetic": release}
    files["policy"] = write_policy(tmp_path / "p.yaml", policy)
    assert main([*check_args(files, tmp_path / "out"), "--no-mlflow"]) == 1
    metrics = read_report(tmp_path / "out")["audits"]["disclosure"]["metrics"]
    assert metrics["ngram.epsilon_lower_exact"] > 0.5 and metrics["ngram.holdout_disclosures"] == 0


@pytest.mark.parametrize(
    "transform",
    [
        lambda t: unicodedata.normalize("NFD", t),
        lambda t: t.replace(" ", "\u200b "),  # zero-width spaces before every space
        lambda t: unicodedata.normalize("NFKD", t).replace("x", "\uff58"),  # full-width x
        lambda t: t.translate(str.maketrans("aeoxyZ", "аеохуΖ")),  # Cyrillic and Greek
        lambda t: t.translate({48 + d: 0x660 + d for d in range(10)}),  # Arabic-Indic digits
        lambda t: " ".join(f"{w[0]}\x01{w[1:]}" for w in t.split()),  # a control character
        lambda t: t.replace(" ", "\u3164"),  # Hangul fillers for spaces (drawn as blanks)
        lambda t: "\u202e" + t[::-1] + "\u202c",  # written backwards, displayed forwards
        # words in reverse order between right-to-left marks, displayed in order
        lambda t: "\u200f" + "\u200f \u200f".join(w + "\u200e" for w in t.split()[::-1]),
    ],
    ids=[
        "NFD",
        "zero-width",
        "full-width",
        "lookalike-letters",
        "other-script-digits",
        "control-in-words",
        "hangul-filler-spaces",
        "right-to-left-override",
        "right-to-left-marks",
    ],
)
def test_unicode_variants_of_train_records_fail_like_the_records(tmp_path: Path, transform) -> None:
    assert_copies_fail(tmp_path, transform, MINIMAL_POLICY)
    effective = read_report(tmp_path / "out")["policy"]["effective"]["text"]
    assert effective["normalization"] == "NFKC" and effective["strip_invisible"] is True
    assert effective["fold_confusables"] is True and effective["display_order"] is True


def sans_serif(text: str) -> str:
    """Latin letters as mathematical sans-serif ones (U+1D5A0...), digits full-width."""
    table = {65 + i: 0x1D5A0 + i for i in range(26)} | {97 + i: 0x1D5BA + i for i in range(26)}
    return text.translate(table | {48 + d: 0xFF10 + d for d in range(10)})


@pytest.mark.parametrize("form", ["NFC", "none"])
def test_compatibility_lookalikes_of_train_records_fail_without_nfkc(
    tmp_path: Path, form: str
) -> None:
    """Text kept in NFC (or as written): letters whose compatibility form is ASCII are
    read as it, as NFKC would (they had passed at ε̂ 0 under NFC)."""
    assert_copies_fail(tmp_path, sans_serif, MINIMAL_POLICY + f"text:\n  normalization: {form}\n")


@pytest.mark.parametrize("value", [".inf", ".nan", "-.inf"])
@pytest.mark.parametrize("key", ["max_epsilon", "max_excess_disclosures"])
def test_non_finite_thresholds_are_refused(
    tmp_path: Path, key: str, value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    policy = write_policy(
        tmp_path / "p.yaml",
        "version: 1\nname: t\naudits:\n  disclosure:\n    features: [{class: ngram}]\n"
        f"    thresholds: {{{key}: {value}}}\n",
    )
    assert main(["policy", "validate", str(policy)]) == 2
    assert (
        f"p.yaml:6: audits.disclosure.thresholds.{key}: Input should be" in capsys.readouterr().err
    )


@pytest.mark.parametrize("fault", ["garbage file", "cache_dir is a file"])
def test_an_unusable_pii_detection_cache_is_an_audit_error_naming_it(
    bundle_files: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str], fault: str
) -> None:
    from gate.features.pii_cache import detector_key
    from gate.features.sqlite_cache import cache_file
    from gate.policy.models import DEFAULT_PII_ENTITIES, NLP_ONLY_ENTITIES

    caches = tmp_path / "caches"
    if fault == "cache_dir is a file":
        caches.write_text("not a directory")
        named = caches / "pii-"
    else:
        caches.mkdir()
        entities = [e for e in DEFAULT_PII_ENTITIES if e not in NLP_ONLY_ENTITIES]
        key = detector_key(
            engine="patterns", spacy_model=None, entities=entities, score_threshold=0.35
        )
        named = cache_file(caches, f"pii-{key}")
        named.write_bytes(b"SQLite format 3\x00" + b"\xff" * 4096)
    policy = MINIMAL_POLICY.replace(
        "        n_max: 4\n",
        f"        n_max: 4\n      - {{class: pii, engine: patterns, cache_dir: '{caches}'}}\n",
    )
    files = {**bundle_files, "policy": write_policy(tmp_path / "p.yaml", policy)}
    out = tmp_path / "out"
    assert main([*check_args(files, out), "--no-mlflow"]) == 3
    printed = capsys.readouterr()
    shown = printed.out + printed.err
    assert f"cache file {named}" in shown and "Traceback" not in shown
    report = read_report(out)
    assert report["status"] == "error" and report["passed"] is False
    assert f"cache file {named}" in report["audits"]["disclosure"]["error"]
    assert fault == "cache_dir is a file" or named.read_bytes().startswith(b"SQLite format 3")


def test_a_failed_run_leaves_no_earlier_pass(bundle_files: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "out"
    assert main([*check_args(clean_release(bundle_files, tmp_path), out), "--no-mlflow"]) == 0
    assert read_report(out)["passed"] is True
    bad = write_jsonl(tmp_path / "bad.jsonl", [{"text": 3}])
    assert main([*check_args({**bundle_files, "synthetic": bad}, out), "--no-mlflow"]) == 2
    assert no_verdict(out)  # bad input writes nothing, and the earlier PASS is gone
    assert main([*check_args(clean_release(bundle_files, tmp_path), out), "--no-mlflow"]) == 0
    missing = {**bundle_files, "policy": tmp_path / "no-such-policy.yaml"}
    assert main([*check_args(missing, out), "--no-mlflow"]) == 2 and no_verdict(out)
    assert main([*check_args(bundle_files, out), "--no-mlflow"]) == 1
    assert read_report(out)["passed"] is False


def leaky_big(tmp_path: Path, users: int = 4000) -> dict[str, Path]:
    """Enough users that the audits take a few seconds (time to interrupt them)."""
    rng = np.random.default_rng(0)
    train_flags = rng.random(users) < 0.5
    rows = [{"user_id": f"u{u}", "text": unique_text(u, words=60)} for u in range(users)]
    train = [r for r, f in zip(rows, train_flags, strict=True) if f]
    holdout = [r for r, f in zip(rows, train_flags, strict=True) if not f]
    return {
        "train": write_jsonl(tmp_path / "bt.jsonl", train),
        "holdout": write_jsonl(tmp_path / "bh.jsonl", holdout),
        "synthetic": write_jsonl(tmp_path / "bs.jsonl", [{"text": r["text"]} for r in train[:500]]),
        "policy": write_policy(
            tmp_path / "bp.yaml", MINIMAL_POLICY.replace("n_max: 4", "n_max: 12")
        ),
    }


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["SIGTERM", "SIGKILL"])
def test_a_killed_run_leaves_no_verdict_and_no_stale_pass(
    bundle_files: dict[str, Path], tmp_path: Path, sig: signal.Signals
) -> None:
    out = tmp_path / "out"
    assert main([*check_args(clean_release(bundle_files, tmp_path), out), "--no-mlflow"]) == 0
    files = leaky_big(tmp_path)
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    process = subprocess.Popen(
        [*GATE, *check_args(files, out)], cwd=tmp_path, env=env, stderr=subprocess.PIPE, text=True
    )
    deadline = time.monotonic() + 120
    while (out / "report.json").exists() and time.monotonic() < deadline:
        time.sleep(0.01)  # the old verdict goes when the audits start
    assert process.poll() is None, "the run ended before it could be interrupted"
    process.send_signal(sig)
    code = process.wait(timeout=120)
    assert no_verdict(out)
    if sig == signal.SIGTERM:
        assert code == 3 and "terminated" in process.stderr.read()
    # the next run cleans what the kill left beside --out (a staging directory, the
    # earlier report being deleted) and writes a complete set
    assert main([*check_args(bundle_files, out), "--no-mlflow"]) == 1
    assert read_report(out)["status"] == "fail" and not list(tmp_path.glob(".out.*.tmp"))


def test_an_interrupted_mlflow_run_is_not_finished_and_leaves_no_verdict(
    bundle_files: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A kill while the artifacts are being logged: no report.json, and the MLflow run
    is not FINISHED and is tagged as not passed (a withdrawn run always gets
    gate.passed=false, so a passing tag still in flight cannot be the last word)."""
    import mlflow

    real = mlflow.MlflowClient.log_artifact

    def killed_at_the_report(self, run_id, path, *args, **kwargs):
        if Path(path).name == "report.json":
            raise KeyboardInterrupt
        return real(self, run_id, path, *args, **kwargs)

    monkeypatch.setattr(mlflow.MlflowClient, "log_artifact", killed_at_the_report)
    out = tmp_path / "out"
    store = f"sqlite:///{tmp_path / 'm.db'}"
    assert main([*check_args(bundle_files, out), "--tracking-uri", store]) == 3
    assert no_verdict(out)
    client = mlflow.MlflowClient(tracking_uri=store)
    runs = client.search_runs([e.experiment_id for e in client.search_experiments()])
    parent = [r for r in runs if "gate.audit" not in r.data.tags]
    assert len(parent) == 1 and parent[0].info.status == "KILLED"
    assert parent[0].data.tags["gate.passed"] == "false"
    assert parent[0].data.tags["gate.status"] == "error"


def test_a_signal_whose_exception_was_dropped_withdraws_the_verdict(
    bundle_files: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A review: SIGTERM raised inside a finalizer is printed and dropped by Python, and
    the run went on to PASS (exit 0). The signal is remembered: no verdict is put in
    place, the MLflow run ends KILLED without verdict tags, and the command exits 3."""

    import gate.evidence.writer as writer
    from gate.interrupts import Terminated, terminate

    real = writer._write_files

    def dropped_in_a_finalizer(*args, **kwargs):
        written = real(*args, **kwargs)
        with contextlib.suppress(Terminated):  # as Python drops an exception of __del__
            terminate(15, None)
        return written

    monkeypatch.setattr(writer, "_write_files", dropped_in_a_finalizer)
    out = tmp_path / "out"
    store = f"sqlite:///{tmp_path / 'm.db'}"
    clean = clean_release(bundle_files, tmp_path)
    assert main([*check_args(clean, out), "--tracking-uri", store]) == 3
    assert no_verdict(out)
    parent = gate_parent_run(store)
    assert parent.info.status == "KILLED" and parent.data.tags["gate.status"] == "error"


@contextlib.contextmanager
def python_s_sigint_handler():
    """Python's own SIGINT handler, whatever the test run inherited (a run in the
    background has SIGINT ignored)."""
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, before)


def test_a_ctrl_c_an_error_replaced_where_the_gate_records_errors_withdraws_the_verdict(
    bundle_files: dict[str, Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A Ctrl-C during a plot whose cleanup failed had become "plots failed", and the run
    ended with an ERROR verdict written (exit 3): the Ctrl-C, not the plot, is what
    happened. So for one during the MLflow upload, which had been "MLflow logging
    failed"."""
    import mlflow

    import gate.evidence.plots as plots

    def replaced(*args: object, **kwargs: object) -> None:
        try:
            signal.raise_signal(signal.SIGINT)
        finally:
            raise RuntimeError("the figure could not be closed")

    clean = clean_release(bundle_files, tmp_path)
    with python_s_sigint_handler():
        monkeypatch.setattr(plots, "make_plots", replaced)
        out = tmp_path / "out"
        assert main([*check_args(clean, out), "--no-mlflow"]) == 3
        assert no_verdict(out) and not list(tmp_path.glob(".out.*.tmp"))
        assert capsys.readouterr().err == "gate: error: interrupted; no verdict was written\n"
        monkeypatch.undo()

        monkeypatch.setattr(mlflow.MlflowClient, "log_artifact", replaced)
        store = f"sqlite:///{tmp_path / 'm.db'}"
        assert main([*check_args(clean, out), "--tracking-uri", store]) == 3
        assert no_verdict(out)
        assert capsys.readouterr().err == "gate: error: interrupted; no verdict was written\n"
    parent = gate_parent_run(store)
    assert parent.info.status == "KILLED" and parent.data.tags["gate.passed"] == "false"


def test_a_ctrl_c_whose_exception_was_dropped_withdraws_the_verdict(
    bundle_files: dict[str, Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A Ctrl-C is remembered as a SIGTERM is: one whose KeyboardInterrupt Python printed
    and dropped (in a finalizer) had let the run go on to PASS."""
    import gate.evidence.writer as writer

    real = writer._write_files

    def dropped_in_a_finalizer(*args, **kwargs):
        written = real(*args, **kwargs)
        with contextlib.suppress(KeyboardInterrupt):  # as Python drops one of __del__
            signal.raise_signal(signal.SIGINT)
        return written

    monkeypatch.setattr(writer, "_write_files", dropped_in_a_finalizer)
    out = tmp_path / "out"
    with python_s_sigint_handler():
        assert main([*check_args(clean_release(bundle_files, tmp_path), out), "--no-mlflow"]) == 3
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # put back
    assert no_verdict(out)
    assert capsys.readouterr().err == "gate: error: interrupted; no verdict was written\n"


def test_a_ctrl_c_after_the_verdict_is_in_place_leaves_it_and_says_so(
    bundle_files: dict[str, Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A review: a Ctrl-C while the summary was printed (the evidence already in place)
    said "no verdict was written" beside a complete report. The verdict stays, and the
    message says where it is (exit 3: the command did not end)."""
    import gate.evidence.summary as summary

    def interrupted(*args: object, **kwargs: object) -> None:
        signal.raise_signal(signal.SIGINT)

    monkeypatch.setattr(summary, "print_summary", interrupted)
    out = tmp_path / "out"
    with python_s_sigint_handler():
        assert main([*check_args(clean_release(bundle_files, tmp_path), out), "--no-mlflow"]) == 3
    assert read_report(out)["status"] == "pass"
    assert capsys.readouterr().err == (
        f"gate: error: interrupted after the verdict was written, complete, to {out}\n"
    )


def test_a_ctrl_c_just_after_the_evidence_moved_into_place_leaves_it_whole(
    bundle_files: dict[str, Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A second review: a Ctrl-C right after the rename that puts the evidence in place
    ended its MLflow run KILLED as an error beside a complete PASS on disk, and said no
    verdict was written. The evidence and its run stay, and the message says where."""

    import gate.evidence.writer as writer

    real = writer._swap_into_place

    def interrupted_after(staging: Path, out_dir: Path) -> None:
        real(staging, out_dir)
        if out_dir.name == "out":
            signal.raise_signal(signal.SIGINT)

    monkeypatch.setattr(writer, "_swap_into_place", interrupted_after)
    out = tmp_path / "out"
    store = f"sqlite:///{tmp_path / 'm.db'}"
    clean = clean_release(bundle_files, tmp_path)
    with python_s_sigint_handler():
        assert main([*check_args(clean, out), "--tracking-uri", store]) == 3
    assert read_report(out)["status"] == "pass"
    assert capsys.readouterr().err.endswith(f"after the verdict was written, complete, to {out}\n")
    parent = gate_parent_run(store)
    assert parent.info.status == "FINISHED" and parent.data.tags["gate.passed"] == "true"


def test_a_verdict_is_recorded_for_its_own_thread_only() -> None:
    """A second review: a command in another thread put its --out into the message of the
    main thread's interrupted command."""
    from gate.interrupts import forget_earlier_run, record_verdict, verdict_in_place

    forget_earlier_run(signals=False)
    worker = threading.Thread(target=record_verdict, args=("elsewhere",))
    worker.start()
    worker.join()
    assert verdict_in_place() is None
    record_verdict("here")
    assert verdict_in_place() == "here"
    forget_earlier_run(signals=False)
    assert verdict_in_place() is None


def test_a_signal_is_forgotten_when_its_command_ends(
    bundle_files: dict[str, Path], tmp_path: Path
) -> None:
    """A review: the memory of a signal outlived its command, and a later API call in the
    same process raised KeyboardInterrupt with nothing pressed; a command run in another
    thread erased a signal the main thread's command had received."""
    from gate.api import check_release
    from gate.interrupts import forget_earlier_run, interrupt, raise_if_interrupted

    files = clean_release(bundle_files, tmp_path)
    with python_s_sigint_handler():
        with contextlib.suppress(KeyboardInterrupt):
            interrupt(signal.SIGINT, None)
        worker = threading.Thread(target=main, args=(["audits"],))
        worker.start()
        worker.join()
        with pytest.raises(KeyboardInterrupt):
            raise_if_interrupted()  # still remembered for the main thread's command
        forget_earlier_run(signals=True)

        def interrupted_write(*args, **kwargs):
            with contextlib.suppress(KeyboardInterrupt):  # dropped, as in a finalizer
                signal.raise_signal(signal.SIGINT)
            raise OSError(28, "No space left on device")

        import gate.evidence.writer as writer

        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(writer, "_write_files", interrupted_write)
            assert main([*check_args(files, tmp_path / "first"), "--no-mlflow"]) == 3
    outcome = check_release(
        policy=files["policy"],
        train=files["train"],
        holdout=files["holdout"],
        synthetic=files["synthetic"],
        out_dir=tmp_path / "second",
        mlflow=False,
    )
    assert outcome.result.status == "pass"


def test_the_gate_handles_ctrl_c_only_where_python_s_own_handler_was() -> None:
    """A SIGINT the shell ignores (a job in the background) stays ignored during a run,
    and an embedding program's handler stays its own; Python's own is replaced by the
    gate's for the run and put back after it."""
    from gate.cli import _handle_signals
    from gate.interrupts import interrupt, terminate

    def embedding_program_s(signum: int, frame: object) -> None:
        return None

    before = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
    try:
        for installed, expected in (
            (signal.default_int_handler, interrupt),
            (signal.SIG_IGN, signal.SIG_IGN),
            (embedding_program_s, embedding_program_s),
        ):
            signal.signal(signal.SIGINT, installed)
            previous = _handle_signals()
            assert signal.getsignal(signal.SIGINT) is expected
            assert signal.getsignal(signal.SIGTERM) is terminate
            assert (signal.SIGINT in previous) == (expected is interrupt)
            for signum, handler in previous.items():
                signal.signal(signum, handler)
    finally:
        signal.signal(signal.SIGINT, before[0])
        signal.signal(signal.SIGTERM, before[1])


def test_a_remembered_signal_is_raised_as_its_own_interruption() -> None:
    from gate.interrupts import (
        Terminated,
        forget_earlier_run,
        interrupt,
        raise_if_interrupted,
        terminate,
    )

    forget_earlier_run(signals=True)
    raise_if_interrupted()  # nothing received: nothing raised
    with pytest.raises(KeyboardInterrupt):
        interrupt(signal.SIGINT, None)
    with contextlib.suppress(Terminated):
        terminate(signal.SIGTERM, None)
    with pytest.raises(KeyboardInterrupt):  # the first signal is the one raised
        raise_if_interrupted()
    forget_earlier_run(signals=True)
    with contextlib.suppress(Terminated):
        terminate(signal.SIGTERM, None)
    with pytest.raises(Terminated, match="signal 15"):
        raise_if_interrupted()
    forget_earlier_run(signals=True)
    raise_if_interrupted()


def _cancelled_by_ctrl_c(*args: object, **kwargs: object) -> None:
    """As PySpark's Arrow collect on a Ctrl-C: its ``finally`` asks the JVM for its job's
    result, which fails."""
    try:
        raise KeyboardInterrupt
    finally:
        raise RuntimeError("job cancelled")


def test_an_error_a_cleanup_raised_during_a_ctrl_c_is_the_ctrl_c(
    bundle_files: dict[str, Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Seen on a real Spark session: a Ctrl-C during a query came back as a Py4JJavaError,
    the audit reported it, and a verdict (ERROR) was written. The error that replaced
    the interruption is the interruption: no verdict, exit 3, "interrupted"."""
    from gate.engines.local import LocalEngine

    monkeypatch.setattr(LocalEngine, "ngram_disclosures", _cancelled_by_ctrl_c)
    out = tmp_path / "out"
    assert main([*check_args(clean_release(bundle_files, tmp_path), out), "--no-mlflow"]) == 3
    assert no_verdict(out)
    assert capsys.readouterr().err == "gate: error: interrupted; no verdict was written\n"
    bundle = load_bundle(
        membership=MembershipPolicy(),
        train=bundle_files["train"],
        holdout=bundle_files["holdout"],
        synthetic=bundle_files["synthetic"],
    )
    with pytest.raises(KeyboardInterrupt):
        run_gate(parse_policy(MINIMAL_POLICY), bundle)


def test_the_interruption_behind_an_error_is_found_through_its_context() -> None:
    from gate.interrupts import Terminated, interruption_behind

    with pytest.raises(RuntimeError) as raised:
        _cancelled_by_ctrl_c()
    assert isinstance(interruption_behind(raised.value), KeyboardInterrupt)
    try:
        try:
            raise Terminated("terminated by signal 15")
        except Terminated:
            try:
                raise OSError("connection reset")
            except OSError as exc:
                raise ValueError("two errors later") from exc
    except ValueError as exc:
        assert isinstance(interruption_behind(exc), Terminated)
    assert interruption_behind(RuntimeError("alone")) is None
    first, second = RuntimeError("a"), RuntimeError("b")
    first.__context__, second.__context__ = second, first  # a cycle ends the search
    assert interruption_behind(first) is None


def test_an_audit_s_mlflow_run_is_never_left_running(
    bundle_files: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A review: logging an audit's nested run failed (an unwritable artifact store) and
    that run stayed RUNNING while the gate's run ended FAILED."""
    import mlflow

    def unwritable(self, run_id, dictionary, artifact_file, *args, **kwargs):
        raise OSError(30, "Read-only file system", artifact_file)

    monkeypatch.setattr(mlflow.MlflowClient, "log_dict", unwritable)
    store = f"sqlite:///{tmp_path / 'm.db'}"
    assert main([*check_args(bundle_files, tmp_path / "out"), "--tracking-uri", store]) == 3
    client = mlflow.MlflowClient(tracking_uri=store)
    runs = client.search_runs([e.experiment_id for e in client.search_experiments()])
    assert {r.info.status for r in runs} == {"FAILED"} and len(runs) == 2


def test_evidence_that_cannot_be_put_in_place_withdraws_the_mlflow_verdict(
    bundle_files: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A review: a file put in --out during a PASS run made the swap fail (exit 3, no
    verdict written) while the MLflow run stayed FINISHED with gate.passed=true."""
    import mlflow

    import gate.evidence.writer as writer

    swap = writer._swap_into_place

    def occupied(staging: Path, out_dir: Path) -> None:
        if out_dir.name == "docs":
            return swap(staging, out_dir)
        raise OSError(39, "Directory not empty", str(out_dir))

    monkeypatch.setattr(writer, "_swap_into_place", occupied)
    store = f"sqlite:///{tmp_path / 'm.db'}"
    clean = clean_release(bundle_files, tmp_path)
    docs = ["--data-docs", str(tmp_path / "docs")]
    assert main([*check_args(clean, tmp_path / "out"), "--tracking-uri", store, *docs]) == 3
    assert not (tmp_path / "docs").exists()  # the site that went in first is withdrawn
    client = mlflow.MlflowClient(tracking_uri=store)
    runs = client.search_runs([e.experiment_id for e in client.search_experiments()])
    parent = next(r for r in runs if "gate.audit" not in r.data.tags)
    assert parent.info.status == "FAILED" and parent.data.tags["gate.status"] == "error"
    assert parent.data.tags["gate.passed"] == "false"
    assert_run_files_say_error(client, parent.info.run_id, tmp_path / "downloaded")


def assert_run_files_say_error(client, run_id: str, directory: Path) -> None:
    """The run's report, JUnit, summary and HTML are the error's, not the PASS uploaded
    before the failure."""
    directory.mkdir()
    report = json.loads(
        Path(client.download_artifacts(run_id, "report.json", str(directory))).read_text()
    )
    assert report["status"] == "error" and report["passed"] is False
    junit = Path(client.download_artifacts(run_id, "junit.xml", str(directory))).read_text()
    assert '<testsuite name="gate.evidence" tests="1" failures="0" errors="1">' in junit
    summary = Path(client.download_artifacts(run_id, "summary.md", str(directory))).read_text()
    assert "PASS" not in summary.splitlines()[0] and "ERROR" in summary
    html = Path(client.download_artifacts(run_id, "report.html", str(directory))).read_text()
    assert "ERROR" in html


@pytest.mark.parametrize("broken", ["temporary directory", "error files"])
def test_a_verdict_is_withdrawn_even_when_the_errors_files_cannot_be_written(
    bundle_files: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, broken: str
) -> None:
    """A review of the withdrawal: with no room for the error's files (a full /tmp, or
    the disk MLflow's local store shares), the run had stayed FINISHED with gate.passed
    true, or RUNNING with it. The status and tags withdraw it all the same."""
    import mlflow

    import gate.evidence.writer as writer

    if broken == "temporary directory":

        def occupied(staging: Path, out_dir: Path) -> None:
            raise OSError(39, "Directory not empty", str(out_dir))

        def no_room(*args, **kwargs):
            raise OSError(28, "No space left on device", "/tmp")

        monkeypatch.setattr(writer, "_swap_into_place", occupied)
        monkeypatch.setattr(writer.tempfile, "TemporaryDirectory", no_room)
    else:
        real_terminated = mlflow.MlflowClient.set_terminated
        real_files = writer._write_files
        calls = []

        def finished_fails(self, run_id, status=None, *args, **kwargs):
            if status == "FINISHED":
                raise OSError("the store went away")
            return real_terminated(self, run_id, status, *args, **kwargs)

        def second_write_fails(*args, **kwargs):
            calls.append(1)
            if len(calls) > 1:
                raise OSError(28, "No space left on device")
            return real_files(*args, **kwargs)

        monkeypatch.setattr(mlflow.MlflowClient, "set_terminated", finished_fails)
        monkeypatch.setattr(writer, "_write_files", second_write_fails)
    store = f"sqlite:///{tmp_path / 'm.db'}"
    clean = clean_release(bundle_files, tmp_path)
    assert main([*check_args(clean, tmp_path / "out"), "--tracking-uri", store]) == 3
    parent = gate_parent_run(store)
    assert parent.info.status == "FAILED" and parent.data.tags["gate.status"] == "error"
    assert parent.data.tags.get("gate.passed", "false") == "false"


def test_files_uploaded_before_an_artifact_failure_are_replaced_by_the_errors(
    bundle_files: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A review: the plots failed to upload (a full artifact store) after summary.md and
    junit.xml of a PASS had gone up; the run was FAILED with gate.status=error, but its
    files said PASS."""
    import mlflow

    real = mlflow.MlflowClient.log_artifact

    def full_at_the_plots(self, run_id, path, artifact_path=None, *args, **kwargs):
        if artifact_path == "plots":
            raise OSError(28, "No space left on device")
        return real(self, run_id, path, artifact_path, *args, **kwargs)

    monkeypatch.setattr(mlflow.MlflowClient, "log_artifact", full_at_the_plots)
    store = f"sqlite:///{tmp_path / 'm.db'}"
    clean = clean_release(bundle_files, tmp_path)
    assert main([*check_args(clean, tmp_path / "out"), "--tracking-uri", store]) == 3
    assert read_report(tmp_path / "out")["status"] == "error"
    client = mlflow.MlflowClient(tracking_uri=store)
    runs = client.search_runs([e.experiment_id for e in client.search_experiments()])
    parent = next(r for r in runs if "gate.audit" not in r.data.tags)
    assert parent.info.status == "FAILED" and parent.data.tags["gate.status"] == "error"
    assert_run_files_say_error(client, parent.info.run_id, tmp_path / "downloaded")


def test_artifact_logging_failure_is_an_error_without_a_pass_tag(
    bundle_files: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import mlflow

    def broken(*args, **kwargs):
        raise OSError("artifact store unavailable")

    monkeypatch.setattr(mlflow.MlflowClient, "log_artifact", broken)
    out = tmp_path / "out"
    store = f"sqlite:///{tmp_path / 'm.db'}"
    files = clean_release(bundle_files, tmp_path)
    assert main([*check_args(files, out), "--tracking-uri", store]) == 3
    assert (
        read_report(out)["status"] == "error"
        and "artifact store unavailable" in read_report(out)["evidence_error"]
    )
    parent = gate_parent_run(store)
    assert parent.info.status == "FAILED" and parent.data.tags["gate.passed"] == "false"
    assert parent.data.tags["gate.status"] == "error"


@pytest.mark.parametrize("side", ["train", "holdout", "synthetic"])
def test_a_side_with_only_white_space_is_bad_input(
    bundle_files: dict[str, Path], tmp_path: Path, side: str, capsys: pytest.CaptureFixture[str]
) -> None:
    blank = write_jsonl(
        tmp_path / "blank.jsonl", [{"user_id": f"b{i}", "text": " \n\t"} for i in range(20)]
    )
    assert main([*check_args({**bundle_files, side: blank}, tmp_path / "out"), "--no-mlflow"]) == 2
    assert f"all 20 {side} records are empty or white space" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("status", ["pass", "fail"])
def test_a_plot_failure_never_hides_a_fail_and_never_passes(
    bundle_files: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, status: str
) -> None:
    def broken(*args, **kwargs):
        raise RuntimeError("no fonts")

    monkeypatch.setattr("gate.evidence.plots.make_plots", broken)
    files = clean_release(bundle_files, tmp_path) if status == "pass" else bundle_files
    docs = tmp_path / "docs"
    code = main([*check_args(files, tmp_path / "out"), "--no-mlflow", "--data-docs", str(docs)])
    data = read_report(tmp_path / "out")
    if status == "fail":
        assert code == 1 and data["status"] == "fail"
        assert "plots failed: RuntimeError: no fonts" in data["evidence"]["warnings"][0]
        assert data["evidence"]["data_docs"] == str(docs / "index.html")
        assert (docs / "index.html").exists()
    else:
        assert code == 3 and data["status"] == "error" and "no fonts" in data["evidence_error"]
        # the suite succeeded, the run did not: a site saying success is withheld
        assert data["evidence"]["gx_success"] is True and data["evidence"]["data_docs"] is None
        assert not docs.exists() and not list(tmp_path.glob(".docs.*.tmp"))


# ---------------------------------------------------------------- no private text in errors


def private_inputs(tmp_path: Path) -> list[Path]:
    """Files whose text column is bad in ways that used to echo the record."""
    record = f"Hey, {SECRET} writing about order A5168314 and my card"
    paths = []
    for name, value in (("bytes", record.encode()), ("list", [record, record])):
        path = tmp_path / f"{name}.parquet"
        pd.DataFrame({"text": [value], "user_id": ["u1"]}).to_parquet(path)
        paths.append(path)
    paths.append(write_jsonl(tmp_path / "number.jsonl", [{"text": record}, {"text": 12}]))
    path = tmp_path / "broken.jsonl"
    path.write_text(json.dumps({"text": record}) + "\n" + '{"text": "' + record + "\n")
    paths.append(path)
    path = tmp_path / "dup.jsonl"
    path.write_text(
        "".join(json.dumps({"record_id": "r1", "text": record}) + "\n" for _ in range(2))
    )
    paths.append(path)
    return paths


def test_no_error_message_holds_the_inputs_text(
    bundle_files: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for bad in private_inputs(tmp_path):
        for role in ("train", "synthetic"):
            code = main([*check_args({**bundle_files, role: bad}, tmp_path / "out"), "--no-mlflow"])
            err = capsys.readouterr().err
            assert code == 2, (bad.name, role, err)
            assert bad.name in err and SECRET not in err and "A5168314" not in err, err


# ---------------------------------------------------------------- exit codes and hangs


def test_exit_codes_of_odd_arguments(
    bundle_files: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    with pytest.raises(SystemExit) as info:
        main([*check_args(bundle_files, out), "--seed", "-1"])
    assert info.value.code == 2
    assert "--seed: must be an integer >= 0; found -1" in capsys.readouterr().err
    for command in (["check"], ["remediate"], ["split", "--source", "s.jsonl"]):
        with pytest.raises(SystemExit) as info:  # an unset variable: the working directory
            main([*command, "--policy", "p.yaml", "--out", " "])
        assert info.value.code == 2
        assert "--out: must name a directory; found ' '" in capsys.readouterr().err
    for option in ("--train", "--holdout"):  # had said only that --manifest is required
        with pytest.raises(SystemExit) as info:
            main(["remediate", "--policy", "p.yaml", option, str(bundle_files["train"])])
        assert info.value.code == 2
        assert f"{option} is `gate check`'s" in capsys.readouterr().err
    a_file = tmp_path / "a-file"
    a_file.write_text("x")
    cases = {
        "--out names a file": [*check_args(bundle_files, a_file)],
        "--out is not a report directory": [*check_args(bundle_files, REPO / "gate")],
        "--out /": [*check_args(bundle_files, Path("/"))],
        "--manifest names a directory": [
            "check",
            "--policy",
            str(bundle_files["policy"]),
            "--manifest",
            str(tmp_path),
            "--synthetic",
            str(bundle_files["synthetic"]),
        ],
        "--train without --holdout": [
            "check",
            "--policy",
            str(bundle_files["policy"]),
            "--train",
            str(bundle_files["train"]),
            "--synthetic",
            str(bundle_files["synthetic"]),
        ],
    }
    for what, args in cases.items():
        started = time.perf_counter()
        assert main([*args, "--no-mlflow"]) == 2, what
        err = capsys.readouterr().err
        assert err.startswith("gate: error: ") and err.count("\n") == 1, (what, err)
        assert time.perf_counter() - started < 30, what
    assert "--holdout" in main_error(capsys, cases["--train without --holdout"])
    assert "a-file: exists and is not a directory" in main_error(
        capsys, cases["--out names a file"]
    )


def main_error(capsys: pytest.CaptureFixture[str], args: list[str]) -> str:
    main([*args, "--no-mlflow"])
    return capsys.readouterr().err


def test_deeply_nested_inputs_are_bad_input(
    bundle_files: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    deep_json = tmp_path / "deep.jsonl"
    deep_json.write_text("[" * 100_000 + "]" * 100_000 + "\n")
    assert (
        main([*check_args({**bundle_files, "synthetic": deep_json}, tmp_path / "o"), "--no-mlflow"])
        == 2
    )
    assert "deep.jsonl: line 1: JSON nested too deeply" in capsys.readouterr().err
    deep_yaml = tmp_path / "deep.yaml"
    deep_yaml.write_text("a: " + "[" * 50_000 + "]" * 50_000 + "\n")
    assert main(["policy", "validate", str(deep_yaml)]) == 2
    assert "deep.yaml: YAML nested too deeply" in capsys.readouterr().err


def test_a_fifo_is_refused_without_hanging(bundle_files: dict[str, Path], tmp_path: Path) -> None:
    fifo = tmp_path / "pipe.jsonl"
    os.mkfifo(fifo)
    run = gate(
        *check_args({**bundle_files, "synthetic": fifo}, tmp_path / "o"),
        "--no-mlflow",
        cwd=tmp_path,
        timeout=120,
    )
    assert run.returncode == 2 and "pipe.jsonl: not a regular file" in run.stderr


def split(source: str | Path, out: str | Path, *, seed: int, by: str = "user_id") -> int:
    """``gate split`` with p = 1/2."""
    return main(
        [
            "split",
            "--source",
            str(source),
            "--p",
            "0.5",
            "--seed",
            str(seed),
            "--by",
            by,
            "--out",
            str(out),
        ]
    )


def check_manifest(policy: Path, split_dir: Path, release: Path, out: Path) -> int:
    manifest = split_dir / "split-manifest.json"
    return main(
        [
            "check",
            "--quiet",
            "--no-mlflow",
            "--policy",
            str(policy),
            "--manifest",
            str(manifest),
            "--synthetic",
            str(release),
            "--out",
            str(out),
        ]
    )


def test_unicode_line_separators_inside_json_strings(tmp_path: Path) -> None:
    """U+2028 is valid inside a JSON string; `gate split` writes it raw, as the source
    does, and `gate check` reads it back (JSON Lines splits on \\n only)."""
    rows = [
        {"user_id": f"u{i}", "text": f"line one\u2028line two {unique_text(i)}"} for i in range(40)
    ]
    source = tmp_path / "all.jsonl"
    source.write_text(
        "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8"
    )
    assert split(source, tmp_path / "s", seed=3) == 0
    assert "\u2028" in (tmp_path / "s" / "train.jsonl").read_text(encoding="utf-8")
    release = write_jsonl(tmp_path / "r.jsonl", [{"text": "nothing copied here at all"}])
    policy = write_policy(tmp_path / "p.yaml")
    assert check_manifest(policy, tmp_path / "s", release, tmp_path / "o") == 0


def test_a_closed_pipe_is_not_an_error(tmp_path: Path) -> None:
    run = subprocess.run(
        [
            "bash",
            "-c",
            f'{sys.executable} -m gate policy schema | head -c 10; echo " ${{PIPESTATUS[0]}}"',
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert run.stdout.strip().endswith(" 0") and "Traceback" not in run.stderr


def test_a_broken_pipe_inside_a_step_is_an_error_not_a_pass(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A plug-in's pipe or socket failing is not the reader of stdout going away: exit 3
    (it was exit 0, a PASS in CI, from gate remediate with no verdict written)."""

    def pipe_fails(*args, **kwargs):
        raise BrokenPipeError(32, "Broken pipe")

    monkeypatch.setattr("gate.api.remediate_release", pipe_fails)
    monkeypatch.setattr("gate.api.validate_policy", pipe_fails)
    policy = write_policy(tmp_path / "p.yaml")
    assert main(["policy", "validate", str(policy)]) == 3
    assert main(["remediate", "--policy", str(policy), "--manifest", str(tmp_path)]) == 3
    assert "Broken pipe" in capsys.readouterr().err


def test_an_unexpected_error_is_one_line_and_exit_3(
    bundle_files: dict[str, Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    def crash(*args, **kwargs):
        raise ZeroDivisionError("a bug quoting Jane Roe's record")

    monkeypatch.setattr("gate.api.check.run_gate", crash)
    assert main([*check_args(bundle_files, tmp_path / "out"), "--no-mlflow"]) == 3
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    # a library's message may quote records: withheld, the place it was raised named
    assert "unexpected ZeroDivisionError raised at test_faults.py:" in err and "in crash" in err
    assert "Jane Roe" not in err and "run with --verbose to see it" in err
    assert main(["--verbose", *check_args(bundle_files, tmp_path / "out"), "--no-mlflow"]) == 3
    err = capsys.readouterr().err
    assert "Traceback" in err and "unexpected ZeroDivisionError: a bug quoting Jane Roe" in err


def test_a_policy_that_asks_for_a_type_the_engine_cannot_find_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    policy = write_policy(
        tmp_path / "p.yaml",
        "version: 1\nname: t\naudits:\n  disclosure:\n    features:\n"
        "      - {class: pii, engine: patterns, entities: [PERSON, EMAIL_ADDRESS]}\n"
        "    thresholds: {max_epsilon: 1}\n",
    )
    assert main(["policy", "validate", str(policy)]) == 2
    assert "engine 'patterns' cannot find ['PERSON']" in capsys.readouterr().err
    searched = parse_policy(
        policy.read_text().replace("entities: [PERSON, EMAIL_ADDRESS]", "normalize: true")
    )
    assert "PERSON" not in searched.audits.disclosure.features[0].entities


def test_an_entity_type_no_recognizer_finds_is_refused_before_any_work(
    bundle_files: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    policy = write_policy(
        tmp_path / "p.yaml",
        "version: 1\nname: t\naudits:\n  disclosure:\n    features:\n"
        "      - {class: ngram}\n"
        "      - {class: pii, engine: patterns, entities: [EMAIL_ADDRESS, EMAIL]}\n"
        "    thresholds: {max_epsilon: 1}\n",
    )
    expected = (
        f"{policy}:7: audits.disclosure.features[1].entities: the 'patterns' PII engine "
        "cannot find entity types ['EMAIL']"
    )
    assert main(["policy", "validate", str(policy)]) == 2
    assert expected in capsys.readouterr().err
    out = tmp_path / "out"
    assert main([*check_args({**bundle_files, "policy": policy}, out), "--no-mlflow"]) == 2
    assert expected in capsys.readouterr().err and not out.exists()
    # a pii class of a disabled audit is never loaded, so never refused
    disabled = write_policy(
        tmp_path / "d.yaml",
        "version: 1\nname: t\naudits:\n  disclosure:\n    enabled: false\n    features:\n"
        "      - {class: pii, engine: spacy, spacy_model: no_such_pipeline}\n"
        "    thresholds: {max_epsilon: 1}\n"
        "  membership: {scorers: [ngram], thresholds: {max_auc: 0.9}}\n",
    )
    assert main(["policy", "validate", str(disabled)]) == 0


@pytest.mark.parametrize(
    ("name", "problem"),
    [
        ("os", "is an installed package but not a spaCy pipeline"),
        ("gate", "is an installed package but not a spaCy pipeline"),
        ("os.path", "is not a package name"),
        ("no_such_pipeline", "is not installed"),
    ],
)
def test_a_spacy_model_that_is_no_pipeline_is_bad_input(
    name: str, problem: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A review's `spacy_model: os` passed the check (an importable module), and spaCy
    went to the network to download it, then ended the process with exit 1, the code of a
    FAIL; `spacy` and `gate` were unexpected errors (exit 3)."""
    policy = write_policy(
        tmp_path / "p.yaml",
        "version: 1\nname: t\naudits:\n  disclosure:\n    features:\n"
        f"      - {{class: pii, engine: spacy, spacy_model: {name}, entities: [EMAIL_ADDRESS]}}\n"
        "    thresholds: {max_epsilon: 1}\n",
    )
    assert main(["policy", "validate", str(policy)]) == 2
    err = capsys.readouterr().err
    at = f"{policy}:6: audits.disclosure.features[0].spacy_model"  # the file's line too
    assert (
        f"{at}: spaCy pipeline {name!r} {problem}" in err or f"{at}: {name!r} {problem}" in err
    ), err


def test_a_local_workdir_that_is_no_directory_is_bad_input(
    bundle_files: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A review's `engine.workdir: /etc/hostname` passed validation and failed the audit
    (exit 3, a report written) once a corpus outgrew memory_mb."""
    a_file = tmp_path / "a-file"
    a_file.write_text("x")
    for workdir in (a_file, tmp_path / "missing"):
        policy = write_policy(
            tmp_path / "w.yaml",
            MINIMAL_POLICY.replace("version: 1\n", f"version: 1\nengine: {{workdir: {workdir}}}\n"),
        )
        expected = f"{policy}:2: engine.workdir: {workdir} is not a directory"
        assert main(["policy", "validate", str(policy)]) == 2
        assert expected in capsys.readouterr().err
        out = tmp_path / "out"
        assert main([*check_args({**bundle_files, "policy": policy}, out), "--no-mlflow"]) == 2
        assert expected in capsys.readouterr().err and not out.exists()


def test_a_typo_gets_a_suggestion(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    policy = write_policy(tmp_path / "p.yaml", MINIMAL_POLICY.replace("max_epsilon", "max_epsilom"))
    assert main(["policy", "validate", str(policy)]) == 2
    assert "did you mean 'max_epsilon'?" in capsys.readouterr().err
    # a key of another place is suggested for none (a review: "max_auc: unknown key; did
    # you mean 'max_auc'?" under the disclosure audit's thresholds)
    misplaced = write_policy(
        tmp_path / "m.yaml",
        MINIMAL_POLICY + "      max_auc: 0.6\n",
    )
    assert main(["policy", "validate", str(misplaced)]) == 2
    err = capsys.readouterr().err
    assert "thresholds.max_auc: unknown key" in err and "did you mean" not in err


# ---------------------------------------------------------------- concurrency and slow failures


def test_results_do_not_depend_on_row_order(bundle_files: dict[str, Path], tmp_path: Path) -> None:
    policy = parse_policy(
        MINIMAL_POLICY + "  membership:\n    scorers: [ngram]\n    thresholds: {max_auc: 0.9}\n"
    )
    metrics = []
    for seed in (None, 1, 2):
        files = dict(bundle_files)
        if seed is not None:
            for side in ("train", "holdout"):
                rows = [json.loads(x) for x in bundle_files[side].read_text().splitlines()]
                order = np.random.default_rng(seed).permutation(len(rows))
                files[side] = write_jsonl(
                    tmp_path / f"{side}{seed}.jsonl", [rows[i] for i in order]
                )
        bundle = load_bundle(
            membership=MembershipPolicy(),
            train=files["train"],
            holdout=files["holdout"],
            synthetic=files["synthetic"],
        )
        result = run_gate(policy, bundle)
        metrics.append(
            {k: v for o in result.audits.values() for k, v in o.result.metric_values.items()}
        )
    assert metrics[0] == metrics[1] == metrics[2]


@pytest.mark.parametrize("processes", [2, pytest.param(8, marks=pytest.mark.slow)])
def test_concurrent_checks_share_one_new_sqlite_store(
    bundle_files: dict[str, Path], tmp_path: Path, processes: int
) -> None:
    store = f"sqlite:///{tmp_path / 'shared.db'}"
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    running = [
        subprocess.Popen(
            [
                *GATE,
                *check_args(bundle_files, tmp_path / f"out{i}"),
                "--tracking-uri",
                store,
                "--mlflow-timeout",
                "300",
            ],
            cwd=tmp_path,
            env=env,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(processes)
    ]
    codes = [(p.wait(timeout=600), p.stderr.read()) for p in running]
    assert all(code == 1 for code, _ in codes), codes
    run_ids = {
        read_report(tmp_path / f"out{i}")["evidence"]["mlflow_run_id"] for i in range(processes)
    }
    assert len(run_ids) == processes


@pytest.mark.slow
def test_a_run_stopped_while_creating_the_sqlite_store_leaves_no_broken_store(
    bundle_files: dict[str, Path], tmp_path: Path
) -> None:
    """A review: SIGTERM during MLflow's schema migrations (about 3 s) of a new SQLite
    store left it half-migrated, and every later run exited 3 naming the SQL error."""
    db = tmp_path / "m.db"
    args = [*check_args(bundle_files, tmp_path / "out"), "--tracking-uri", f"sqlite:///{db}"]
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    stopped = subprocess.Popen([*GATE, *args], cwd=tmp_path, env=env, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 300
    while stopped.poll() is None and time.monotonic() < deadline:
        if any(p.stat().st_size > 0 for p in tmp_path.glob(".m.db.*.tmp")):
            break  # the migrations are writing the new store
        time.sleep(0.01)
    stopped.send_signal(signal.SIGTERM)
    assert stopped.wait(timeout=60) == 3
    assert not db.exists() and list(tmp_path.glob(".m.db.*.tmp"))  # stopped mid-creation
    assert gate(*args, cwd=tmp_path).returncode == 1
    assert read_report(tmp_path / "out")["evidence"]["mlflow_run_id"]
    assert db.exists() and not list(tmp_path.glob(".m.db.*.tmp"))


def test_a_sqlite_store_another_program_created_meanwhile_is_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A review: the gate creates a new store under a temporary name, then renamed it
    over the store a user's MLflow client (``mlflow ui``, a script) had created during
    those seconds; that client's runs were lost and its connections broke ("attempt to
    write a readonly database"). The store found in place is kept."""
    import mlflow

    from gate.evidence import mlflow_log

    db = tmp_path / "m.db"
    real_client = mlflow.MlflowClient

    def client_then_the_users(tracking_uri: str) -> Any:
        created = real_client(tracking_uri=tracking_uri)  # the gate's, temporary
        users = real_client(tracking_uri=f"sqlite:///{db}")  # meanwhile, at the store's path
        users.create_experiment("the user's")
        return created

    monkeypatch.setattr(mlflow, "MlflowClient", client_then_the_users)
    mlflow_log._create_sqlite_store(db)
    monkeypatch.undo()
    # read from the file (MLflow's cached connection would still read a replaced one)
    with contextlib.closing(sqlite3.connect(db)) as connection:
        names = [row[0] for row in connection.execute("SELECT name FROM experiments")]
    assert "the user's" in names
    assert not list(tmp_path.glob(".m.db.*.tmp"))


def test_a_sqlite_store_named_by_a_dangling_link_is_created_whole_at_its_target(
    tmp_path: Path,
) -> None:
    """A review: the store created under a temporary name could not be linked over a
    dangling symbolic link, was dropped, and MLflow then migrated the link's target in
    place (a kill meanwhile leaves a half-migrated store)."""
    from gate.evidence import mlflow_log

    target, link = tmp_path / "stores" / "m.db", tmp_path / "m.db"
    target.parent.mkdir()
    link.symlink_to(target)
    mlflow_log._create_sqlite_store(link)
    assert link.is_symlink() and target.is_file()
    with contextlib.closing(sqlite3.connect(target)) as connection:
        assert connection.execute("SELECT COUNT(*) FROM experiments").fetchone() == (1,)
    assert not list(tmp_path.glob(".m.db.*.tmp"))


def test_an_unreachable_tracking_server_fails_within_the_deadline(
    bundle_files: dict[str, Path], tmp_path: Path
) -> None:
    started = time.perf_counter()
    run = gate(
        *check_args(bundle_files, tmp_path / "out"),
        "--tracking-uri",
        "http://127.0.0.1:9/",
        "--mlflow-timeout",
        "5",
        cwd=tmp_path,
    )
    elapsed = time.perf_counter() - started
    assert run.returncode == 3 and read_report(tmp_path / "out")["passed"] is False
    assert (
        "MLflow logging to http://127.0.0.1:9/ failed"
        in read_report(tmp_path / "out")["evidence_error"]
    )
    assert elapsed < 60, elapsed
    # urllib3's "Retrying (Retry(total=6, ...)) after connection broken" lines (a review)
    assert "Retrying" not in run.stderr and "urllib3" not in run.stderr, run.stderr


def test_an_unwritable_sqlite_store_fails_fast(
    bundle_files: dict[str, Path], tmp_path: Path
) -> None:
    started = time.perf_counter()
    run = gate(
        *check_args(bundle_files, tmp_path / "out"),
        "--tracking-uri",
        "sqlite:////proc/gate-cannot-write-here/mlflow.db",
        cwd=tmp_path,
    )
    assert (
        run.returncode == 3
        and "MLflow logging to sqlite:////proc/" in read_report(tmp_path / "out")["evidence_error"]
    )
    assert time.perf_counter() - started < 60


def test_library_warnings_stay_out_of_the_terminal(
    bundle_files: dict[str, Path], tmp_path: Path
) -> None:
    run = gate(*check_args(bundle_files, tmp_path / "out"), cwd=tmp_path)
    assert run.returncode == 1
    assert "Warning" not in run.stderr and "warn(" not in run.stderr, run.stderr


# ---------------------------------------------------------------- the release workflow


def test_the_release_workflow_installs_the_extras_and_its_check_step_runs(
    bundle_files: dict[str, Path], tmp_path: Path
) -> None:
    workflow = yaml.safe_load((REPO / ".github" / "workflows" / "gate-release.yml").read_text())
    inputs = workflow[True]["workflow_call"]["inputs"]  # YAML 1.1 reads `on` as True
    # PyPI's "gate" is another project: the caller names where this one comes from
    assert inputs["gate-version"]["required"] is True and "default" not in inputs["gate-version"]
    assert "download.pytorch.org/whl/cpu" in inputs["pip-args"]["default"]
    steps = {s.get("name"): s for s in workflow["jobs"]["gate"]["steps"]}
    # no expression is spliced into a shell script: inputs arrive as environment variables
    assert all("${{" not in step.get("run", "") for step in steps.values())
    assert steps["install gate"]["env"]["GATE_SPEC"] == "${{ inputs.gate-version }}"
    values = {
        "policy": str(bundle_files["policy"]),
        "synthetic": str(bundle_files["synthetic"]),
        "manifest": "",
        "train": str(bundle_files["train"]),
        "holdout": str(bundle_files["holdout"]),
    }

    def step_env(name: str) -> dict[str, str]:
        out = {}
        for var, expression in steps[name]["env"].items():
            key = expression.removeprefix("${{ inputs.").removesuffix(" }}")
            out[var] = values[key]
        return out

    outputs = tmp_path / "github-output"
    env = {
        **os.environ,
        "GITHUB_OUTPUT": str(outputs),
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        "HF_HUB_OFFLINE": "1",
    }
    validate = subprocess.run(
        ["bash", "-c", steps["check the policy"]["run"]],
        env={**env, **step_env("check the policy")},
        cwd=tmp_path,
        timeout=300,
    )
    assert validate.returncode == 0
    subprocess.run(
        ["bash", "-e", "-c", steps["gate check"]["run"]],
        env={**env, **step_env("gate check")},
        cwd=tmp_path,
        check=True,
        timeout=300,
    )
    assert outputs.read_text().split() == ["passed=false", "exit_code=1"]
    assert read_report(tmp_path / "gate-report")["status"] == "fail"


def test_an_evidence_write_that_runs_out_of_space_names_the_path(
    bundle_files: dict[str, Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    def full(path, text):
        raise OSError(28, "No space left on device", str(path))

    monkeypatch.setattr("gate.evidence.writer.atomic_write_text", full)
    out = tmp_path / "out"
    assert main([*check_args(bundle_files, out), "--no-mlflow"]) == 3
    err = capsys.readouterr().err
    assert "No space left on device" in err and "out." in err and "no verdict was written" in err
    assert no_verdict(out)


def test_a_check_in_a_thread_is_not_required() -> None:
    """The CLI installs its SIGTERM handler only in the main thread (a library caller may
    run the gate in a worker thread)."""
    errors: list[BaseException] = []
    codes: list[int] = []

    def work() -> None:
        try:
            codes.append(main(["policy", "schema"]))
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    thread = threading.Thread(target=work)
    thread.start()
    thread.join(60)
    assert not thread.is_alive() and not errors, errors
    assert codes == [0]


# ---------------------------------------------------------------- found by the second review


@pytest.mark.parametrize(
    "hide",
    [
        lambda t: t.replace("x", "x\u2063"),  # invisible separator (Cf)
        lambda t: t.replace("x", "x\u200e"),  # left-to-right mark
        lambda t: t.replace("x", "x\U000e0020"),  # tag space
        lambda t: t.replace("x", "x\ufe0f"),  # variation selector
        lambda t: t.replace("x", "x\u17b4"),  # Khmer inherent vowel (drawn as nothing)
        lambda t: unicodedata.normalize("NFD", t).replace("\u0301", "\u200b\u0301"),
    ],
    ids=["U+2063", "U+200E", "U+E0020", "U+FE0F", "U+17B4", "ZWSP-before-accent"],
)
def test_every_invisible_character_is_stripped(tmp_path: Path, hide) -> None:
    train = write_jsonl(
        tmp_path / "t.jsonl", [{"user_id": f"t{i}", "text": accented(i)} for i in range(20)]
    )
    holdout = write_jsonl(
        tmp_path / "h.jsonl", [{"user_id": f"h{i}", "text": accented(100 + i)} for i in range(20)]
    )
    release = write_jsonl(tmp_path / "s.jsonl", [{"text": hide(accented(i))} for i in range(20)])
    files = {"train": train, "holdout": holdout, "synthetic": release}
    files["policy"] = write_policy(tmp_path / "p.yaml")
    assert main([*check_args(files, tmp_path / "out"), "--no-mlflow"]) == 1


def test_a_side_of_invisible_characters_only_is_bad_input(
    bundle_files: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    blank = write_jsonl(
        tmp_path / "inv.jsonl",
        [{"user_id": f"b{i}", "text": "\u2063\u3164 \u200b"} for i in range(20)],
    )
    assert (
        main([*check_args({**bundle_files, "train": blank}, tmp_path / "out"), "--no-mlflow"]) == 2
    )
    assert "all 20 train records are empty or white space" in capsys.readouterr().err


def test_odd_policy_files_and_text_encodings_are_bad_input(
    bundle_files: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fifo = tmp_path / "fifo.yaml"
    os.mkfifo(fifo)
    assert main(["policy", "validate", str(fifo)]) == 2
    assert "not a regular file" in capsys.readouterr().err
    surrogate = tmp_path / "s.jsonl"
    surrogate.write_text('{"text": "a\\ud800b"}\n')
    assert (
        main([*check_args({**bundle_files, "synthetic": surrogate}, tmp_path / "o"), "--no-mlflow"])
        == 2
    )
    assert "line 1: field 'text' holds an unpaired surrogate" in capsys.readouterr().err
    latin1 = tmp_path / "l.jsonl"
    latin1.write_bytes(f'{{"text": "{SECRET} M\xfcller"}}\n'.encode("latin-1"))
    assert (
        main([*check_args({**bundle_files, "synthetic": latin1}, tmp_path / "o"), "--no-mlflow"])
        == 2
    )
    err = capsys.readouterr().err
    assert "(0xfc)" in err and "ller" not in err and SECRET not in err
    # a Parquet writer can store any bytes as a string: converting them had been exit 3,
    # and with --verbose Arrow's message quoted the value; now exit 2, row and bytes named
    records = pd.read_json(bundle_files["synthetic"], lines=True, dtype=False)
    texts = [t.encode() for t in records["text"]]
    texts[4] = f"{SECRET} M".encode() + b"\xfcller"
    for column in ("text", "notes"):
        table = pa.table({**{c: records[c].astype(str) for c in records if c != "text"}})
        strings = pa.array(texts, pa.binary()).view(pa.string())
        table = table.append_column(column, strings)
        if column == "notes":
            table = table.append_column("text", pa.array(records["text"]))
        parquet = tmp_path / f"bad-{column}.parquet"
        pq.write_table(table, parquet)
        argv = check_args({**bundle_files, "synthetic": parquet}, tmp_path / "o")
        assert main(["--verbose", *argv, "--no-mlflow"]) == 2
        err = capsys.readouterr().err
        shown = "'text'" if column == "text" else "a column"
        assert f"data row 5: {shown} holds bytes that are not UTF-8 at byte" in err, err
        assert "(0xfc)" in err and "ller" not in err and SECRET not in err
    bom = tmp_path / "bom.jsonl"
    bom.write_bytes(b"\xef\xbb\xbf" + bundle_files["synthetic"].read_bytes())
    assert (
        main([*check_args({**bundle_files, "synthetic": bom}, tmp_path / "o"), "--no-mlflow"]) == 1
    )


def test_out_and_data_docs_paths_are_checked_before_the_run(
    bundle_files: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "reports"
    link = tmp_path / "link"
    link.symlink_to(target, target_is_directory=True)
    target.mkdir()
    for _ in range(2):  # the second withdraws the first's verdict, and the link stays good
        assert main([*check_args(bundle_files, link), "--no-mlflow"]) == 1
        assert read_report(target)["status"] == "fail" and link.is_symlink()
    dangling = tmp_path / "dangling"
    dangling.symlink_to(tmp_path / "nowhere")
    out = tmp_path / "out"
    cases = {
        "a link to nothing": [*check_args(bundle_files, dangling)],
        "inside --out": [*check_args(bundle_files, out), "--data-docs", str(out / "docs")],
        "empty": [*check_args(bundle_files, Path(""))],
    }
    for what, args in cases.items():
        assert main([*args, "--no-mlflow"]) == 2, what
        assert capsys.readouterr().err.count("\n") == 1, what


def test_a_run_refused_for_a_users_file_in_out_withdraws_the_earlier_verdict(
    bundle_files: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A review: a PASS in --out, a file of the user's put beside it, and the next run
    refused (exit 2) had left report.json saying PASS. The earlier verdict's files go;
    the user's file and the directories (plots) stay."""
    out = tmp_path / "out"
    passing = clean_release(bundle_files, tmp_path)
    assert main([*check_args(passing, out), "--no-mlflow"]) == 0
    (out / "notes.txt").write_text("mine")
    assert main([*check_args(passing, out), "--no-mlflow"]) == 2
    err = capsys.readouterr().err
    assert "holds files that are not this command's output (notes.txt)" in err
    assert "the earlier verdict there was removed" in err
    assert sorted(p.name for p in out.iterdir() if p.is_file()) == ["notes.txt"]
    assert main([*check_args(passing, out), "--no-mlflow"]) == 2  # nothing left to remove
    assert "the earlier verdict there was removed" not in capsys.readouterr().err
    assert (out / "notes.txt").read_text() == "mine"
    # a --data-docs refused for a user's file: --out's earlier PASS goes first (a review)
    other = tmp_path / "other"
    assert main([*check_args(passing, other), "--no-mlflow"]) == 0
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "notes.txt").write_text("mine")
    argv = [*check_args(passing, other), "--no-mlflow", "--data-docs", str(docs)]
    assert main(argv) == 2
    assert "--data-docs" in capsys.readouterr().err and not other.exists()


def test_data_docs_directory_is_checked_like_out(
    bundle_files: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A review: --data-docs was written into whatever it named (a directory of a user's
    files; a file failed only after the audits) and kept earlier runs' validations."""
    out = tmp_path / "out"
    assert main([*check_args(bundle_files, out), "--no-mlflow"]) == 1
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("mine")
    a_file = tmp_path / "docs.html"
    a_file.write_text("<p>mine</p>")
    fake = tmp_path / "fake"
    fake.mkdir()
    (fake / "index.html").write_text("<p>my own index</p>")
    cases = {
        "holds a user's files": (mine, "holds files that are not this command's output"),
        "a file": (a_file, "exists and is not a directory"),
        "a user's index.html": (fake, "not an earlier output of it"),
        "holds --out": (tmp_path, "is inside --out"),
    }
    for what, (docs, message) in cases.items():
        code = main([*check_args(bundle_files, out), "--no-mlflow", "--data-docs", str(docs)])
        err = capsys.readouterr().err
        assert code == 2 and err.count("\n") == 1 and f"--data-docs {docs}: " in err, what
        assert message in err, what
        # --out is cleared first, as for any refused input: its earlier verdict goes
        assert not out.exists(), what
    assert (mine / "notes.txt").read_text() == "mine" and a_file.read_text() == "<p>mine</p>"
    assert (fake / "index.html").read_text() == "<p>my own index</p>"
    site = tmp_path / "site"
    for _ in range(2):  # an earlier site is replaced, not added to
        assert main([*check_args(bundle_files, out), "--no-mlflow", "--data-docs", str(site)]) == 1
        assert f"data docs: {site / 'index.html'}" in capsys.readouterr().out
    assert len(list(site.rglob("validations/**/*.html"))) == 1


def test_out_holding_a_users_files_of_report_names_is_left_alone(
    bundle_files: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A directory is an earlier report by its content, not its file names: a user's own
    report.json, or a plots/ directory with other files, is never deleted."""
    mine = tmp_path / "mine"
    (mine / "plots" / "sub").mkdir(parents=True)
    (mine / "report.json").write_text('{"my": "data"}')
    (mine / "plots" / "figure.svg").write_text("<svg/>")
    assert main([*check_args(bundle_files, mine), "--no-mlflow"]) == 2
    assert "not an earlier output of it" in capsys.readouterr().err
    assert (mine / "report.json").read_text() == '{"my": "data"}'
    assert (mine / "plots" / "figure.svg").exists() and (mine / "plots" / "sub").is_dir()
    # an earlier gate report is replaced, even when a user added a file in plots/
    report = tmp_path / "report"
    assert main([*check_args(bundle_files, report), "--no-mlflow"]) == 1
    assert main([*check_args(bundle_files, report), "--no-mlflow"]) == 1
    (report / "plots" / "notes.txt").write_text("mine")
    assert main([*check_args(bundle_files, report), "--no-mlflow"]) == 2
    assert (report / "plots" / "notes.txt").exists()


def test_out_in_a_directory_not_yet_made_or_not_writable(
    bundle_files: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    nested = tmp_path / "a" / "b" / "out"
    assert main([*check_args(bundle_files, nested), "--no-mlflow"]) == 1
    assert read_report(nested)["status"] == "fail"
    assert main([*check_args(bundle_files, Path("/proc/gate-out")), "--no-mlflow"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("gate: error: --out /proc/gate-out: ") and err.count("\n") == 1, err


@pytest.mark.parametrize(("users", "code"), [(4, 3), (6, 3), (7, 1)])
def test_a_copy_of_train_never_passes_because_there_are_few_users(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], users: int, code: int
) -> None:
    """With 4 train users even a verbatim copy gives p = 0.5^4 > alpha: the check cannot
    fail, so the audit is an error, not a PASS; with max_epsilon 0.5 it takes 7 users."""
    files = {
        "train": write_jsonl(
            tmp_path / "t.jsonl",
            [{"user_id": f"u{i}", "text": unique_text(i)} for i in range(users)],
        ),
        "holdout": write_jsonl(
            tmp_path / "h.jsonl",
            [{"user_id": f"v{i}", "text": unique_text(50 + i)} for i in range(users)],
        ),
        "synthetic": write_jsonl(
            tmp_path / "s.jsonl", [{"text": unique_text(i)} for i in range(users)]
        ),
        "policy": write_policy(tmp_path / "p.yaml"),  # max_epsilon 0.5, exact
    }
    assert main([*check_args(files, tmp_path / "out"), "--no-mlflow"]) == code
    report = read_report(tmp_path / "out")
    if code == 3:
        error = report["audits"]["disclosure"]["error"]
        assert f"with {users} train users" in error and "at least 7 train users" in error
    else:
        assert report["status"] == "fail"


def test_an_audit_that_did_not_complete_fails_the_gx_suite(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A review: the suite held only the checks of audits that finished, so GX's
    validation and Data Docs said success on a run whose verdict was an error."""
    import xml.etree.ElementTree as ET

    files = {
        "train": write_jsonl(
            tmp_path / "t.jsonl", [{"user_id": f"u{i}", "text": unique_text(i)} for i in range(4)]
        ),
        "holdout": write_jsonl(
            tmp_path / "h.jsonl",
            [{"user_id": f"v{i}", "text": unique_text(50 + i)} for i in range(4)],
        ),
        "synthetic": write_jsonl(
            tmp_path / "s.jsonl", [{"text": unique_text(50 + i)} for i in range(4)]
        ),
        "policy": write_policy(tmp_path / "p.yaml"),
    }
    out, docs = tmp_path / "out", tmp_path / "docs"
    assert main([*check_args(files, out), "--no-mlflow", "--data-docs", str(docs)]) == 3
    report = read_report(out)
    (check,) = report["audits"]["disclosure"]["checks"]
    assert check["value"] is None and check["passed"] is False
    validation = json.loads((out / "gx-validation.json").read_text())
    assert validation["success"] is False and report["evidence"]["gx_success"] is False
    failed = {
        (r["expectation_config"]["type"], r["expectation_config"]["kwargs"]["column"])
        for r in validation["results"]
        if not r["success"]
    }
    assert failed == {
        ("expect_column_values_to_be_in_set", "disclosure__completed"),
        ("expect_column_values_to_not_be_null", "disclosure__ngram_epsilon_lower_exact"),
    }
    assert report["evidence"]["data_docs"] == str(docs / "index.html")  # it says failure
    page = next(docs.rglob("validations/**/*.html")).read_text()
    assert "disclosure__completed" in page
    (case,) = [
        c
        for c in ET.parse(out / "junit.xml").getroot().iter("testcase")
        if "epsilon" in c.get("name")
    ]
    assert case.find("error").get("type") == "NotMeasured"
    assert "| not measured |" in (out / "summary.md").read_text()


def test_one_out_directory_serves_one_run_at_a_time(
    bundle_files: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import fcntl

    out = tmp_path / "out"
    (tmp_path / ".out.lock").write_text("a user's file")  # not the gate's lock: kept
    with open(tmp_path / ".out.gate-lock", "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)  # as a running gate would hold it
        assert main([*check_args(bundle_files, out), "--no-mlflow"]) == 2
    assert "another gate run is writing there" in capsys.readouterr().err
    assert main([*check_args(bundle_files, out), "--no-mlflow"]) == 1
    # the run removes its lock file at its end (a review found one left by every run,
    # a refused one too, beside --out)
    assert not (tmp_path / ".out.gate-lock").exists()
    missing = {**bundle_files, "synthetic": tmp_path / "missing.jsonl"}
    assert main([*check_args(missing, tmp_path / "x"), "--no-mlflow"]) == 2
    assert not list(tmp_path.glob(".*.gate-lock"))
    assert (tmp_path / ".out.lock").read_text() == "a user's file"


def test_a_timed_out_mlflow_run_never_gets_a_verdict(
    bundle_files: dict[str, Path], tmp_path: Path
) -> None:
    """The store stays locked past the deadline; the gate gives up (exit 3). When the
    store frees up, the abandoned logging thread may still create its run, but that run
    never carries a verdict."""
    import fcntl

    import mlflow

    db = tmp_path / "m.db"
    store = f"sqlite:///{db}"
    handle = open(tmp_path / "m.db.lock", "a")  # noqa: SIM115 (released below)
    fcntl.flock(handle, fcntl.LOCK_EX)
    earlier = set(threading.enumerate())
    try:
        files = clean_release(bundle_files, tmp_path)
        code = main(
            [*check_args(files, tmp_path / "out"), "--tracking-uri", store, "--mlflow-timeout", "2"]
        )
        assert code == 3 and read_report(tmp_path / "out")["status"] == "error"
    finally:
        fcntl.flock(handle, fcntl.LOCK_UN)
        handle.close()
    # the abandoned thread finishes what it started: it creates the store (3-5 s under
    # load; a fixed 5 s wait had this test's client create it meanwhile, then lose it)
    for thread in set(threading.enumerate()) - earlier:
        if thread.name == "gate-mlflow":
            thread.join(timeout=120)
            assert not thread.is_alive()
    client = mlflow.MlflowClient(tracking_uri=store)
    runs = client.search_runs([e.experiment_id for e in client.search_experiments()])
    assert all(r.data.tags.get("gate.passed") != "true" for r in runs)
    assert read_report(tmp_path / "out")["status"] == "error"


def test_a_closed_stdout_keeps_the_verdicts_exit_code(
    bundle_files: dict[str, Path], tmp_path: Path
) -> None:
    args = " ".join(check_args(clean_release(bundle_files, tmp_path), tmp_path / "out"))
    run = subprocess.run(
        [
            "bash",
            "-c",
            f"{sys.executable} -m gate {args} --no-mlflow | true; echo ${{PIPESTATUS[0]}}",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    assert run.stdout.strip() == "0" and "Traceback" not in run.stderr


def test_split_refuses_to_overwrite_its_source_and_check_uses_its_user_column(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = [{"author": f"a{i % 40}", "text": unique_text(i)} for i in range(120)]
    source = write_jsonl(tmp_path / "train.jsonl", rows)
    assert split(source, tmp_path, seed=1) == 2
    assert "would overwrite the source" in capsys.readouterr().err
    assert split(source, tmp_path / "s", seed=1, by="author") == 0
    release = write_jsonl(tmp_path / "r.jsonl", [{"text": "nothing copied here at all"}])
    policy = write_policy(tmp_path / "p.yaml", MINIMAL_POLICY)
    assert check_manifest(policy, tmp_path / "s", release, tmp_path / "o") == 0
    inputs = read_report(tmp_path / "o")["inputs"]
    assert inputs["train"]["users"] + inputs["holdout"]["users"] == 40  # authors, not records


@pytest.mark.parametrize(
    "thresholds",
    [
        "{max_auc: 1.0}",
        "{max_auc: 0.6, tpr_at_fpr: {fpr: 0.1, max_tpr: 1}}",
        "{max_rip_eta: 0.5}",
        "{max_epsilon: true}",
    ],
)
def test_thresholds_that_can_never_fail_are_refused(tmp_path: Path, thresholds: str) -> None:
    policy = write_policy(
        tmp_path / "p.yaml",
        f"version: 1\nname: t\naudits:\n  membership:\n    thresholds: {thresholds}\n",
    )
    assert main(["policy", "validate", str(policy)]) == 2


def test_an_earlier_pass_is_withdrawn_before_the_command_imports_its_work(
    bundle_files: dict[str, Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A review: a Ctrl-C in the first second of `gate check` (its imports, before --out
    was claimed), or a mistyped option, exit 2, left an earlier PASS in --out."""
    import gate.api

    out = tmp_path / "out"
    passing = [*check_args(clean_release(bundle_files, tmp_path), out), "--no-mlflow"]
    assert main(passing) == 0 and read_report(out)["status"] == "pass"

    def interrupted_while_importing(**kwargs: object) -> None:
        raise KeyboardInterrupt

    with monkeypatch.context() as patched:
        patched.setattr(gate.api, "check_release", interrupted_while_importing)
        assert main(passing) == 3
    assert no_verdict(out) and not out.exists()  # an --out named directly is not kept empty
    assert capsys.readouterr().err == "gate: error: interrupted; no verdict was written\n"
    assert main(passing) == 0
    with pytest.raises(SystemExit) as info:
        main([*passing, "--no-mflow"])
    assert info.value.code == 2
    assert no_verdict(out)
    capsys.readouterr()


def test_an_option_given_twice_is_refused(
    bundle_files: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A review: a second --synthetic silently replaced the first, and the leaky file
    given first went unaudited (a CI wrapper that appends options)."""
    out = tmp_path / "out"
    args = [*check_args(clean_release(bundle_files, tmp_path), out), "--no-mlflow"]
    with pytest.raises(SystemExit) as info:
        main([*args, "--synthetic", str(bundle_files["synthetic"])])
    assert info.value.code == 2
    assert capsys.readouterr().err.startswith(
        "gate check: error: argument --synthetic: given twice; give it once"
    )
    with pytest.raises(SystemExit):
        main(["split", "--source", "s.jsonl", "--seed", "1", "--seed", "2", "--out", "o"])
    assert "argument --seed: given twice" in capsys.readouterr().err


def test_a_tracking_uri_that_nothing_is_logged_to_is_refused(
    bundle_files: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A review: --tracking-uri beside --no-mlflow, or a policy that disables MLflow, was
    dropped without a word (the user believed the evidence logged there)."""
    files = clean_release(bundle_files, tmp_path)
    uri = "http://127.0.0.1:9"
    assert main([*check_args(files, tmp_path / "a"), "--no-mlflow", "--tracking-uri", uri]) == 2
    assert "--no-mlflow logs nothing there" in capsys.readouterr().err
    policy = yaml.safe_load(files["policy"].read_text())
    policy["evidence"] = {"mlflow": {"enabled": False}}
    files["policy"].write_text(yaml.safe_dump(policy))
    assert main([*check_args(files, tmp_path / "b"), "--tracking-uri", uri]) == 2
    assert "disables MLflow (evidence.mlflow.enabled: false)" in capsys.readouterr().err
    assert main(check_args(files, tmp_path / "c")) == 0


def test_a_sqlite_store_that_cannot_be_one_is_refused_before_any_work(
    bundle_files: dict[str, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A review: with `--tracking-uri sqlite:///<a directory>` the audits ran, MLflow
    retried for 30 s with a page of its own warnings, and the gate said the store "did not
    answer" (exit 3). A directory, a file that is not SQLite, and a path below a file are
    refused before any work, naming where the URI came from."""
    files = clean_release(bundle_files, tmp_path)
    (tmp_path / "store-dir").mkdir()
    (tmp_path / "notes.txt").write_text("not a database\n")
    (tmp_path / "link.db").symlink_to(tmp_path / "notes.txt" / "mlflow.db")
    cases = {
        "store-dir": "is a directory",
        "notes.txt": "is not a SQLite database",
        "notes.txt?mode=ro": "is not a SQLite database",  # the query is no part of the file
        "notes.txt/mlflow.db": "notes.txt is a file, not a directory",
        "link.db": "notes.txt is a file, not a directory",  # where the link points
    }
    for name, problem in cases.items():
        uri = f"sqlite:///{tmp_path / name}"
        out = tmp_path / f"out-{abs(hash(name))}"
        assert main([*check_args(files, out), "--tracking-uri", uri]) == 2
        err = capsys.readouterr().err
        assert f"--tracking-uri {uri}: " in err and problem in err, err
        assert "WARNING mlflow" not in err and err.count("\n") == 1
        assert not out.exists()
    policy = yaml.safe_load(files["policy"].read_text())
    policy["evidence"] = {"mlflow": {"tracking_uri": f"sqlite:///{tmp_path / 'store-dir'}"}}
    files["policy"].write_text(yaml.safe_dump(policy))
    assert main(check_args(files, tmp_path / "p")) == 2
    assert "evidence.mlflow.tracking_uri: sqlite:///" in capsys.readouterr().err
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'notes.txt'}")
    assert main(check_args(files, tmp_path / "e")) == 2
    assert "MLFLOW_TRACKING_URI=sqlite:///" in capsys.readouterr().err
    assert (tmp_path / "notes.txt").read_text() == "not a database\n"


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
@pytest.mark.parametrize("threads", [1, 2])
def test_a_signal_while_the_earlier_verdict_is_withdrawn_leaves_none(
    bundle_files: dict[str, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    signum: int,
    threads: int,
) -> None:
    """A review: a Ctrl-C or SIGTERM in a run's first 0.1 s, while it removed the earlier
    verdict from --out, left that PASS in place, and the message said no verdict was
    written. The signal is now held until the earlier verdict is gone."""
    import gate.evidence.writer

    files = clean_release(bundle_files, tmp_path)
    out = tmp_path / "out"
    assert main(check_args(files, out, "--no-mlflow")) == 0
    assert read_report(out)["passed"] is True
    withdraw = gate.evidence.writer.withdraw_earlier_output

    def signalled_withdraw(out_dir: Path, **lock: Any) -> None:
        if threads == 1:
            signal.raise_signal(signum)  # as the withdrawal starts
        else:  # to the process, with another thread running (a program calling main())
            other = threading.Event()
            running = threading.Thread(target=other.wait, daemon=True)
            running.start()
            os.kill(os.getpid(), signum)
            time.sleep(0.2)  # the signal reaches a thread meanwhile
            other.set()
        withdraw(out_dir, **lock)

    monkeypatch.setattr(gate.evidence.writer, "withdraw_earlier_output", signalled_withdraw)
    # as in a terminal (a pytest-xdist worker ignores SIGINT, and the gate keeps that)
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        assert main(check_args(files, out, "--no-mlflow")) == 3
    finally:
        signal.signal(signal.SIGINT, before)
    err = capsys.readouterr().err
    assert "no verdict was written" in err and err.count("gate: error:") == 1
    assert no_verdict(out)


def test_an_empty_tracking_uri_is_refused(
    bundle_files: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A review: `--tracking-uri ""` (an unset variable) or `tracking_uri: ""` in the
    policy fell through to ./mlflow.db, and the run passed with its evidence there."""
    files = clean_release(bundle_files, tmp_path)
    for uri in ("", "  "):
        with pytest.raises(SystemExit) as refused:
            main([*check_args(files, tmp_path / "a"), "--tracking-uri", uri])
        assert refused.value.code == 2
        assert "--tracking-uri: must name a tracking store" in capsys.readouterr().err
    policy = yaml.safe_load(files["policy"].read_text())
    policy["evidence"] = {"mlflow": {"tracking_uri": ""}}
    files["policy"].write_text(yaml.safe_dump(policy))
    assert main(check_args(files, tmp_path / "b")) == 2
    assert "evidence.mlflow.tracking_uri: must name a tracking store" in capsys.readouterr().err
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()
    assert not Path("mlflow.db").exists()
    from gate.api import check_release
    from gate.errors import InputError

    del policy["evidence"]  # the policy without the blank URI; the API's argument blank
    files["policy"].write_text(yaml.safe_dump(policy))
    with pytest.raises(InputError, match="the tracking URI must name a tracking store"):
        check_release(
            policy=files["policy"],
            train=files["train"],
            holdout=files["holdout"],
            synthetic=files["synthetic"],
            out_dir=tmp_path / "c",
            tracking_uri="",
        )
    assert not (tmp_path / "c" / "report.json").exists() and not Path("mlflow.db").exists()


LATE_SIGNAL = """
import os, signal, sys, time
signal.signal(signal.SIGINT, signal.default_int_handler)  # as in a terminal, not a background job
from gate import cli
as_process = sys.argv[2] == "process"
sys.argv = ["gate", "policy", "validate", sys.argv[1]]
try:
    code = cli.main(process=as_process)
    print("exit", code, flush=True)
    os.kill(os.getpid(), signal.SIGINT)  # as the process exits, after the command ended
    time.sleep(30)
    print("not reached")
except KeyboardInterrupt:
    print("the calling program's own handling", flush=True)
"""


def test_a_signal_after_the_command_ended_is_answered_in_words(tmp_path: Path) -> None:
    """A review: a Ctrl-C just after `gate check` printed its verdict ended the process
    with 130 and no word (Python's handlers, put back, raised KeyboardInterrupt as it
    exited). Run as the process's entry point, the gate answers it and exits 3."""
    policy = Path(__file__).parents[1] / "policies" / "standard.yaml"

    def run(mode: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-c", LATE_SIGNAL, str(policy), mode],
            capture_output=True,
            text=True,
            timeout=120,
            env={**os.environ, "HF_HUB_OFFLINE": "1"},
        )

    done = run("process")
    assert done.returncode == 3, done.stderr
    assert done.stdout.splitlines()[-1] == "exit 0"
    assert done.stderr.splitlines()[-1] == "gate: error: interrupted; no verdict was written"
    # a program that calls main() gets its own handling back (a review: it had not)
    hosted = run("hosted")
    assert hosted.returncode == 0, hosted.stderr
    assert hosted.stdout.splitlines()[-2:] == ["exit 0", "the calling program's own handling"]


def test_a_usage_error_withdraws_only_what_it_may(
    bundle_files: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A review of the withdrawal after a usage error: `--ou mine` (an abbreviation the
    command took) withdrew the default ./gate-report instead, and a mistyped `gate
    remediate` deleted the earlier run's trained generators. Options are no longer
    abbreviated, only an --out named as such is withdrawn, and a remediation keeps its
    rounds (its kept release withdrawn)."""
    out = tmp_path / "mine"
    passing = [*check_args(clean_release(bundle_files, tmp_path), out), "--no-mlflow"]
    assert main(passing) == 0
    for typo in (["--ou", str(out)], ["--no-ml"]):
        with pytest.raises(SystemExit):
            main([*passing[: passing.index("--out")], *typo])
        assert read_report(out)["status"] == "pass"  # not named as --out: left alone
    capsys.readouterr()
    rounds = tmp_path / "remediation"
    kept = rounds / "round-1"
    (kept / "generator").mkdir(parents=True)
    (kept / "generator" / "weights.bin").write_bytes(b"trained at length")
    (kept / "release.jsonl").write_text('{"text": "approved"}\n')
    (kept / "round.json").write_text(json.dumps({"release": {"kept": True, "path": "x"}}))
    with pytest.raises(SystemExit) as info:
        main(["remediate", "--policy", "p.yaml", "--out", str(rounds), "--metod", "rip"])
    assert info.value.code == 2
    assert (kept / "generator" / "weights.bin").exists() and not (kept / "release.jsonl").exists()
    assert json.loads((kept / "round.json").read_text())["release"]["kept"] is False
    assert len(capsys.readouterr().err.splitlines()) == 1
    # a round record that is no JSON object, a loop of links, a new --out: exit 2, one line,
    # no traceback, nothing made (a second review)
    (rounds / "round-2").mkdir()
    (rounds / "round-2" / "round.json").write_text('{"release": {"kept": tr')
    (tmp_path / "loop").symlink_to(tmp_path / "loop")
    for args in (
        ["remediate", "--policy", "p.yaml", "--out", str(rounds), "--metod", "rip"],
        [
            "check",
            "--policy",
            "p",
            "--synthetic",
            "s",
            "--out",
            str(tmp_path / "loop" / "o"),
            "--x",
        ],
        ["check", "--policy", "p", "--synthetic", "s", "--out", str(tmp_path / "n" / "o"), "--x"],
    ):
        with pytest.raises(SystemExit) as info:
            main(args)
        assert info.value.code == 2
        assert len(capsys.readouterr().err.splitlines()) == 1
    assert not (tmp_path / "n").exists()
    loop = [*check_args(clean_release(bundle_files, tmp_path), tmp_path / "loop" / "o")]
    assert main([*loop, "--no-mlflow"]) == 2
    assert "a loop of symbolic links on the way" in capsys.readouterr().err
