"""Evidence of a remediation run: ``remediation.json`` (every round), the privacy–utility
plot per round and a self-contained ``remediation.html``."""

from __future__ import annotations

import base64
import html
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gate._version import __version__
from gate.atomic import atomic_write, atomic_write_text
from gate.interrupts import raise_if_interrupted
from gate.remediation.loop import RoundRecord
from gate.remediation.outputs import HTML_NAME, PLOT_NAME, REPORT_NAME
from gate.results import EXIT_CODES, Status


@dataclass(frozen=True)
class RemediationResult:
    """The outcome of ``gate remediate``: PASS at the first passing round, FAIL when the
    schedule is exhausted, error if a round could not be completed."""

    status: Status
    rounds: tuple[RoundRecord, ...]
    policy: dict[str, Any]
    settings: dict[str, Any]
    seed: int
    mlflow_run_id: str | None = None
    error: str | None = None
    files: dict[str, Path] = field(default_factory=dict)

    @property
    def passing_round(self) -> RoundRecord | None:
        return next((r for r in self.rounds if r.status == "pass"), None)

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self.status]

    @property
    def first_error(self) -> str | None:
        """The run's error, else the first round's that had one."""
        return self.error or next((r.error for r in self.rounds if r.error), None)


def overall_status(rounds: Sequence[RoundRecord], planned: int) -> Status:
    """pass if a round passed; error if a round errored or no round ran; else fail (only
    when every planned round ran and failed)."""
    if any(r.status == "pass" for r in rounds):
        return "pass"
    if not rounds or any(r.status == "error" for r in rounds) or len(rounds) < planned:
        return "error"
    return "fail"


def _fmt(value: float | None, digits: int = 3) -> str:
    return "—" if value is None else f"{value:.{digits}g}"


PRIVACY_SCOPE = (
    "A round's accountant epsilon (DP-SGD, per user, at its delta) or RIP eta covers the "
    "training of that round's generator and the release sampled from it, taken alone. The "
    "run as a whole is not differentially private: round 0 trained without DP, every "
    "round's release was gated on the raw train and holdout records, and whether a round is "
    "released, and which, depends on those records. The number of train users is taken as "
    "public: a DP-SGD round's sample rate, steps and default delta (1/users) are computed "
    "from it. At a delta of 1/users a mechanism that publishes one user's records outright "
    "has the same (0, delta): set remediation.dpsgd.delta well below it for a stronger claim."
)


RIP_SCOPE = (
    " For a RIP round that cover is conditional: its eta holds if the spread sigma that "
    "calibrates its noise bounds the "
    "spread of the trained parameters over random halves of train (Corollary 8 takes it "
    "as known); sigma is estimated from remediation.rip.replicas models trained on random "
    "halves (B - 1 degrees of freedom per coordinate), so eta is a plug-in claim, not a "
    "proof: more replicas make the estimate steadier."
)


REPRODUCIBLE_NOISE_SCOPE = (
    "This release's round drew its privacy noise from its recorded seed "
    "(remediation.secret_noise: false): whoever reads the evidence can remove it, so no "
    "epsilon or eta covers this release or its generator (tests only)."
)


NON_PRIVATE_SCOPE = (
    "this release comes from round 0, trained without DP: no epsilon or eta covers it; the "
    "gate's audits found no leak they can prove (an audit proves leakage, never safety)"
)


def table_rows(rounds: Sequence[RoundRecord]) -> list[dict[str, str]]:
    """One row per round: round, method, target, accountant ε and δ, ε̂ (disclosure classes
    and membership scorers), AUC, perplexity, Fréchet distance, verdict; the canary
    audit's ε̂ (per canary) when a round has one."""
    canaries = any(r.max_canary_epsilon_lower is not None for r in rounds)
    rows = []
    for r in rounds:
        row = {
            "round": str(r.plan.index),
            "method": r.plan.method,
            "target": "—"
            if r.plan.target is None
            else (f"ε={r.plan.target:g}" if r.plan.method == "dpsgd" else f"η={r.plan.target:g}"),
            "accountant ε": _fmt(r.accountant_epsilon),
            "δ": _fmt(r.accountant_delta),
            "ε̂ (max)": _fmt(r.max_epsilon_lower),
            "AUC (max)": _fmt(r.max_auc),
            "perplexity": _fmt(r.utility.holdout_perplexity),
            "Fréchet": _fmt(r.utility.frechet_embedding_distance),
            "verdict": r.status.upper(),
        }
        if canaries:
            row = {**row, "canary ε̂": _fmt(r.max_canary_epsilon_lower)}
            row["verdict"] = row.pop("verdict")  # last
        rows.append(row)
    return rows


