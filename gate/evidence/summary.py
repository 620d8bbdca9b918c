"""The verdict table printed by ``gate check``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.console import Console
from rich.table import Table

if TYPE_CHECKING:
    from gate.results import GateResult

_STYLE = {"pass": "bold green", "fail": "bold red", "error": "bold yellow"}
_WORD = {"pass": "PASS", "fail": "FAIL", "error": "ERROR"}


def _fmt(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.4g}"


def print_summary(result: GateResult, console: Console, *, report_path: str | None = None) -> None:
    bundle = result.bundle
    m = bundle.membership
    inputs = ", ".join(
        f"{name} {fp.records} records" + (f"/{fp.users} users" if fp.users is not None else "")
        for name, fp in bundle.fingerprints.items()
    )
    console.print(f"[bold]gate[/bold] policy [cyan]{result.policy.name}[/cyan]: {inputs}")
    console.print(
        f"membership: p = {m.p:g}, {m.how}; split check p-value {m.balance.p_value:.3g}; "
        f"alpha = {result.policy.alpha:g}; seed = {result.seed}"
    )
    for warning in result.warnings:
        console.print(f"[yellow]warning:[/yellow] {warning}")

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
                _fmt(check.spec.threshold),
                f"[{_STYLE[word]}]{_WORD[word]}[/]",
            )
    console.print(table)

    for name, outcome in result.audits.items():
        if outcome.error is not None:
            console.print(f"[yellow]audit {name} could not run:[/yellow] {outcome.error}")
        elif outcome.result is not None and outcome.result.witnesses:
            shown = outcome.result.witnesses[:5]
            redacted = " (redacted)" if result.policy.evidence.redact_witnesses else ""
            console.print(
                f"audit {name}: {len(outcome.result.witnesses)} witnesses{redacted}, "
                f"strongest {len(shown)}:"
            )
            for w in shown:
                user = "" if redacted else f" (user {w.user_id})"  # redacted: a keyed hash
                console.print(
                    f"  [{w.feature_class}{':' + w.kind if w.kind else ''}] {w.feature}  <- "
                    f"{w.split} record {w.source_record_id}{user} in synthetic "
                    f"{w.synthetic_record_id}",
                    highlight=False,
                    markup=False,
                )
    if result.evidence_error:
        console.print(f"[yellow]evidence could not be recorded:[/yellow] {result.evidence_error}")
    for warning in result.evidence_warnings:
        console.print(f"[yellow]evidence incomplete:[/yellow] {warning}")
    verdict = _WORD[result.status]
    console.print(f"verdict: [{_STYLE[result.status]}]{verdict}[/] (exit {result.exit_code})")
    if report_path:
        console.print(f"report: {report_path}")
