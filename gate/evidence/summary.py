"""The verdict table printed by ``gate check``."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from gate.evidence.escape import one_line

if TYPE_CHECKING:
    from gate.results import GateResult

_STYLE = {"pass": "bold green", "fail": "bold red", "error": "bold yellow"}
_WORD = {"pass": "PASS", "fail": "FAIL", "error": "ERROR"}


def _fmt(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.4g}"


def _shown(text: str) -> str:
    """Text from the run (a message naming a file or record) as printed after markup:
    brackets are not Rich's, control characters are escapes."""
    return escape(one_line(text))


def print_summary(
    result: GateResult,
    console: Console,
    *,
    report_path: str | None = None,
    mlflow_run_id: str | None = None,
    data_docs: Path | None = None,
) -> None:
    """The inputs, the checks, the audits' errors and strongest witnesses, the verdict,
    and where the evidence is."""
    bundle = result.bundle
    m = bundle.membership
    inputs = ", ".join(
        f"{name} {fp.records} records" + (f"/{fp.users} users" if fp.users is not None else "")
        for name, fp in bundle.fingerprints.items()
    )
    console.print(
        f"[bold]gate[/bold] policy [cyan]{escape(result.policy.name)}[/cyan]: {_shown(inputs)}"
    )
    console.print(
        f"membership: {_shown(m.p_words())}, {m.how}; split check against p = {m.p:g}: "
        f"p-value {m.balance.p_value:.3g}; "
        f"alpha = {result.policy.alpha:g}; seed = {result.seed}"
    )
    if m.training_data is not None:
        console.print(f"training data: {_shown(m.training_data.summary())}")
    for warning in result.warnings:
        console.print(f"[yellow]warning:[/yellow] {_shown(warning)}")

    table = Table(title="Threshold checks", show_lines=False)
    for column in ("audit", "check", "value", "op", "threshold", "result"):
        table.add_column(column, justify="right" if column in {"value", "threshold"} else "left")
    for name, outcome in result.audits.items():
        if outcome.error is not None:
            table.add_row(name, "(audit did not complete)", "-", "", "-", "[bold yellow]ERROR[/]")
            continue
        for check in outcome.checks:
            word = "pass" if check.passed else "fail"
            table.add_row(
                name,
                check.spec.metric,
                _fmt(check.value),
                check.spec.op,
                check.spec.threshold_text,
                f"[{_STYLE[word]}]{_WORD[word]}[/]",
            )
    console.print(table)

    for name, outcome in result.audits.items():
        if outcome.error is not None:
            console.print(f"[yellow]audit {name} could not run:[/yellow] {_shown(outcome.error)}")
        elif outcome.result is not None and outcome.result.witnesses:
            shown = outcome.result.witnesses[:5]
            redacted = " (redacted)" if result.policy.evidence.redact_witnesses else ""
            console.print(
                f"audit {name}: {len(outcome.result.witnesses)} witnesses{redacted}, "
                f"strongest {len(shown)}:"
            )
            for w in shown:
                # redacted, the user and the release record are keyed hashes: left out here
                user = "" if redacted else f" (user {w.user_id})"
                released = "" if redacted else f" in synthetic {w.synthetic_record_id}"
                console.print(
                    one_line(
                        f"  [{w.feature_class}{':' + w.kind if w.kind else ''}] {w.feature}  <- "
                        f"{w.split} record {w.source_record_id}{user}{released}"
                    ),
                    highlight=False,
                    markup=False,
                )
    if result.evidence_error:
        console.print(
            f"[yellow]evidence could not be recorded:[/yellow] {_shown(result.evidence_error)}"
        )
    for warning in result.evidence_warnings:
        console.print(f"[yellow]evidence incomplete:[/yellow] {_shown(warning)}")
    verdict = _WORD[result.status]
    console.print(f"verdict: [{_STYLE[result.status]}]{verdict}[/] (exit {result.exit_code})")
    if report_path:
        console.print(f"report: {one_line(report_path)}", markup=False, highlight=False)
    if mlflow_run_id:
        console.print(f"mlflow run: {mlflow_run_id}", markup=False, highlight=False)
    if data_docs is not None:
        console.print(f"data docs: {one_line(str(data_docs))}", markup=False, highlight=False)
