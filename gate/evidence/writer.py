"""Write the evidence of a gate run: report.json, HTML, JUnit, Markdown, witnesses, the GX
validation result and plots; and log all of it to MLflow. Every file is written atomically.
A failure to record evidence turns the verdict into an error (never a pass)."""

from __future__ import annotations

import csv
import io
import json
import os
import shutil
import tempfile
import threading
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from gate.atomic import atomic_write_text
from gate.errors import GateError, InputError
from gate.evidence.html import html_report
from gate.evidence.junit import junit_xml
from gate.evidence.markdown import markdown_summary
from gate.evidence.report import REPORT_NAME, report_dict

if TYPE_CHECKING:
    from gate.results import GateResult


T = TypeVar("T")


@dataclass(frozen=True)
class MlflowSettings:
    enabled: bool
    tracking_uri: str | None = None  # from the CLI; None = environment, policy, default
    timeout: float = 30.0  # seconds the whole MLflow logging may take


@dataclass(frozen=True)
class Evidence:
    result: GateResult
    files: dict[str, Path]
    mlflow_run_id: str | None
    tracking_uri: str | None


def witnesses_csv(result: GateResult) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(
        [
            "audit",
            "class",
            "kind",
            "feature",
            "feature_hash",
            "records",
            "source_record_id",
            "user_id",
            "split",
            "synthetic_record_id",
            "score",
        ]
    )
    for name, outcome in result.audits.items():
        if outcome.result is None:
            continue
        for w in outcome.result.witnesses:
            writer.writerow(
                [
                    name,
                    w.feature_class,
                    w.kind or "",
                    w.feature,
                    w.feature_hash,
                    w.records,
                    w.source_record_id,
                    w.user_id,
                    w.split,
                    w.synthetic_record_id,
                    w.score,
                ]
            )
    return buffer.getvalue()


EVIDENCE_FILES = (
    REPORT_NAME,
    "report.html",
    "junit.xml",
    "summary.md",
    "witnesses.csv",
    "gx-suite.json",
    "gx-validation.json",
    "plots",
)


class EvidenceWriteError(GateError):
    """The evidence could not be written (a full disk, a read-only directory); exit 3."""


def prepare_out_dir(out_dir: Path) -> None:
    """Check ``out_dir`` before any audit runs, and remove the evidence of an earlier run,
    so that an interrupted run leaves no verdict rather than a stale one.

    The earlier report is renamed away in one step (then deleted), so no interruption can
    leave part of it, say an old ``junit.xml`` PASS without its ``report.json``.

    Raises:
        InputError: ``out_dir`` is a file, the working directory, or a non-empty directory
            that holds anything other than a previous gate report (``--out /`` is refused).
    """
    if out_dir.exists() and not out_dir.is_dir():
        raise InputError(f"--out {out_dir}: exists and is not a directory")
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    for stale in out_dir.parent.glob(f".{out_dir.name}.*.tmp"):  # left by a killed run
        if stale.is_dir():
            shutil.rmtree(stale, ignore_errors=True)
    if not out_dir.is_dir() or not any(out_dir.iterdir()):
        return
    foreign = sorted(p.name for p in out_dir.iterdir() if p.name not in EVIDENCE_FILES)
    if foreign:
        raise InputError(
            f"--out {out_dir}: the directory holds files that are not a gate report "
            f"({', '.join(foreign[:3])}{', ...' if len(foreign) > 3 else ''}); choose an "
            "empty or new directory"
        )
    if out_dir.resolve() == Path.cwd().resolve():
        raise InputError(
            f"--out {out_dir}: is the working directory; give a directory of its own "
            "(the default is gate-report/)"
        )
    trash = Path(
        tempfile.mkdtemp(prefix=f".{out_dir.name}.old-", suffix=".tmp", dir=out_dir.parent)
    )
    os.replace(out_dir, trash / "report")
    shutil.rmtree(trash, ignore_errors=True)


def _write_files(
    result: GateResult, out_dir: Path, plots: list[Path], *, run_id: str | None, uri: str | None
) -> dict[str, Path]:
    """Every evidence file into ``out_dir``; ``report.json`` last."""
    files: dict[str, Path] = {}
    if result.gx is not None:
        files["gx_validation"] = atomic_write_text(
            out_dir / "gx-validation.json", json.dumps(result.gx.result, indent=2) + "\n"
        )
        files["gx_suite"] = atomic_write_text(
            out_dir / "gx-suite.json", json.dumps(result.gx.suite, indent=2) + "\n"
        )
    files["witnesses"] = atomic_write_text(out_dir / "witnesses.csv", witnesses_csv(result))
    files["html"] = atomic_write_text(out_dir / "report.html", html_report(result, plots=plots))
    files["junit"] = atomic_write_text(out_dir / "junit.xml", junit_xml(result))
    files["markdown"] = atomic_write_text(out_dir / "summary.md", markdown_summary(result))
    data = report_dict(result)
    data["evidence"] = {
        "mlflow_run_id": run_id,
        "mlflow_tracking_uri": uri,
        "gx_validation": "gx-validation.json" if result.gx is not None else None,
        "gx_success": None if result.gx is None else result.gx.success,
        "data_docs": None
        if result.gx is None or result.gx.data_docs_index is None
        else str(result.gx.data_docs_index),
        "files": [*sorted(p.name for p in files.values()), REPORT_NAME],
        "plots": [f"plots/{p.name}" for p in plots],
        "warnings": list(result.evidence_warnings),
    }
    files["report"] = atomic_write_text(
        out_dir / REPORT_NAME,
        json.dumps(data, indent=2, allow_nan=False, ensure_ascii=False) + "\n",
    )
    return files


