"""Starting and stopping a Spark session for the spark engine (quiet, its JVM's output in
a log file, signals during the JVM's start deferred) and reading what Spark's errors
mean (a lost JVM, memory, the Java exception's cause).
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import signal
import socket
import sys
import tempfile
import threading
import traceback
import uuid
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, TypeVar

from gate.errors import EngineError
from gate.interrupts import signals_held
from gate.quiet import Py4JRootRecords

T = TypeVar("T")


def first_line(exc: BaseException, limit: int = 300) -> str:
    """The first line of an error's message, at most ``limit`` characters (Spark's run
    to stack traces)."""
    text = str(exc).strip()
    line = text.splitlines()[0] if text else type(exc).__name__
    return line if len(line) <= limit else line[: limit - 1] + "…"


def root_cause(exc: BaseException) -> str:
    """What a Java exception says went wrong: the last "Caused by:" of its stack trace (a
    Py4J error's first line is only "An error occurred while calling o51.getResult."),
    else its first line."""
    causes = [
        line.strip()[len("Caused by:") :].strip()
        for line in str(exc).splitlines()
        if line.strip().startswith("Caused by:")
    ]
    return first_line(RuntimeError(causes[-1])) if causes else first_line(exc)


def answered_errors() -> tuple[type[Exception], ...]:
    """The errors of a JVM that answered (PySpark's, and Py4J's Java exceptions where the
    client has Py4J): a failed read or query, not a lost connection."""
    from pyspark.errors import PySparkException

    try:
        from py4j.protocol import Py4JJavaError
    except ImportError:  # a Spark Connect client without Py4J
        return (PySparkException,)
    return (PySparkException, Py4JJavaError)


def lost_jvm(exc: BaseException) -> bool:
    """Py4J's errors other than a Java exception the JVM answered with, or a refused
    connection to the JVM's gateway: the JVM is gone."""
    if isinstance(exc, ConnectionError):
        return True
    if isinstance(exc, answered_errors()):
        return False
    try:
        from py4j.protocol import Py4JError
    except ImportError:  # Spark Connect only: its errors carry their message
        return False
    return isinstance(exc, Py4JError)


# what Spark's answers say when a task or the JVM ran out of memory
OUT_OF_MEMORY_MARKERS = (
    "SparkOutOfMemoryError",
    "java.lang.OutOfMemoryError",
    "UNABLE_TO_ACQUIRE_MEMORY",
)


def out_of_memory(exc: BaseException) -> str | None:
    """The out-of-memory error a Java exception the JVM answered with names, if any."""
    if not isinstance(exc, answered_errors()):
        return None
    text = str(exc)
    return next((marker for marker in OUT_OF_MEMORY_MARKERS if marker in text), None)


def python_worker_died(exc: BaseException) -> bool:
    """Whether a Java exception the JVM answered with says a Python worker of a task died
    (crashed, or killed from outside: the out-of-memory killer)."""
    return isinstance(exc, answered_errors()) and "Python worker exited unexpectedly" in str(exc)


SESSION_DEFAULTS = {
    "spark.driver.memory": "4g",  # local[N] runs the tasks in the driver
    # the driver fetches the datasets' files and the embeddings (3 GB at 1M + 1M + 1M
    # records); its memory is the limit that matters, and its error names it
    "spark.driver.maxResultSize": "0",
}


def default_parallelism(session: Any) -> int:
    """The cores a session's queries run on (Spark's default parallelism). A Spark
    Connect session has no SparkContext to ask: a range without a partition count is
    split into that many partitions (or ``spark.sql.leafNodeDefaultParallelism``, where
    set), so one small query counts them."""
    if not type(session).__module__.startswith("pyspark.sql.connect"):
        return int(session.sparkContext.defaultParallelism)
    from pyspark.sql import functions as F

    spread = session.range(0, 1 << 16).select(F.spark_partition_id().alias("p"))
    return int(spread.agg(F.countDistinct("p")).first()[0])


def _refused_setting(exc: Exception) -> bool:
    """Spark's answer to setting a static or server setting in a session."""
    condition = exc.getCondition() if hasattr(exc, "getCondition") else None
    return condition == "CANNOT_MODIFY_CONFIG" or "Cannot modify the value of" in str(exc)


def start_session(master: str, conf: Mapping[str, str]) -> tuple[Any, Path | None]:
    """A Spark session on ``master`` (``sc://`` = Spark Connect), quiet: no UI or console
    progress bars, Spark's log at ERROR, and the JVM's own output (start-up notices, its
    log) in a log file instead of the user's terminal. Returns the session and the log."""
    from pyspark.sql import SparkSession

    if master.startswith("sc://"):
        _require_answer(master)
        # a session of its own (getOrCreate would hand back the process's default one,
        # a caller's); the server's settings (its memory) are set where it starts, a
        # session's (SQL ones) are this session's alone
        session = SparkSession.builder.remote(master).create()
        for key, value in conf.items():
            try:
                session.conf.set(key, value)
            except Exception as exc:
                session.stop()
                if not _refused_setting(exc):
                    raise
                raise EngineError(
                    f"the policy's engine.spark_conf sets {key!r}, which a Spark Connect "
                    f"session cannot change ({type(exc).__name__}: {first_line(exc)}); set "
                    f"it where the Connect server at {master} is started, and keep in "
                    "spark_conf only settings a session may change (such as spark.sql.*)"
                ) from exc
        return session, None
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = (
        SparkSession.builder.master(master)
        .appName("gate")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
    )
    for key, value in {**SESSION_DEFAULTS, **conf}.items():
        builder = builder.config(key, value)
    received: list[int] = []
    from pyspark import SparkContext

    had_jvm = SparkContext._gateway is not None
    if not had_jvm and "PYSPARK_GATEWAY_PORT" not in os.environ:  # not spark-submit's JVM
        # a job tag is on the JVM thread that submits the job: unpinned, a call takes any
        # of Py4J's connections, and a query that took another thread's ran untagged and
        # uncancelled by a Ctrl-C (a CI run: 200 s); read by PySpark and the JVM at launch
        os.environ["PYSPARK_PIN_THREAD"] = "true"
    with tempfile.NamedTemporaryFile(prefix="gate-spark-", suffix=".log", delete=False) as log:
        saved = os.dup(2)
        try:
            os.dup2(log.fileno(), 2)  # the JVM, started now, inherits this stderr
            with signals_deferred(received):
                session = builder.getOrCreate()
        except Exception as exc:
            _forget_failed_start(stop_jvm=not had_jvm)
            _deliver(received)  # a signal that came during a failed start comes first
            reason = _logged_reason(Path(log.name)) or root_cause(exc)
            raise EngineError(
                f"Spark did not start on master {master!r}: {reason} (Spark's log: {log.name})"
            ) from exc
        except BaseException:  # an interruption PySpark's own SIGINT handler raised
            Path(log.name).unlink(missing_ok=True)
            raise
        finally:
            os.dup2(saved, 2)
            os.close(saved)
    if received:
        # stopped before the signal's handler runs: an interrupted launch orphaned a JVM
        session.stop()
        Path(log.name).unlink(missing_ok=True)
        _deliver(received)
        raise EngineError(f"Spark's start was interrupted by signal {received[0]}")
    session.sparkContext.setLogLevel("ERROR")
    _accumulator_errors_to_log(session.sparkContext, Path(log.name))
    return session, Path(log.name)


def process_session() -> Any:
    """The process's classic Spark session, started by a caller in another thread, or
    None. ``SparkSession.getActiveSession`` asks the JVM thread behind the calling Python
    thread, and with pinned threads (PySpark's default) each Python thread has its own:
    called from a thread other than the caller's, it found no session, and the gate's
    start then took the caller's session as its own (``getOrCreate`` hands back the
    process's), changed its settings and stopped it on close (a review). Not in a process
    a Spark Connect session marks as remote: its local server's own session is no
    caller's."""
    from pyspark import SparkContext
    from pyspark.sql import SparkSession
    from pyspark.sql.utils import is_remote

    if is_remote():
        return None
    session = SparkSession._instantiatedSession
    if SparkContext._active_spark_context is None or session is None:
        return None
    return session if session.sparkContext._jsc is not None else None


def _forget_failed_start(*, stop_jvm: bool) -> None:
    """After a failed start: stop the SparkContext it may have left active (a later
    session in this process would be handed that broken context back) and, if this start
    launched the JVM, end it (PySpark keeps its gateway's JVM for the life of the
    process)."""
    from pyspark import SparkContext

    with contextlib.suppress(Exception):
        if SparkContext._active_spark_context is not None:
            SparkContext._active_spark_context.stop()
    SparkContext._active_spark_context = None
    gateway = SparkContext._gateway
    if not stop_jvm or gateway is None:
        return
    with contextlib.suppress(Exception):
        gateway.shutdown()
    process = getattr(gateway, "proc", None)
    if process is not None:
        with contextlib.suppress(Exception):
            process.kill()
            process.wait(timeout=30)
    SparkContext._gateway = None
    SparkContext._jvm = None


def _accumulator_errors_to_log(context: Any, log: Path) -> None:
    """PySpark's accumulator server (a socketserver thread) prints a traceback on the
    terminal when its connection breaks, as it does when the JVM dies; the gate reports
    a lost JVM itself. The traceback goes to Spark's log, which the error names."""
    server = getattr(context, "_accumulatorServer", None)
    if server is None:
        return

    def handle_error(request: object, client_address: object) -> None:
        try:
            # no O_CREAT: a log the engine removed on a clean close stays removed
            with open(os.open(log, os.O_WRONLY | os.O_APPEND), "a", encoding="utf-8") as out:
                out.write(f"PySpark's accumulator server, a request from {client_address}:\n")
                traceback.print_exc(file=out)
        except OSError:  # a log removed on a clean close, or a full disk
            return

    server.handle_error = handle_error


class Py4JRecordsToLog(Py4JRootRecords):
    """Py4J logs a call whose connection broke ("Exception while sending command.", as
    when the JVM dies mid-answer) and a Ctrl-C during a call with a traceback through the
    root logger, not its own, so an embedding program's terminal showed it beside the
    gate's own error. Added to the root logger while the engine's session runs, it moves
    Py4J's records (those :class:`gate.quiet.Py4JRootRecords` drops) to Spark's log,
    which that error names; other records pass."""

    def __init__(self, log: Path) -> None:
        super().__init__()
        self.log = log
        self._format = logging.Formatter("%(levelname)s Py4J: %(message)s").format

    def filter(self, record: logging.LogRecord) -> bool:
        if super().filter(record):  # not Py4J's
            return True
        # no O_CREAT: a log removed on a clean close stays removed; nor is a full disk an error
        with (
            contextlib.suppress(OSError),
            open(os.open(self.log, os.O_WRONLY | os.O_APPEND), "a", encoding="utf-8") as out,
        ):
            out.write(self._format(record) + "\n")
        return False


CONNECT_PORT = 15002  # Spark Connect's default
CONNECT_TIMEOUT = 10.0  # seconds to open a connection to a Connect server


def _require_answer(master: str) -> None:
    """Open (and close) a TCP connection to the Spark Connect server of ``master``: the
    client retries an unreachable server for about 20 minutes per query (a review's run
    against a closed port took an hour to fail, and its SIGTERM ten minutes more). The
    error names the address only (the URL's parameters may hold a token).

    Raises:
        EngineError: nothing answers at the server's address within
            :data:`CONNECT_TIMEOUT` seconds.
    """
    address = master[len("sc://") :].split("/", 1)[0]
    bracketed = address.endswith("]")  # an IPv6 address without a port
    host, _, port = (
        (address, "", "") if bracketed or ":" not in address else address.rpartition(":")
    )
    host = host.strip("[]") or "localhost"
    try:
        number = int(port) if port else CONNECT_PORT
    except ValueError:
        raise EngineError(
            f"sc://{address}: the Spark Connect port {port!r} is not a number"
        ) from None
    try:
        socket.create_connection((host, number), timeout=CONNECT_TIMEOUT).close()
    except OSError as exc:
        raise EngineError(
            f"no Spark Connect server answers at {host}:{number} (sc://{address}): "
            f"{exc.strerror or type(exc).__name__}; start it, or check engine.spark_master "
            "or --spark-master"
        ) from None


def _logged_reason(log: Path) -> str | None:
    """The first error line of the JVM's start-up log (a bad master URL or memory
    setting is named there only; PySpark's exception says JAVA_GATEWAY_EXITED)."""
    try:
        lines = log.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return None
    found = next((line.strip() for line in lines if _LOGGED_ERROR.search(line)), None)
    return None if found is None else first_line(RuntimeError(found))


_LOGGED_ERROR = re.compile(r"(Exception|Error)(: | in thread)")


def _deliver(received: list[int]) -> None:
    """Raise the first signal noted again, now that its handler may act on it."""
    if received:
        signal.raise_signal(received[0])


@contextlib.contextmanager
def signals_deferred(received: list[int]) -> Iterator[None]:
    """SIGTERM and SIGINT are noted in ``received``, not acted on, while the JVM starts:
    an exception raised inside PySpark's launcher left the JVM running without its parent
    (a reviewer saw it after a SIGTERM 1.6 s into the start). The caller stops the session
    and delivers the signal. A second signal is acted on at once (a start that hangs, a
    YARN queue that is full, can still be interrupted). Python handlers, unlike blocked
    signals, are not inherited by the JVM. A signal handled outside Python is left as it
    is; an ignored one is ignored again afterwards (PySpark's SparkContext installs its
    SIGINT handler, which cancels every job and raises KeyboardInterrupt, over a shell's
    "ignore": a gate run in the background was interrupted by a Ctrl-C meant for the
    foreground). Outside the main thread nothing changes (only it may set handlers)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    handlers = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)}
    previous = {
        s: handler
        for s, handler in handlers.items()
        if handler is not None and handler is not signal.SIG_IGN
    }
    ignored = [s for s, handler in handlers.items() if handler is signal.SIG_IGN]

    def restore() -> None:
        for s, handler in previous.items():
            signal.signal(s, handler)

    def note(signum: int, frame: object) -> None:
        received.append(signum)
        if len(received) > 1:
            restore()
            signal.raise_signal(signum)

    for s in previous:
        signal.signal(s, note)
    try:
        yield
    finally:
        restore()
        for s in ignored:
            signal.signal(s, signal.SIG_IGN)


CANCEL_POLL = 0.2  # seconds between checks of a running action's thread


def _job_tags(session: Any) -> tuple[Callable[[str], Any], ...]:
    """Add, remove and cancel a tag of the calling thread's jobs: the session's operation
    tags on Spark Connect; the SparkContext's job tags otherwise (a classic session's
    ``interruptTag`` cancelled nothing in a session the gate started, checked on a real
    one). A caller's JVM launched without pinned threads (``PYSPARK_PIN_THREAD=false``)
    keeps a tag on the JVM thread of the Py4J connection a call took, and a query whose
    call took another connection runs untagged: there the cancel is the context's every
    job, as PySpark's own Ctrl-C handler does."""
    if type(session).__module__.startswith("pyspark.sql.connect"):
        return session.addTag, session.removeTag, session.interruptTag
    from py4j.clientserver import ClientServer
    from pyspark import SparkContext

    context = session.sparkContext
    if isinstance(SparkContext._gateway, ClientServer):
        return context.addJobTag, context.removeJobTag, context.cancelJobsWithTag

    def cancel_every_job(tag: str) -> None:
        context.cancelJobsWithTag(tag)
        context.cancelAllJobs()

    return context.addJobTag, context.removeJobTag, cancel_every_job