def approved_round(result: RemediationResult) -> RoundRecord | None:
    """The round whose release and generator the run approves: the passing round of a run
    that passed (a run that ended in error after a round passed, its MLflow logging
    failing, approves nothing)."""
    return result.passing_round if result.status == "pass" else None


def privacy_scope(result: RemediationResult) -> str:
    """What the approved release's privacy covers: nothing when it comes from round 0 or
    from noise drawn from a recorded seed (a review: the scope had claimed epsilon for it)."""
    passing = approved_round(result)
    if passing is not None and passing.plan.method == "none":
        return NON_PRIVATE_SCOPE[0].upper() + NON_PRIVATE_SCOPE[1:]
    if passing is not None and passing.noise_reproducible:
        return REPRODUCIBLE_NOISE_SCOPE
    if any(r.plan.method == "rip" for r in result.rounds):
        return PRIVACY_SCOPE + RIP_SCOPE
    return PRIVACY_SCOPE


def remediation_dict(result: RemediationResult) -> dict[str, Any]:
    passing = approved_round(result)
    return {
        "schema_version": 1,
        "kind": "gate-remediation",
        "gate_version": __version__,
        "status": result.status,
        "passed": result.status == "pass",
        "passing_round": None if passing is None else passing.plan.index,
        "release": None if passing is None else passing.release["path"],
        "generator": None if passing is None else passing.generator_dir,
        "privacy_scope": privacy_scope(result),
        "policy": result.policy,
        "settings": result.settings,
        "seed": result.seed,
        "mlflow_run_id": result.mlflow_run_id,
        "error": result.error
        or next((f"round {r.plan.index}: {r.error}" for r in result.rounds if r.error), None),
        "rounds": [r.as_dict() for r in result.rounds],
    }


def privacy_utility_plot(rounds: Sequence[RoundRecord], path: Path) -> Path:
    """Per round: privacy (accountant ε, the gate's ε̂ per class and canary signal, AUC per
    scorer and canary signal) and utility (holdout perplexity, Fréchet embedding distance)."""
    from gate.evidence.plots import new_figure

    labels = [
        f"{r.plan.index}: {r.plan.label.replace(' (non-private)', '')}\n{r.status.upper()}"
        for r in rounds
    ]
    x = list(range(len(rounds)))
    fig = new_figure(figsize=(15, 3.8), dpi=100)
    axes = fig.subplots(1, 4)
    ax = axes[0]
    classes = sorted({c for r in rounds for c in r.gate["epsilon_lower"]})
    for c in classes:
        ax.plot(x, [r.gate["epsilon_lower"].get(c) for r in rounds], marker="o", label=f"ε̂ {c}")
    signals = sorted({s for r in rounds for s in r.gate.get("canary_epsilon_lower", {})})
    for s in signals:
        values = [r.gate.get("canary_epsilon_lower", {}).get(s) for r in rounds]
        ax.plot(x, values, marker="x", linestyle=":", label=f"ε̂ canary {s} (per canary)")
    spent = [r.accountant_epsilon for r in rounds]
    if any(v is not None for v in spent):
        ax.plot(x, spent, marker="s", linestyle="--", color="black", label="accountant ε")
    ax.set_title("privacy: ε̂ (gate) and ε (accountant)")
    ax.set_ylabel("ε")
    ax = axes[1]
    scorers = sorted({s for r in rounds for s in r.gate["auc"]})
    for s in scorers:
        ax.plot(x, [r.gate["auc"].get(s) for r in rounds], marker="o", label=f"AUC {s}")
    ax.axhline(0.5, color="grey", linewidth=0.8, linestyle=":")
    ax.set_title("privacy: AUC (membership scorers, canary signals)")
    ax = axes[2]
    ax.plot(x, [r.utility.holdout_perplexity for r in rounds], marker="o", color="tab:blue")
    ax.set_title("utility: holdout perplexity (lower is better)")
    ax = axes[3]
    ax.plot(x, [r.utility.frechet_embedding_distance for r in rounds], marker="^", color="tab:red")
    ax.set_title("utility: Fréchet distance (lower is better)")
    ax.set_ylabel("to holdout, in MiniLM's embedding space", fontsize=7)
    for ax in axes:
        ax.set_xticks(x, labels, fontsize=7)
        ax.title.set_fontsize(9)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(loc="best", fontsize=7)
    fig.tight_layout()

    atomic_write(path, lambda tmp: fig.savefig(tmp, format="png", dpi=110))
    return path


