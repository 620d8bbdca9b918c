"""A self-contained HTML report for a reviewer: no network assets, plots inlined."""

from __future__ import annotations

import base64
from html import escape
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gate.results import AuditOutcome, AuditResult, GateResult

_STYLE = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:2em auto;max-width:1100px;color:#222}
h1{margin-bottom:.2em} .verdict{display:inline-block;padding:.2em .7em;border-radius:4px;color:#fff;font-weight:700}
.pass{background:#27ae60}.fail{background:#c0392b}.error{background:#d68910}
table{border-collapse:collapse;margin:1em 0;width:100%} th,td{border:1px solid #ddd;padding:4px 8px;text-align:left;font-size:14px}
th{background:#f4f4f4} td.num{text-align:right;font-variant-numeric:tabular-nums}
.bad{color:#c0392b;font-weight:700}.good{color:#27ae60} .note{color:#555;font-size:13px}
img{max-width:100%;border:1px solid #eee;margin:.5em 0} code{background:#f6f6f6;padding:0 3px}
"""


def _num(value: float | None, kind: str = "other") -> str:
    if value is None:
        return "-"
    if value != value:  # NaN
        return "n/a"
    if kind == "count":
        return f"{int(value):,}" if float(value).is_integer() else f"{value:,.1f}"
    return f"{value:.4g}"


def _image(path: Path) -> str:
    data = base64.b64encode(path.read_bytes()).decode("ascii")
    return f'<img alt="{escape(path.stem)}" src="data:image/png;base64,{data}">'


_LEAK_IF = {"higher": "higher = more leakage", "lower": "lower = more leakage", "neither": ""}


def _audit_section(outcome: AuditOutcome, result: AuditResult) -> list[str]:
    """One section per audit, read from its declared metrics: a row per metric (what it
    means, which way is leakage, its estimator and confidence) with a column per subject
    (class, scorer), then the confidence statements."""
    subjects = result.subjects()
    specs = list({m.spec.name: m.spec for m in result.metrics}.values())
    values = {(m.subject, m.spec.name): m.value for m in result.metrics}
    out = [f"<h2>Audit <code>{escape(outcome.name)}</code></h2>"]
    if outcome.citation:
        out.append(f"<p class=note>After {escape(outcome.citation)}.</p>")
    out.append("<table><tr><th>metric</th><th>meaning</th>")
    out.extend(f"<th>{escape(subject or outcome.name)}</th>" for subject in subjects)
    out.append("<th>estimator; confidence</th></tr>")
    for spec in specs:
        direction = _LEAK_IF[spec.leak_if]
        out.append(
            f"<tr><td><code>{escape(spec.name)}</code></td><td>{escape(spec.meaning)}"
            + (f"<br><span class=note>{direction}</span>" if direction else "")
            + "</td>"
        )
        out.extend(
            f"<td class=num>{_num(values.get((subject, spec.name)), spec.kind)}</td>"
            for subject in subjects
        )
        out.append(f"<td class=note>{escape(spec.estimator)}; {escape(spec.confidence)}</td></tr>")
    out.append("</table>")
    for subject, statement in result.statements.items():
        out.append(f"<p class=note><b>{escape(subject)}:</b> {escape(statement)}</p>")
    return out


def html_report(result: GateResult, *, plots: list[Path]) -> str:
    m = result.bundle.membership
    status = result.status
    out = [
        "<!doctype html><html lang=en><head><meta charset=utf-8>",
        f"<title>gate: {escape(result.policy.name)} {status.upper()}</title><style>{_STYLE}</style></head><body>",
        f"<h1>Privacy gate <span class='verdict {status}'>{status.upper()}</span></h1>",
        f"<p>Policy <code>{escape(result.policy.name)}</code> (sha256 <code>{escape(result.policy_sha256 or '-')}</code>), "
        f"alpha = {result.policy.alpha:g}, seed = {result.seed}. Membership: {escape(m.p_words())}, {escape(m.how)}; "
        f"split check against p = {m.p:g}: {m.balance.train_users} of {m.balance.total_users} users in train, "
        f"two-sided p-value {m.balance.p_value:.3g}."
        + (
            ""
            if m.training_data is None
            else f" Training data: {escape(m.training_data.summary())}."
        )
        + "</p>",
        "<p class=note>An audit can show that a release leaks, never that it is safe. Each "
        "number carries its confidence statement (report.json, <code>metric_specs</code>): "
        "ε̂ and p̂ are lower confidence bounds at level 1 − alpha; AUCs, counts and rates "
        "are point estimates.</p>",
        "<h2>Inputs</h2><table><tr><th>file</th><th>path</th><th>sha256</th><th>records</th><th>users</th></tr>",
    ]
    for name, fp in result.bundle.fingerprints.items():
        out.append(
            f"<tr><td>{name}</td><td>{escape(fp.path)}</td><td><code>{fp.sha256[:16]}…</code></td>"
            f"<td class=num>{fp.records}</td><td class=num>{'-' if fp.users is None else fp.users}</td></tr>"
        )
    out.append("</table><h2>Threshold checks</h2>")
    out.append(
        "<table><tr><th>audit</th><th>check</th><th>value</th><th>op</th><th>threshold</th><th>result</th></tr>"
    )
    for name, outcome in result.audits.items():
        if outcome.error is not None:
            out.append(
                f"<tr><td>{name}</td><td colspan=4>{escape(outcome.error)}</td><td class=bad>ERROR</td></tr>"
            )
        for c in outcome.checks:
            word = (
                "<td class=good>pass</td>"
                if c.passed
                else "<td class=bad>FAIL</td>"
                if c.measured
                else "<td class=bad>not measured</td>"
            )
            out.append(
                f"<tr><td>{name}</td><td><code>{escape(c.spec.metric)}</code><br><span class=note>"
                f"{escape(c.spec.description)}</span></td><td class=num>{_num(c.value)}</td>"
                f"<td>{escape(c.spec.op)}</td><td class=num>{c.spec.threshold_text}</td>{word}</tr>"
            )
    out.append("</table>")
    if result.evidence_error:
        out.append(
            f"<p class=bad>Evidence could not be recorded: {escape(result.evidence_error)}</p>"
        )
    for outcome in result.audits.values():
        if outcome.result is not None:
            out.extend(_audit_section(outcome, outcome.result))
    if plots:
        out.append("<h2>Plots</h2>")
        out.extend(_image(p) for p in plots)
    out.append("<h2>Witnesses</h2>")
    redacted = result.policy.evidence.redact_witnesses
    out.append(
        f"<p class=note>{'Redacted: a masked snippet and a keyed hash per feature, and a keyed hash of the user id (their last 12 hex digits here; the full hashes in witnesses.csv). One witness per feature; records counts the source records that carry it.' if redacted else 'RAW TEXT: redaction is off in this policy.'}</p>"
    )
    out.append(
        "<table><tr><th>audit</th><th>class</th><th>feature</th><th>keyed hash</th>"
        "<th>source record</th><th>records</th><th>user</th><th>split</th>"
        "<th>synthetic record</th><th>score</th></tr>"
    )
    for name, outcome in result.audits.items():
        if outcome.result is None:
            continue
        for w in outcome.result.witnesses:
            out.append(
                f"<tr><td>{name}</td><td>{escape(w.feature_class)}{'/' + escape(w.kind) if w.kind else ''}</td>"
                f"<td><code>{escape(w.feature)}</code></td><td><code>{escape(w.feature_hash[-12:])}</code></td>"
                f"<td>{escape(w.source_record_id)}</td><td class=num>{w.records}</td>"
                f"<td>{escape(w.user_id[-12:] if redacted else w.user_id)}</td><td>{w.split}</td>"
                f"<td>{escape(w.synthetic_record_id)}</td><td class=num>{_num(w.score)}</td></tr>"
            )
    out.append("</table></body></html>")
    return "\n".join(out)
