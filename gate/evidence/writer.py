"""Write the evidence of a gate run: report.json, HTML, JUnit, Markdown, witnesses, the GX
validation result and plots; and log all of it to MLflow. Every file is written atomically.
A failure to record evidence turns the verdict into an error (never a pass)."""

from __future__ import annotations

import csv
import glob
import io
import json
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, replace
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from gate.atomic import atomic_write_text, current_umask
from gate.errors import GateError, InputError
from gate.evidence.deadline import with_deadline
from gate.evidence.html import html_report
from gate.evidence.junit import junit_xml
from gate.evidence.markdown import markdown_summary
from gate.evidence.report import REPORT_NAME, jsonable, report_dict
from gate.interrupts import (
    interruption_behind,
    raise_if_interrupted,
    raise_interruption_behind,
)

if TYPE_CHECKING:
    from gate.results import GateResult


@dataclass(frozen=True)
class MlflowSettings:
    enabled: bool
    tracking_uri: str | None = None  # from the CLI; None = environment, policy, default
    timeout: float = 30.0  # seconds the whole MLflow logging may take
    parent_run_id: str | None = None  # nest the gate's run under this run (a remediation round)

    def __post_init__(self) -> None:
        require_mlflow_timeout(self.timeout)


MAX_MLFLOW_SECONDS = 3600.0


def require_mlflow_timeout(seconds: float) -> float:
    """Refuse a logging timeout outside (0, 3600] seconds (NaN included: a run that waits
    forever, or never, for its store)."""
    if not (isinstance(seconds, int | float) and 0 < seconds <= MAX_MLFLOW_SECONDS):
        raise InputError(
            f"mlflow_timeout must be in (0, {MAX_MLFLOW_SECONDS:g}] seconds; found {seconds!r}"
        )
    return float(seconds)


@dataclass(frozen=True)
class DataDocsSite:
    """A Data Docs site GX built into ``staging``, to be put in place at ``target`` with
    the rest of the evidence (``target`` was cleared by :func:`prepare_out_dir`)."""

    staging: Path
    target: Path


@dataclass(frozen=True)
class Evidence:
    result: GateResult
    files: dict[str, Path]
    mlflow_run_id: str | None
    tracking_uri: str | None


_FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def spreadsheet_cell(value: object) -> object:
    """A CSV cell a spreadsheet will not run: text starting like a formula (``=``, ``+``,
    ``-``, ``@``, tab, CR: OWASP's CSV injection) gets a leading ``'``; record ids come
    from whoever wrote the release. Numbers are left as they are."""
    if isinstance(value, str) and value.startswith(_FORMULA_STARTS):
        return "'" + value
    return value


def witnesses_csv(result: GateResult) -> str:
    """The witnesses of every audit, one row each; text cells made spreadsheet-safe."""
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(
        [
            "audit",
            "class",
            "kind",
            "feature",
            "feature_hash",
            "records",
            "source_record_id",
            "user_id",
            "split",
            "synthetic_record_id",
            "score",
        ]
    )
    for name, outcome in result.audits.items():
        if outcome.result is None:
            continue
        for w in outcome.result.witnesses:
            row = [
                name,
                w.feature_class,
                w.kind or "",
                w.feature,
                w.feature_hash,
                w.records,
                w.source_record_id,
                w.user_id,
                w.split,
                w.synthetic_record_id,
                w.score,
            ]
            writer.writerow([spreadsheet_cell(cell) for cell in row])
    return buffer.getvalue()


EVIDENCE_FILES = (
    REPORT_NAME,
    "report.html",
    "junit.xml",
    "summary.md",
    "witnesses.csv",
    "gx-suite.json",
    "gx-validation.json",
    "plots",
)


def is_gate_report_file(name: str) -> bool:
    """Whether ``name`` is one of the files of a ``gate check`` report directory."""
    return name in EVIDENCE_FILES


