"""Write the evidence of a gate run: report.json, HTML, JUnit, Markdown, witnesses, the GX
validation result and plots; and log all of it to MLflow. Every file is written atomically.
A failure to record evidence turns the verdict into an error (never a pass)."""

from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from gate.atomic import atomic_write_text
from gate.evidence.html import html_report
from gate.evidence.junit import junit_xml
from gate.evidence.markdown import markdown_summary
from gate.evidence.report import REPORT_NAME, report_dict

if TYPE_CHECKING:
    from gate.results import GateResult


@dataclass(frozen=True)
class MlflowSettings:
    enabled: bool
    tracking_uri: str | None = None  # from the CLI; None = environment, policy, default


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
            "feature",
            "feature_hash",
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
                    w.feature,
                    w.feature_hash,
                    w.source_record_id,
                    w.user_id,
                    w.split,
                    w.synthetic_record_id,
                    w.score,
                ]
            )
    return buffer.getvalue()


def _write_files(
    result: GateResult, out_dir: Path, plots: list[Path], *, run_id: str | None, uri: str | None
) -> dict[str, Path]:
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
    }
    files["report"] = atomic_write_text(
        out_dir / REPORT_NAME,
        json.dumps(data, indent=2, allow_nan=False, ensure_ascii=False) + "\n",
    )
    return files


def write_evidence(result: GateResult, out_dir: Path, *, mlflow: MlflowSettings) -> Evidence:
    """Write every evidence file into ``out_dir`` and, if enabled, log them to MLflow."""
    from gate.evidence.plots import make_plots

    out_dir.mkdir(parents=True, exist_ok=True)
    # report.json is written last; a verdict left by an earlier run must not survive a
    # failure while this run's other files are being written.
    (out_dir / REPORT_NAME).unlink(missing_ok=True)
    try:
        plots = make_plots(result, out_dir / "plots")
    except Exception as exc:
        result = replace(
            result, status="error", evidence_error=f"plots failed: {type(exc).__name__}: {exc}"
        )
        plots = []
    if not mlflow.enabled:
        return Evidence(
            result, _write_files(result, out_dir, plots, run_id=None, uri=None), None, None
        )

    from gate.evidence.mlflow_log import tracking_uri

    uri = tracking_uri(mlflow.tracking_uri, result.policy.evidence.mlflow.tracking_uri)
    try:
        import mlflow as mlflow_module

        from gate.evidence.mlflow_log import gate_run

        with gate_run(result, uri=uri, experiment=result.policy.evidence.mlflow.experiment) as run:
            run_id = run.info.run_id
            files = _write_files(result, out_dir, plots, run_id=run_id, uri=uri)
            for key, path in files.items():
                if key != "report":
                    mlflow_module.log_artifact(str(path))
            for plot in plots:
                mlflow_module.log_artifact(str(plot), artifact_path="plots")
            mlflow_module.log_artifact(str(files["report"]))
        return Evidence(result, files, run_id, uri)
    except Exception as exc:
        hint = (
            " (install gate[evidence], or pass --no-mlflow)" if isinstance(exc, ImportError) else ""
        )
        result = replace(
            result,
            status="error",
            evidence_error=f"MLflow logging to {uri} failed{hint}: {type(exc).__name__}: {exc}",
        )
        return Evidence(
            result, _write_files(result, out_dir, plots, run_id=None, uri=uri), None, uri
        )