def remediation_html(result: RemediationResult, plot: Path | None) -> str:
    rows = table_rows(result.rounds)
    head = "".join(f"<th>{html.escape(k)}</th>" for k in (rows[0] if rows else {}))
    body = ""
    for row, r in zip(rows, result.rounds, strict=True):
        cells = "".join(f"<td>{html.escape(v)}</td>" for v in row.values())
        link = f'<td><a href="{html.escape(r.report)}/report.html">report</a></td>'
        body += f'<tr class="{r.status}">{cells}{link}</tr>'
    image = ""
    if plot is not None and plot.exists():
        data = base64.b64encode(plot.read_bytes()).decode("ascii")
        image = f'<img alt="privacy and utility per round" src="data:image/png;base64,{data}">'
    verdict = result.status.upper()
    errors = [e for e in [result.error, *(r.error for r in result.rounds)] if e]
    error = "".join(f"<p><b>error:</b> {html.escape(e)}</p>" for e in errors)
    error += "".join(
        f"<p><b>warning, round {r.plan.index}:</b> {html.escape(w)}</p>"
        for r in result.rounds
        for w in r.warnings
    )
    return f"""<!doctype html>
<html><head><meta charset="utf-8"><title>gate remediate: {verdict}</title>
<style>body{{font-family:sans-serif;margin:2em}}table{{border-collapse:collapse}}
td,th{{border:1px solid #ccc;padding:4px 8px;text-align:right}}
tr.pass td{{background:#e8f5e9}}tr.fail td{{background:#fdecea}}tr.error td{{background:#fff3cd}}
img{{max-width:100%}}</style></head><body>
<h1>gate remediate: {verdict}</h1>
<p>policy {html.escape(str(result.policy.get("name")))}, method
{html.escape(str(result.settings.get("method")))}, generator
{html.escape(str(result.settings.get("generator")))}, seed {result.seed}.
ε̂ is the gate's lower confidence bound (an audit proves leakage, never safety); accountant ε
is what DP-SGD spent at the δ shown, per user; the canary ε̂ bounds a canary inserted
n_rep times, not a user.</p>
<p>{html.escape(privacy_scope(result))}</p>
{error}<table><tr>{head}<th></th></tr>{body}</table>
{image}
</body></html>
"""


def write_remediation_report(result: RemediationResult, out: Path) -> dict[str, Path]:
    """The plot, the HTML and ``remediation.json`` (last) into ``out``; none after a
    signal whose exception was dropped (the command exits 3)."""
    raise_if_interrupted()
    files: dict[str, Path] = {}
    plot = None
    if result.rounds:
        plot = privacy_utility_plot(result.rounds, out / PLOT_NAME)
        files["plot"] = plot
    files["html"] = atomic_write_text(out / HTML_NAME, remediation_html(result, plot))
    files["report"] = atomic_write_text(
        out / REPORT_NAME,
        json.dumps(remediation_dict(result), indent=2, allow_nan=False, ensure_ascii=False) + "\n",
    )
    return files
