"""Plots of the evidence (matplotlib, Agg backend): PNG files for the HTML report and MLflow."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from gate.atomic import atomic_write

if TYPE_CHECKING:
    from gate.api import GateResult


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def disclosure_counts_plot(result: GateResult, path: Path) -> Path | None:
    """Train disclosures vs phantoms (holdout disclosures) per class, with the count
    expected on train under zero learning."""
    outcome = result.audits.get("disclosure")
    if outcome is None or outcome.result is None:
        return None
    m = outcome.result.metrics
    classes = [k.split(".")[0] for k in m if k.endswith(".train_disclosures")]
    if not classes:
        return None
    p = result.policy.membership.p
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6.4, 3.6), dpi=110)
    xs = range(len(classes))
    train = [m[f"{c}.train_disclosures"] for c in classes]
    holdout = [m[f"{c}.holdout_disclosures"] for c in classes]
    expected = [p * (t + h) for t, h in zip(train, holdout, strict=True)]
    ax.bar([x - 0.2 for x in xs], train, width=0.4, label="train disclosures (T)", color="#c0392b")
    ax.bar(
        [x + 0.2 for x in xs], holdout, width=0.4, label="phantoms: holdout (H)", color="#7f8c8d"
    )
    ax.scatter(
        [x - 0.2 for x in xs],
        expected,
        marker="_",
        s=400,
        color="black",
        zorder=3,
        label="T expected under zero learning",
    )
    ax.set_xticks(list(xs), classes)
    ax.set_ylabel("disclosed rare features")
    ax.set_title("Disclosures: train vs phantoms")
    positive = [v for v in train + holdout if v > 0]
    if positive and max(positive) > 100 * min(positive):
        ax.set_yscale("symlog")
    ax.legend(fontsize=8)
    return _save(plt, fig, path)


def roc_plot(result: GateResult, path: Path) -> Path | None:
    """ROC curves of the membership scorers against the chance diagonal."""
    outcome = result.audits.get("membership")
    if outcome is None or outcome.result is None:
        return None
    details = outcome.result.details
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(4.8, 4.4), dpi=110)
    ax.plot([0, 1], [0, 1], linestyle="--", color="#999999", label="chance")
    for scorer, info in details.items():
        roc = info.get("roc") if isinstance(info, dict) else None
        if roc:
            auc = outcome.result.metrics.get(f"{scorer}.auc", float("nan"))
            # straight segments between threshold points: tied scores count 1/2, as in the AUC
            ax.plot(roc["fpr"], roc["tpr"], label=f"{scorer} (AUC {auc:.3f})")
    ax.set_xlabel("false-positive rate (holdout users called train)")
    ax.set_ylabel("true-positive rate")
    ax.set_title("Membership: ROC by scorer")
    ax.legend(fontsize=8, loc="lower right")
    return _save(plt, fig, path)


def epsilon_plot(result: GateResult, path: Path) -> Path | None:
    """Every ε lower bound of the run next to the policy's maxima."""
    bounds: list[tuple[str, float, float | None]] = []
    for outcome in result.audits.values():
        if outcome.result is None:
            continue
        limits = {c.spec.metric: c.spec.threshold for c in outcome.checks}
        for name, value in outcome.result.metrics.items():
            if name.endswith(("epsilon_lower", "epsilon_lower_exact")):
                bounds.append((f"{outcome.name}: {name}", float(value), limits.get(name)))
    if not bounds:
        return None
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6.4, 0.45 * len(bounds) + 1.2), dpi=110)
    labels = [b[0] for b in bounds]
    values = [min(b[1], 50.0) for b in bounds]
    ax.barh(labels, values, color="#2980b9")
    for i, (_, _, limit) in enumerate(bounds):
        if limit is not None:
            ax.plot([limit, limit], [i - 0.4, i + 0.4], color="#c0392b", linewidth=2)
    ax.set_xlabel(
        f"lower bound on epsilon (confidence {1 - result.policy.alpha:g}); red: policy maximum"
    )
    ax.invert_yaxis()
    return _save(plt, fig, path)


def _save(plt, fig, path: Path) -> Path:
    fig.tight_layout()
    atomic_write(path, lambda tmp: fig.savefig(tmp, format="png"))
    plt.close(fig)
    return path


def make_plots(result: GateResult, directory: Path) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    made = [
        disclosure_counts_plot(result, directory / "disclosures.png"),
        roc_plot(result, directory / "roc.png"),
        epsilon_plot(result, directory / "epsilon.png"),
    ]
    return [p for p in made if p is not None]