def is_gate_report_json(path: Path) -> bool:
    """Whether ``path`` is a report a gate command wrote (a JSON object with its schema
    and gate versions), not a user's file of the same name."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError, RecursionError):
        return False
    return isinstance(data, dict) and {"schema_version", "gate_version"} <= data.keys()


def is_gate_report_dir(out: Path) -> bool:
    """Whether the directory ``out`` is an earlier ``gate check`` report: its
    ``report.json`` is one the gate wrote and ``plots/`` holds nothing but PNG files."""
    if not is_gate_report_json(out / REPORT_NAME):
        return False
    plots = out / "plots"
    return not plots.exists() or (
        plots.is_dir() and all(p.is_file() and p.suffix == ".png" for p in plots.iterdir())
    )


class EvidenceWriteError(GateError):
    """The evidence could not be written (a full disk, a read-only directory); exit 3."""


class ForeignFilesError(InputError):
    """``--out`` holds files the command did not write (:func:`check_out_dir`); ``out`` is
    the directory, resolved."""

    def __init__(self, message: str, *, out: Path) -> None:
        super().__init__(message)
        self.out = out


@contextmanager
def out_dir_lock(
    out_dir: Path,
    *,
    is_own: Callable[[str], bool] = is_gate_report_file,
    is_output: Callable[[Path], bool] = is_gate_report_dir,
    option: str = "--out",
    on_withdraw: Callable[[Path], None] | None = None,
) -> Iterator[Path]:
    """Hold ``out_dir`` for one gate run (yields the checked, symlink-resolved path): a
    second run on the same ``--out`` is refused instead of mixing its files or deleting
    this run's staging directory. ``option`` names the directory in messages. A run refused
    for files the command did not write withdraws an earlier output's verdict there, then
    calls ``on_withdraw`` with the directory.

    Raises:
        InputError: another gate run holds the directory, or ``out_dir`` is unusable
            (see :func:`check_out_dir`).
    """
    import fcntl

    try:
        out = check_out_dir(out_dir, is_own=is_own, is_output=is_output, option=option)
    except ForeignFilesError as exc:  # decided again once the lock says no run writes there
        out = exc.out
    lock_path = out.parent / f".{out.name}.gate-lock"  # a name no user file has
    handle = _locked(lock_path, out_dir=out_dir, option=option)
    try:
        foreign: ForeignFilesError | None = None
        try:  # a run that held the lock may have ended meanwhile (its temporary files gone)
            check_out_dir(out_dir, is_own=is_own, is_output=is_output, option=option)
        except ForeignFilesError as exc:
            foreign = exc
        if foreign is not None:
            if _withdraw_earlier_verdict(out, is_own=is_own):
                if on_withdraw is not None:  # what else of the output the verdict approved
                    on_withdraw(out)
                raise InputError(
                    f"{foreign} (the earlier verdict there was removed: a refused run "
                    "leaves none behind)"
                ) from None
            raise foreign
        yield out
    finally:
        lock_path.unlink(missing_ok=True)  # while held: a run that opened it retries
        fcntl.flock(handle, fcntl.LOCK_UN)
        handle.close()


def _locked(lock_path: Path, *, out_dir: Path, option: str) -> IO[str]:
    """The lock file ``lock_path``, open and locked by this process (``flock``). The run
    that holds it removes it at its end, so a lock taken on a file that is no longer at
    ``lock_path`` is let go and the file there locked instead.

    Raises:
        InputError: another gate run holds it, or it cannot be created.
    """
    import fcntl

    while True:
        try:
            lock_path.parent.mkdir(parents=True, exist_ok=True)
            handle = open(lock_path, "a")  # noqa: SIM115 (closed by the caller)
        except OSError as exc:
            raise InputError(
                f"{option} {out_dir}: cannot create {exc.filename or lock_path.parent}: "
                f"{exc.strerror}"
            ) from None
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.close()
            raise InputError(
                f"{option} {out_dir}: another gate run is writing there; wait for it or "
                "choose another directory"
            ) from None
        try:
            if os.fstat(handle.fileno()).st_ino == lock_path.stat().st_ino:
                return handle
        except FileNotFoundError:
            pass  # removed by the run that held it, after this process opened it
        handle.close()


def _withdraw_earlier_verdict(out: Path, *, is_own: Callable[[str], bool]) -> bool:
    """Remove the files of an earlier output of the command in ``out`` (its report, not
    its directories: plots, rounds), leaving the files it did not write; whether there
    were any. A run refused for those files would otherwise leave an earlier PASS in
    place."""
    own = [p for p in out.iterdir() if is_own(p.name) and p.is_file() and not p.is_symlink()]
    if not any(p.suffix == ".json" and is_gate_report_json(p) for p in own):
        return False  # no report the gate wrote (a user's own report.json is not one)
    for path in own:
        path.unlink(missing_ok=True)
    return True


def check_out_dir(
    out_dir: Path,
    *,
    is_own: Callable[[str], bool] = is_gate_report_file,
    is_output: Callable[[Path], bool] = is_gate_report_dir,
    option: str = "--out",
) -> Path:
    """``out_dir`` resolved (a symlink to a directory becomes its target), or InputError
    when the evidence could not be written there: a file, a dangling link, the working
    directory, a mount point (the final rename cannot replace it), a parent that cannot
    be written, or a directory holding anything but an earlier output of the same command
    (a file name ``is_own`` does not accept, or a directory ``is_output`` does not
    recognise by its content: a user's own ``report.json`` is not a gate report).
    ``option`` names the directory in messages."""
    if not str(out_dir).strip():
        raise InputError(f"{option} is empty; give a directory")
    if out_dir.is_symlink() and not out_dir.exists():
        raise InputError(f"{option} {out_dir}: is a link to nothing")
    try:
        out = out_dir.resolve()
    except RuntimeError:  # Python 3.11: a loop of symbolic links on the way
        raise InputError(f"{option} {out_dir}: a loop of symbolic links on the way") from None
    if out.exists() and not out.is_dir():
        raise InputError(f"{option} {out_dir}: exists and is not a directory")
    if out == Path.cwd().resolve() or out.parent == out:
        raise InputError(
            f"{option} {out_dir}: is the working directory or the root; give a directory of its own"
        )
    if out.is_dir() and os.path.ismount(out):
        raise InputError(f"{option} {out_dir}: is a mount point; give a directory inside it")
    parent = out.parent
    while not parent.exists():
        parent = parent.parent
    if not os.access(parent, os.W_OK | os.X_OK):
        raise InputError(f"{option} {out_dir}: cannot write in {parent}")
    if out.is_dir():
        foreign = sorted(p.name for p in out.iterdir() if not is_own(p.name))
        if foreign:
            raise ForeignFilesError(
                f"{option} {out_dir}: the directory holds files that are not this command's "
                "output "
                f"({', '.join(foreign[:3])}{', ...' if len(foreign) > 3 else ''}); choose an "
                "empty or new directory",
                out=out,
            )
        if any(out.iterdir()) and not is_output(out):
            raise InputError(
                f"{option} {out_dir}: the directory holds files of the names this command "
                "writes, but they are not an earlier output of it (its report is not one "
                "the gate wrote, or it holds other files); choose an empty or new directory"
            )
    return out


def prepare_out_dir(out: Path) -> None:
    """Remove the evidence of an earlier run (and what a killed run left beside it) before
    anything else, so that an interrupted or failed run leaves no verdict rather than a
    stale one. Call it under :func:`out_dir_lock` with the path that yielded.

    The earlier report is renamed away in one step (then deleted), so no interruption can
    leave part of it, say an old ``junit.xml`` PASS without its ``report.json``.
    """
    out.parent.mkdir(parents=True, exist_ok=True)
    # the gate's own marker: `.{name}.*.tmp` also matched the live staging directory of a
    # run on another --out whose name starts so (`rep.v2` beside `rep`; a review)
    for stale in out.parent.glob(f".{glob.escape(out.name)}.gate-*.tmp"):
        if stale.is_dir():  # a staging directory of a killed run (the lock says none is live)
            shutil.rmtree(stale, ignore_errors=True)
    if not out.is_dir():
        return
    trash = Path(tempfile.mkdtemp(prefix=f".{out.name}.gate-old-", suffix=".tmp", dir=out.parent))
    os.replace(out, trash / "report")
    shutil.rmtree(trash, ignore_errors=True)


def withdraw_earlier_output(out_dir: Path, **lock: Any) -> None:
    """Remove an earlier run's output from ``out_dir`` now, under :func:`out_dir_lock`
    (``lock``: its keyword arguments), before a command's imports: a Ctrl-C during them
    had left an earlier PASS in place (a review). The command claims the directory again
    for its own run.

    Raises:
        InputError: another gate run holds the directory, or it is unusable.
    """
    with out_dir_lock(out_dir, **lock) as out:
        linked = out.is_dir() and Path(out_dir).absolute() != out
        prepare_out_dir(out)
        if linked:  # empty in its place: the link the user named still names a directory
            out.mkdir(exist_ok=True)


def make_staging_dir(target: Path) -> Path:
    """A new directory beside ``target`` to build its content in before it is put in
    place (:func:`prepare_out_dir` removes those a killed run left)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(
        tempfile.mkdtemp(prefix=f".{target.name}.gate-staging-", suffix=".tmp", dir=target.parent)
    )
    os.chmod(staging, 0o777 & ~current_umask())  # mkdtemp makes it private; a report is not
    return staging


def _write_files(
    result: GateResult, out_dir: Path, plots: list[Path], *, run_id: str | None, uri: str | None
) -> dict[str, Path]:
    """Every evidence file into ``out_dir``; ``report.json`` last."""
    files: dict[str, Path] = {}
    if result.gx is not None:
        files["gx_validation"] = atomic_write_text(
            out_dir / "gx-validation.json", json.dumps(result.gx.result, indent=2) + "\n"
        )
        files["gx_suite"] = atomic_write_text(
            out_dir / "gx-suite.json", json.dumps(result.gx.suite, indent=2) + "\n"
        )
    files["witnesses"] = atomic_write_text(out_dir / "witnesses.csv", witnesses_csv(result))
    files["html"] = atomic_write_text(out_dir / "report.html", html_report(result, plots=plots))
    files["junit"] = atomic_write_text(out_dir / "junit.xml", junit_xml(result))
    files["markdown"] = atomic_write_text(out_dir / "summary.md", markdown_summary(result))
    data = report_dict(result)
    data["evidence"] = {
        "mlflow_run_id": run_id,
        "mlflow_tracking_uri": uri,
        "gx_validation": "gx-validation.json" if result.gx is not None else None,
        "gx_success": None if result.gx is None else result.gx.success,
        "data_docs": None if (docs := published_data_docs(result)) is None else str(docs),
        "files": [*sorted(p.name for p in files.values()), REPORT_NAME],
        "plots": [f"plots/{p.name}" for p in plots],
        "warnings": list(result.evidence_warnings),
    }
    files["report"] = atomic_write_text(
        out_dir / REPORT_NAME,
        json.dumps(jsonable(data), indent=2, allow_nan=False, ensure_ascii=False) + "\n",
    )
    return files


def published_data_docs(result: GateResult) -> Path | None:
    """The index of the Data Docs site the run publishes, if any. A site is published only
    when its verdict is the run's: one whose suite succeeded on a run that ended in an
    error (GX and the gate disagreed, the evidence failed) is withheld."""
    gx = result.gx
    if gx is None or gx.data_docs_index is None:
        return None
    return gx.data_docs_index if gx.success == (result.status == "pass") else None


def _plots(result: GateResult, directory: Path) -> tuple[GateResult, list[Path]]:
    """The plots; a plot that fails is recorded. It never hides a FAIL, and a PASS whose
    evidence is incomplete is an error (fail closed)."""
    from gate.evidence.plots import make_plots

    try:
        return result, make_plots(result, directory)
    except Exception as exc:
        raise_interruption_behind(exc)  # not the plot's failure: the run was interrupted
        problem = f"plots failed: {type(exc).__name__}: {exc}"
        if result.status == "pass":
            return replace(result, status="error", evidence_error=problem), []
        return replace(result, evidence_warnings=(*result.evidence_warnings, problem)), []


def _log_to_mlflow(
    result: GateResult,
    staging: Path,
    plots: list[Path],
    *,
    uri: str,
    timeout: float,
    parent_run_id: str | None = None,
) -> tuple[GateResult, str | None, dict[str, Path], Any]:
    """One MLflow run holding every file, its verdict tags set last; the whole logging
    bounded by ``timeout`` seconds. Returns the result (an error if logging failed), the
    run id, the files written into ``staging`` and the run's log (to withdraw the
    verdict if the evidence cannot be put in place).

    A run the gate stops waiting for is cancelled (it never gets verdict tags) and ended
    FAILED, or KILLED on a signal, best effort.
    """
    from gate.evidence.mlflow_log import GateRunLog

    deadline = time.monotonic() + timeout
    cancelled = threading.Event()
    log: GateRunLog | None = None
    try:
        log = GateRunLog(uri)
        opened = log
        run_id = with_deadline(
            deadline,
            cancelled,
            lambda: opened.open(
                result,
                experiment=result.policy.evidence.mlflow.experiment,
                cancelled=cancelled,
                parent_run_id=parent_run_id,
            ),
        )
        files = _write_files(result, staging, plots, run_id=run_id, uri=uri)
        with_deadline(deadline, cancelled, lambda: opened.finish(result, files, plots, cancelled))
        return result, run_id, files, log
    except Exception as exc:
        cancelled.set()
        if interruption_behind(exc) is not None:  # not the store's failure: interrupted
            _abandon(log, "KILLED")
            raise_interruption_behind(exc)
        hint = (
            " (install gate[evidence], or pass --no-mlflow)" if isinstance(exc, ImportError) else ""
        )
        failed = replace(
            result,
            status="error",
            evidence_error=f"MLflow logging to {uri} failed{hint}: {type(exc).__name__}: {exc}",
        )
        created = None if log is None else log.run_id
        try:
            written = _write_files(failed, staging, plots, run_id=created, uri=uri)
        except BaseException:  # the run is withdrawn all the same, without its files
            _abandon(log, "FAILED")
            raise
        _abandon(log, "FAILED", written)
        return failed, created, written, log
    except BaseException:
        cancelled.set()
        _abandon(log, "KILLED")
        raise


ABANDON_SECONDS = 10.0
# of which waiting for a request the abandoned logging still has in flight; after a signal
# less, so that a CI runner's SIGKILL (GitHub's comes 7.5 s after its SIGTERM) finds the
# run withdrawn
ABANDON_WAIT_SECONDS = 5.0
ABANDON_WAIT_AFTER_SIGNAL_SECONDS = 1.0


def _abandon(log: Any, status: str, replacements: dict[str, Path] | None = None) -> None:
    """End a run the gate gave up on, if the store answers within a few seconds, and
    upload ``replacements`` (the error's evidence files) over those uploaded before. The
    failure that made the gate give up is already the verdict (an error); a store that
    cannot take this either leaves its run unfinished, which is never read as a pass, or
    its files as they were under the run's error tags and status."""
    if log is None or log.run_id is None:
        return
    with suppress(Exception):
        with_deadline(
            time.monotonic() + ABANDON_SECONDS,
            threading.Event(),
            lambda: log.abandon(
                status,
                replacements,
                wait=ABANDON_WAIT_AFTER_SIGNAL_SECONDS
                if status == "KILLED"
                else ABANDON_WAIT_SECONDS,
            ),
        )


def _withdraw_run(
    log: Any, status: str, result: GateResult, problem: str, plots: list[Path], uri: str | None
) -> None:
    """:func:`_abandon` a run that holds the evidence of ``result`` (all of it: MLflow
    logging succeeded) when that evidence could not be put in place: the run's files are
    replaced by those of ``result`` turned into an error by ``problem``."""
    if log is None or log.run_id is None:
        return
    try:
        with tempfile.TemporaryDirectory(prefix="gate-withdrawn-") as directory:
            failed = replace(result, status="error", evidence_error=problem)
            files = _write_files(failed, Path(directory), plots, run_id=log.run_id, uri=uri)
            _abandon(log, status, files)
            return
    except Exception:  # no room for the error's files: the status and tags still withdraw
        _abandon(log, status)


def write_evidence(
    result: GateResult,
    out_dir: Path,
    *,
    mlflow: MlflowSettings,
    data_docs: DataDocsSite | None = None,
    on_placed: Callable[[Path], object] | None = None,
) -> Evidence:
    """Write every evidence file and, if enabled, log them to MLflow.

    The whole set is written into a fresh staging directory next to ``out_dir`` and
    renamed to ``out_dir`` at the end, so an interruption leaves either the complete new
    set or no verdict (``prepare_out_dir`` removed the earlier one). A failure to log or to
    write is an error, never a pass. ``data_docs``, a site GX built during the run, is put
    in place just before ``out_dir`` if :func:`published_data_docs` allows it.
    ``on_placed(out_dir)`` is called once the evidence is in place, also when an
    interruption follows at once (the evidence then stays, and so does its MLflow run).

    Raises:
        EvidenceWriteError: the evidence could not be written; names the path.
    """
    staging = make_staging_dir(out_dir)
    log: Any = None  # the MLflow run's, to withdraw its verdict if the evidence fails
    if data_docs is not None and result.gx is not None and result.gx.data_docs_index:
        index = data_docs.target / result.gx.data_docs_index.relative_to(data_docs.staging)
        result = replace(result, gx=replace(result.gx, data_docs_index=index))
    docs: Path | None = None
    plots: list[Path] = []
    uri: str | None = None
    try:
        result, plots = _plots(result, staging / "plots")
        run_id: str | None = None
        if mlflow.enabled:
            from gate.evidence.mlflow_log import tracking_uri

            uri = tracking_uri(mlflow.tracking_uri, result.policy.evidence.mlflow.tracking_uri)
            result, run_id, files, log = _log_to_mlflow(
                result,
                staging,
                plots,
                uri=uri,
                timeout=mlflow.timeout,
                parent_run_id=mlflow.parent_run_id,
            )
        else:
            files = _write_files(result, staging, plots, run_id=None, uri=None)
        raise_if_interrupted()  # a signal whose exception was dropped: no verdict in place
        docs = published_data_docs(result) if data_docs is not None else None
        if data_docs is not None and docs is not None:
            _swap_into_place(data_docs.staging, data_docs.target)
        _swap_into_place(staging, out_dir)
        if on_placed is not None:
            on_placed(out_dir)
    except OSError as exc:
        where = exc.filename or out_dir
        problem = (
            f"could not write the evidence to {where}: {exc.strerror or exc}; no verdict was "
            "written"
        )
        # the run's verdict tags and files must not outlive the evidence
        _withdraw_run(log, "FAILED", result, problem, plots, uri)
        _withdraw(data_docs, docs)
        raise EvidenceWriteError(problem) from exc
    except Exception as exc:
        problem = f"the evidence could not be put in place: {type(exc).__name__}"
        _withdraw_run(log, "FAILED", result, problem, plots, uri)
        _withdraw(data_docs, docs)
        raise
    except BaseException:
        if not staging.exists():  # renamed to out_dir: the evidence is complete, in place
            if on_placed is not None:
                on_placed(out_dir)
            raise
        _abandon(log, "KILLED")  # at once: its status and error tag withdraw the verdict
        _withdraw(data_docs, docs)
        raise
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)
    moved = {key: out_dir / path.relative_to(staging) for key, path in files.items()}
    if docs is not None:
        moved["data_docs"] = docs
    return Evidence(result, moved, run_id, uri)


def _withdraw(data_docs: DataDocsSite | None, docs: Path | None) -> None:
    """Remove a Data Docs site put in place for evidence that then failed to follow."""
    if data_docs is not None and docs is not None and data_docs.target.is_dir():
        shutil.rmtree(data_docs.target, ignore_errors=True)


def _swap_into_place(staging: Path, out_dir: Path) -> None:
    """Rename the complete staging directory to ``out_dir`` (an empty ``out_dir`` is
    replaced; one that gained files meanwhile is an error)."""
    if out_dir.is_dir():
        out_dir.rmdir()  # OSError if something appeared in it during the run
    os.replace(staging, out_dir)
