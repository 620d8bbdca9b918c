"""SIGTERM and Ctrl-C as the gate handles them: raised where the process is, so that
every context manager cleans up, and remembered, so that a signal raised where an
exception cannot propagate (a finalizer, whose exception Python prints and drops) or
where a library's cleanup replaced it with an error that the gate records (a plot, an
MLflow upload) still withdraws the verdict: the evidence is not put in place and the
command exits 3."""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

_received: list[int] = []  # signals are the main thread's: one memory for the process
_verdicts = threading.local()  # where each thread's command put its verdict


class Terminated(BaseException):
    """SIGTERM, raised where the gate is (an open MLflow run ends KILLED, a half-written
    evidence directory is removed). A BaseException, like KeyboardInterrupt, so that no
    handler of ordinary errors (an audit that failed, a plot that failed) takes it for
    one."""


def terminate(signum: int, frame: object) -> None:
    """The SIGTERM handler: remember the signal, then raise :class:`Terminated`."""
    _received.append(signum)
    raise Terminated(f"terminated by signal {signum}")


def interrupt(signum: int, frame: object) -> None:
    """The SIGINT handler: remember the signal, then raise KeyboardInterrupt, as Python's
    own handler does."""
    _received.append(signum)
    raise KeyboardInterrupt


@contextmanager
def signals_held() -> Iterator[None]:
    """SIGINT and SIGTERM held back while the block runs, and answered at its end by the
    handlers they had: a step that must not be cut halfway (removing an earlier verdict:
    a review's Ctrl-C in it left an earlier PASS while the message said no verdict was
    written). Python runs a signal's handler in the main thread whichever thread the
    signal reaches, so the held handlers are swapped there (a blocked signal mask is one
    thread's, and another thread took the signal: a later review). A signal that is
    ignored or has no Python handler is left as it is. Only for steps that end by
    themselves, briefly."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    held: list[int] = []
    handlers: dict[int, Any] = {
        signum: handler
        for signum in (signal.SIGINT, signal.SIGTERM)
        if callable(handler := signal.getsignal(signum))
    }
    for signum in handlers:
        signal.signal(signum, lambda received, frame: held.append(received))
    try:
        yield
    finally:
        for signum, handler in handlers.items():
            signal.signal(signum, handler)
        if held:
            handlers[held[0]](held[0], None)


def raise_if_interrupted() -> None:
    """Raise the interruption of the first signal that arrived since
    :func:`forget_earlier_run` (KeyboardInterrupt for SIGINT, :class:`Terminated` for the
    others), even one whose exception was dropped or replaced."""
    if not _received:
        return
    if _received[0] == signal.SIGINT:
        raise KeyboardInterrupt
    raise Terminated(f"terminated by signal {_received[0]}")


def forget_earlier_run(*, signals: bool) -> None:
    """Forget the verdict an earlier command of this thread put in place, and with
    ``signals`` the signals received (the main thread's commands only)."""
    _verdicts.placed = None
    if signals:
        _received.clear()


def record_verdict(where: object) -> None:
    """Note that this thread's command has its verdict, complete, in place at ``where``:
    an interruption after this leaves it there, and the message says so."""
    _verdicts.placed = str(where)


def verdict_in_place() -> str | None:
    """Where this thread's command put its verdict (:func:`record_verdict`), if it did."""
    placed: str | None = getattr(_verdicts, "placed", None)
    return placed


def interruption_behind(exc: BaseException) -> BaseException | None:
    """The interruption (Ctrl-C's KeyboardInterrupt, or :class:`Terminated`) that ``exc``
    was raised while handling, if any.

    A library's cleanup that fails replaces the interruption in flight with its own
    error: PySpark's Arrow collect asks the JVM for its job's result in a ``finally``,
    and a Ctrl-C there came back as a Py4JJavaError (seen on a real session). The
    interruption is what happened; the error is its consequence.
    """
    seen: set[int] = set()
    current = exc.__context__
    while current is not None and id(current) not in seen:
        if isinstance(current, KeyboardInterrupt | Terminated):
            return current
        seen.add(id(current))
        current = current.__context__
    return None


def raise_interruption_behind(exc: BaseException) -> None:
    """Raise the interruption ``exc`` was raised while handling (see
    :func:`interruption_behind`), if any; otherwise return."""
    interruption = interruption_behind(exc)
    if interruption is not None:
        raise interruption
