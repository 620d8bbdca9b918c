"""The rounds table and verdict printed by ``gate remediate``."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from rich.table import Table

from gate.evidence.escape import one_line
from gate.remediation.report import approved_round, privacy_scope, table_rows

if TYPE_CHECKING:
    from rich.console import Console

    from gate.remediation.report import RemediationResult


def print_remediation(result: RemediationResult, console: Console, *, out_dir: Path) -> None:
    """The rounds, where the approved round's release and generator are and what their
    privacy covers, the run's error, the verdict and the report's path."""
    table = Table(title="Remediation rounds")
    rows = table_rows(result.rounds)
    for column in rows[0] if rows else ():
        table.add_column(column, justify="left" if column in ("method", "verdict") else "right")
    for row in rows:
        table.add_row(*row.values())
    console.print(table)
    lines = [f"warning: round {r.plan.index}: {w}" for r in result.rounds for w in r.warnings]
    passing = approved_round(result)
    if passing is not None:
        lines.append(f"release: {out_dir / passing.release['path']}")
        if passing.generator_dir:
            lines.append(f"generator: {out_dir / passing.generator_dir}")
        lines.append(f"privacy: {privacy_scope(result)}")
        if passing.noise_reproducible:
            lines.append(
                "warning: remediation.secret_noise is false: the round's privacy noise comes "
                "from its recorded seed, so whoever reads the evidence can remove it; this "
                "release and generator are not private (tests only)"
            )
    error = result.first_error
    if error:
        lines.append(f"error: {error}")
    lines.append(f"verdict: {result.status.upper()} (exit {result.exit_code})")
    lines.append(f"report: {result.files['report']}")
    if result.mlflow_run_id:
        lines.append(f"mlflow run: {result.mlflow_run_id}")
    for line in lines:
        console.print(one_line(line), markup=False, highlight=False)