def run_cancellable(session: Any, action: Callable[[], T]) -> T:
    """Run ``action`` (queries of ``session``) in a thread of its own, its jobs tagged,
    while this thread waits: a Ctrl-C or SIGTERM ends the wait at once, the tagged jobs
    are cancelled, again at every poll until the action has stopped (a cancel reaches
    only the jobs running at that instant; the action may start another), and then the
    signal's exception is raised. An action the signal came before the thread's start
    does not run; one that came during the start is answered after it (the action may
    have begun: its jobs are cancelled). A second signal is raised at once.

    Waited for in place, a signal went unanswered until the query ended: PySpark's Arrow
    collect (``toArrow``, ``toPandas``) reads the JVM's answer in pyarrow's C++ code,
    which retries a read that a signal interrupted. A Ctrl-C during a step of minutes did
    nothing for minutes, and a supervisor's SIGTERM was followed by its SIGKILL, which
    leaves the session's shuffle files (texts) behind. The wait is on an event, not
    ``Thread.join``: on Python 3.11 and 3.12 a join that a signal interrupted marks the
    thread stopped while it still runs.

    Raises:
        EngineError: the thread ended without running the action (its start failed).
    """
    from pyspark import InheritableThread

    tag = f"gate-{uuid.uuid4().hex}"
    add_tag, remove_tag, cancel_tag = _job_tags(session)
    outcome: list[Any] = []
    failure: list[BaseException] = []
    interrupted = threading.Event()
    done = threading.Event()

    def tagged() -> None:
        try:
            if interrupted.is_set():
                return
            add_tag(tag)
            outcome.append(action())
            remove_tag(tag)  # after a failure, the thread's end drops it
        except BaseException as exc:  # handed to the waiting thread, which raises it
            failure.append(exc)
        finally:
            done.set()

    worker = InheritableThread(tagged, session=session, name="gate-spark-step", daemon=True)
    try:
        # the start copies this thread's Spark properties through Py4J: a signal answered
        # in that call by PySpark's own handler (a caller's session) would call the JVM
        # on the connection still reading, and fail as a lost JVM (a review)
        with signals_held():
            worker.start()
        while worker.is_alive() and not done.is_set():
            done.wait(CANCEL_POLL)
    except BaseException:
        interrupted.set()
        # the interruption in flight is what is raised, even where Spark cannot be reached
        while worker.is_alive() and not done.wait(CANCEL_POLL):
            with contextlib.suppress(Exception):
                cancel_tag(tag)
        raise
    if failure:
        raise failure[0]
    if not outcome:
        raise EngineError("a Spark step's thread ended before its queries ran")
    return outcome[0]


# set for the whole process when a session starts (Spark Connect marks the process as
# remote; workers run on PYSPARK_PYTHON; a JVM the gate launches pins Python threads to
# JVM threads); close() restores them
SESSION_ENVIRON = (
    "SPARK_CONNECT_MODE_ENABLED",
    "SPARK_REMOTE",
    "PYSPARK_PYTHON",
    "PYSPARK_PIN_THREAD",
)
