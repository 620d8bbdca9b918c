"""A Markdown summary for a pull-request comment."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gate.results import GateResult

_ICON = {"pass": "✅ PASS", "fail": "❌ FAIL", "error": "⚠️ ERROR"}


def markdown_summary(result: GateResult) -> str:
    m = result.bundle.membership
    lines = [
        f"### Privacy gate: {_ICON[result.status]}",
        "",
        f"Policy `{result.policy.name}` (sha256 `{(result.policy_sha256 or '')[:12]}`), "
        f"alpha = {result.policy.alpha:g}, membership p = {m.p:g} ({m.how}).",
        "",
        "| audit | check | value | threshold | result |",
        "|---|---|---:|---:|---|",
    ]
    for name, outcome in result.audits.items():
        if outcome.error is not None:
            lines.append(f"| {name} | audit did not complete | | | ⚠️ {outcome.error} |")
        for c in outcome.checks:
            word = "pass" if c.passed else "**fail**" if c.measured else "not measured"
            bound = f"{c.spec.op} {c.spec.threshold:g}"
            value = "" if c.value is None else f"{c.value:.4g}"
            lines.append(f"| {name} | `{c.spec.metric}` | {value} | {bound} | {word} |")
    if result.evidence_error:
        lines += ["", f"⚠️ Evidence could not be recorded: {result.evidence_error}"]
    lines += [
        "",
        "Lower bounds: an audit can show that a release leaks, never that it is safe.",
        "",
    ]
    return "\n".join(lines)
