"""Plots of the evidence (matplotlib, Agg backend): PNG files for the HTML report and MLflow.

Every plot is made from what the audits declare, so a new audit is drawn without code
here: metrics that share a ``chart`` become a grouped bar chart (one group per subject),
curves that share a ``chart`` become one line plot, and every metric of kind ``epsilon``
is drawn next to the policy's maximum for it.
"""

from __future__ import annotations

import re
import textwrap
from pathlib import Path
from typing import TYPE_CHECKING

from gate.atomic import atomic_write

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from gate.metrics import Metric
    from gate.results import Curve, GateResult


def new_figure(*, figsize: tuple[float, float], dpi: float = 110) -> Figure:
    """A figure outside pyplot, saved with the Agg renderer: the gate leaves the
    process's matplotlib backend as it was (a notebook's stays interactive) and no figure
    lives on in pyplot's registry."""
    from matplotlib.figure import Figure

    return Figure(figsize=figsize, dpi=dpi)


def _file_name(chart: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", chart.lower()).strip("-") + ".png"


def bar_chart(title: str, metrics: list[Metric], path: Path) -> Path:
    """One group of bars per subject, one bar per metric (in declaration order)."""
    subjects = list(dict.fromkeys(m.subject or "" for m in metrics))
    names = list(dict.fromkeys(m.spec.name for m in metrics))
    meaning = {m.spec.name: m.spec.meaning for m in metrics}
    value = {(m.subject or "", m.spec.name): m.value for m in metrics}
    fig = new_figure(figsize=(6.4, 3.8))
    ax = fig.subplots()
    width = 0.8 / len(names)
    for j, name in enumerate(names):
        xs = [i - 0.4 + width * (j + 0.5) for i in range(len(subjects))]
        ax.bar(xs, [value.get((s, name), 0.0) for s in subjects], width=width, label=meaning[name])
    ax.set_xticks(range(len(subjects)), subjects)
    ax.set_title(_wrapped_title(title))
    positive = [v for v in value.values() if v > 0]
    if positive and max(positive) > 100 * min(positive):
        ax.set_yscale("symlog")
    ax.margins(y=0.25)
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.1), ncol=2, frameon=False)
    return _save(fig, path)


def _wrapped_title(title: str) -> str:
    """The title capitalised and wrapped: a long one was cut at the image's edge."""
    return textwrap.fill(title[:1].upper() + title[1:], width=60)


def curve_chart(title: str, curves: list[Curve], path: Path) -> Path:
    """Curves of one chart in one plot (straight segments between measured points)."""
    fig = new_figure(figsize=(5.2, 4.6))
    ax = fig.subplots()
    if any(c.diagonal for c in curves):
        ax.plot([0, 1], [0, 1], linestyle="--", color="#999999", label="chance")
    for c in curves:
        ax.plot(c.x, c.y, label=c.label or c.subject)
    marked = {m for c in curves for m in c.markers}
    for x, y, text in sorted(marked):
        ax.plot([x], [y], marker="o", color="#c0392b", linestyle="none", label=text)
    if any(c.log_y for c in curves):
        positive = [v for c in curves for v in c.y if v > 0] + [m[1] for m in marked if m[1] > 0]
        ax.set_yscale("symlog", linthresh=min(positive) if positive else 1e-12)
    ax.set_xlabel(curves[0].x_label)
    ax.set_ylabel(curves[0].y_label)
    ax.set_title(_wrapped_title(title))
    ax.legend(fontsize=8, loc="best")
    return _save(fig, path)


def epsilon_plot(result: GateResult, path: Path) -> Path | None:
    """Every ε lower bound of the run next to the policy's maxima."""
    bounds: list[tuple[str, float, float | None]] = []
    for outcome in result.audits.values():
        if outcome.result is None:
            continue
        limits = {c.spec.metric: c.spec.threshold for c in outcome.checks}
        for m in outcome.result.metrics:
            if m.spec.kind == "epsilon":
                bounds.append((f"{outcome.name}: {m.name}", m.value, limits.get(m.name)))
    if not bounds:
        return None
    fig = new_figure(figsize=(7.2, 0.45 * len(bounds) + 1.6))
    ax = fig.subplots()
    labels = [b[0] for b in bounds]
    values = [min(b[1], 50.0) for b in bounds]
    ax.barh(labels, values, color="#2980b9", label="lower bound on epsilon")
    labelled = False
    for i, (_, _, limit) in enumerate(bounds):
        if limit is not None:
            ax.plot(
                [limit, limit],
                [i - 0.4, i + 0.4],
                color="#c0392b",
                linewidth=2,
                label=None if labelled else "policy maximum",
            )
            labelled = True
    ax.set_title(f"Lower bounds on epsilon (confidence {1 - result.policy.alpha:g})")
    ax.set_xlabel("epsilon")
    ax.invert_yaxis()
    ax.legend(fontsize=7, loc="lower right")
    return _save(fig, path)


def _save(fig: Figure, path: Path) -> Path:
    fig.tight_layout()
    atomic_write(path, lambda tmp: fig.savefig(tmp, format="png"))
    return path


def make_plots(result: GateResult, directory: Path) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    bars: dict[str, list[Metric]] = {}
    lines: dict[str, list[Curve]] = {}
    for outcome in result.audits.values():
        if outcome.result is None:
            continue
        for m in outcome.result.metrics:
            if m.spec.chart is not None:
                bars.setdefault(m.spec.chart, []).append(m)
        for c in outcome.result.curves:
            lines.setdefault(c.chart, []).append(c)
    used = {"epsilon.png"}

    def unique(chart: str) -> Path:
        name, n = _file_name(chart), 1
        while name in used:
            n += 1
            name = f"{_file_name(chart)[: -len('.png')]}-{n}.png"
        used.add(name)
        return directory / name

    made: list[Path | None] = [
        bar_chart(chart, metrics, unique(chart)) for chart, metrics in bars.items()
    ]
    made += [curve_chart(chart, cs, unique(chart)) for chart, cs in lines.items()]
    made.append(epsilon_plot(result, directory / "epsilon.png"))
    return [p for p in made if p is not None]