def _plots(result: GateResult, directory: Path) -> tuple[GateResult, list[Path]]:
    """The plots; a plot that fails is recorded. It never hides a FAIL, and a PASS whose
    evidence is incomplete is an error (fail closed)."""
    from gate.evidence.plots import make_plots

    try:
        return result, make_plots(result, directory)
    except Exception as exc:
        problem = f"plots failed: {type(exc).__name__}: {exc}"
        if result.status == "pass":
            return replace(result, status="error", evidence_error=problem), []
        return replace(result, evidence_warnings=(*result.evidence_warnings, problem)), []


def _log_to_mlflow(
    result: GateResult, staging: Path, plots: list[Path], uri: str
) -> tuple[str, dict[str, Path]]:
    """One MLflow run holding every file; the verdict tags are set last."""
    import mlflow as mlflow_module

    from gate.evidence.mlflow_log import gate_run, set_verdict_tags

    with gate_run(result, uri=uri, experiment=result.policy.evidence.mlflow.experiment) as run:
        run_id = run.info.run_id
        files = _write_files(result, staging, plots, run_id=run_id, uri=uri)
        for key, path in files.items():
            if key != "report":
                mlflow_module.log_artifact(str(path))
        for plot in plots:
            mlflow_module.log_artifact(str(plot), artifact_path="plots")
        mlflow_module.log_artifact(str(files["report"]))
        set_verdict_tags(result)
    return run_id, files


def _with_deadline(seconds: float, work: Callable[[], T]) -> T:
    """``work()`` in a daemon thread; raise TimeoutError if it takes longer than
    ``seconds`` (an unreachable tracking server must not hold the gate for minutes)."""
    outcome: dict[str, Any] = {}

    def target() -> None:
        try:
            outcome["value"] = work()
        except BaseException as exc:
            outcome["error"] = exc

    thread = threading.Thread(target=target, name="gate-mlflow", daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        raise TimeoutError(f"no answer within {seconds:g} s")
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


def write_evidence(result: GateResult, out_dir: Path, *, mlflow: MlflowSettings) -> Evidence:
    """Write every evidence file and, if enabled, log them to MLflow.

    The whole set is written into a fresh staging directory next to ``out_dir`` and
    renamed to ``out_dir`` at the end, so an interruption leaves either the complete new
    set or no verdict (``prepare_out_dir`` removed the earlier one). A failure to log or to
    write is an error, never a pass.

    Raises:
        EvidenceWriteError: the evidence could not be written; names the path.
    """
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.", suffix=".tmp", dir=out_dir.parent))
    try:
        result, plots = _plots(result, staging / "plots")
        run_id: str | None = None
        uri: str | None = None
        files: dict[str, Path] | None = None
        if mlflow.enabled:
            from gate.evidence.mlflow_log import tracking_uri

            uri = tracking_uri(mlflow.tracking_uri, result.policy.evidence.mlflow.tracking_uri)
            logged = result
            try:
                run_id, files = _with_deadline(
                    mlflow.timeout, lambda: _log_to_mlflow(logged, staging, plots, uri)
                )
            except Exception as exc:
                hint = (
                    " (install gate[evidence], or pass --no-mlflow)"
                    if isinstance(exc, ImportError)
                    else ""
                )
                result = replace(
                    result,
                    status="error",
                    evidence_error=f"MLflow logging to {uri} failed{hint}: "
                    f"{type(exc).__name__}: {exc}",
                )
                run_id, files = None, None
        if files is None:
            files = _write_files(result, staging, plots, run_id=run_id, uri=uri)
        _swap_into_place(staging, out_dir)
    except OSError as exc:
        where = exc.filename or out_dir
        raise EvidenceWriteError(
            f"could not write the evidence to {where}: {exc.strerror or exc}; no verdict was "
            "written"
        ) from exc
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)
    moved = {key: out_dir / path.relative_to(staging) for key, path in files.items()}
    return Evidence(result, moved, run_id, uri)


def _swap_into_place(staging: Path, out_dir: Path) -> None:
    """Rename the complete staging directory to ``out_dir`` (an empty ``out_dir`` is
    replaced; one that gained files meanwhile is an error)."""
    if out_dir.is_dir():
        out_dir.rmdir()  # OSError if something appeared in it during the run
    os.replace(staging, out_dir)
