"""A Markdown summary for a pull-request comment."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gate.evidence.escape import markdown_cell

if TYPE_CHECKING:
    from gate.results import GateResult

_ICON = {"pass": "✅ PASS", "fail": "❌ FAIL", "error": "⚠️ ERROR"}


def markdown_summary(result: GateResult) -> str:
    m = result.bundle.membership
    lines = [
        f"### Privacy gate: {_ICON[result.status]}",
        "",
        f"Policy `{result.policy.name}` (sha256 `{(result.policy_sha256 or '')[:12]}`), "
        f"alpha = {result.policy.alpha:g}, membership {m.p_words()} ({m.how})."
        + (
            ""
            if m.training_data is None
            else f" Training data: {markdown_cell(m.training_data.summary())}."
        ),
        "",
        "| audit | check | value | threshold | result |",
        "|---|---|---:|---:|---|",
    ]
    for name, outcome in result.audits.items():
        if outcome.error is not None:
            error = markdown_cell(outcome.error)
            lines.append(f"| {name} | audit did not complete | | | ⚠️ {error} |")
        for c in outcome.checks:
            word = "pass" if c.passed else "**fail**" if c.measured else "not measured"
            bound = c.spec.bound
            value = "" if c.value is None else f"{c.value:.4g}"
            lines.append(f"| {name} | `{c.spec.metric}` | {value} | {bound} | {word} |")
    if result.evidence_error:
        lines += ["", f"⚠️ Evidence could not be recorded: {markdown_cell(result.evidence_error)}"]
    lines += [
        "",
        "An audit can show that a release leaks, never that it is safe: ε̂ and p̂ are lower "
        f"confidence bounds at level 1 - {result.policy.alpha:g}; AUCs, counts and rates are "
        "point estimates (each metric's statement is in report.json).",
        "",
    ]
    return "\n".join(lines)
