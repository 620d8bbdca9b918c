"""What ``gate remediate`` writes in ``--out``, told apart from other files, and the
withdrawal of an earlier run's output: light enough to run before the command's imports."""

from __future__ import annotations

import json
import re
from pathlib import Path

from gate.atomic import atomic_write_text
from gate.evidence.writer import is_gate_report_json, out_dir_lock, withdraw_earlier_output

RELEASE_NAME = "release.jsonl"
PENDING_RELEASE_NAME = ".release-pending.jsonl"  # a round's release while it is gated
ROUND_FILE = "round.json"
REPORT_NAME = "remediation.json"
PLOT_NAME = "privacy-utility.png"
HTML_NAME = "remediation.html"
ROUND_DIR = re.compile(r"round-\d+")


def is_remediation_output(name: str) -> bool:
    """Whether ``name`` is a file or directory ``gate remediate`` writes in ``--out``."""
    return name in (REPORT_NAME, PLOT_NAME, HTML_NAME) or ROUND_DIR.fullmatch(name) is not None


ROUND_FILES = frozenset({"report", ROUND_FILE, RELEASE_NAME, "generator"})


def is_remediation_dir(out: Path) -> bool:
    """Whether the directory ``out`` is an earlier ``gate remediate`` output: its
    ``remediation.json`` (missing after an interrupted run) is one the gate wrote, and its
    rounds are directories of the round's files only (and the hidden staging files of
    an interrupted write)."""
    report = out / REPORT_NAME
    if report.exists() and not is_gate_report_json(report):
        return False
    rounds = [p for p in out.iterdir() if ROUND_DIR.fullmatch(p.name)]
    return all(
        p.is_dir() and {c.name for c in p.iterdir() if not c.name.startswith(".")} <= ROUND_FILES
        for p in rounds
    )


def withdraw_kept_releases(out: Path, *, reason: str) -> None:
    """Delete the release a passing round kept in ``out`` and record in its
    ``round.json`` that it was withdrawn (``kept: false``, ``withdrawn: reason``): the run
    ended in an error after that round passed, so it approves nothing, and a step that
    publishes ``round-*/release.jsonl`` must find none. A generator trained with DP,
    which may be kept, stays."""
    for round_dir in sorted(p for p in out.glob("round-*") if p.is_dir()):
        # a kept release, or one a killed run left, whatever a record says (a review: a
        # round killed before its record was written kept its release)
        for name in (RELEASE_NAME, PENDING_RELEASE_NAME):
            (round_dir / name).unlink(missing_ok=True)
    for round_file in sorted(out.glob(f"round-*/{ROUND_FILE}")):
        try:
            record = json.loads(round_file.read_text(encoding="utf-8"))
        except (ValueError, UnicodeDecodeError):  # not the gate's record: no release kept now
            continue
        release = record.get("release") if isinstance(record, dict) else None
        if not isinstance(release, dict) or not release.get("kept"):
            continue
        record["release"] = {**release, "kept": False, "path": None, "withdrawn": reason}
        atomic_write_text(
            round_file, json.dumps(record, indent=2, allow_nan=False, ensure_ascii=False) + "\n"
        )


def remove_remediation_report(out: Path) -> None:
    """Remove the summary files from ``out`` (``remediation.json``, the HTML, the plot);
    the rounds stay."""
    for name in (REPORT_NAME, HTML_NAME, PLOT_NAME):
        (out / name).unlink(missing_ok=True)


def withdraw_earlier_remediation(out_dir: Path) -> None:
    """Remove an earlier ``gate remediate`` output from ``out_dir`` (its kept releases
    withdrawn first if another run's files refuse the directory).

    Raises:
        InputError: another gate run holds the directory, or it is unusable.
    """
    withdraw_earlier_output(
        out_dir,
        is_own=is_remediation_output,
        is_output=is_remediation_dir,
        on_withdraw=lambda earlier: withdraw_kept_releases(
            earlier, reason="a later run into this --out was refused, its verdict removed"
        ),
    )


def withdraw_remediation_verdict(out_dir: Path) -> None:
    """Withdraw the verdict of an earlier ``gate remediate`` in ``out_dir`` and keep its
    rounds (a command refused for its usage never started: its generators, trained at
    length, stay; a passing round's release is withdrawn, ``kept: false``).

    Raises:
        InputError: another gate run holds the directory, or it is unusable.
    """
    with out_dir_lock(
        out_dir,
        is_own=is_remediation_output,
        is_output=is_remediation_dir,
        on_withdraw=lambda earlier: withdraw_kept_releases(earlier, reason=_USAGE_ERROR),
    ) as out:
        if out.is_dir():
            withdraw_kept_releases(out, reason=_USAGE_ERROR)
            remove_remediation_report(out)


_USAGE_ERROR = "a later gate remediate into this --out was refused for its usage"
