"""SIGTERM as the gate handles it: raised where the process is, so that every context
manager cleans up, and remembered, so that a signal raised where an exception cannot
propagate (a finalizer, whose exception Python prints and drops) still withdraws the
verdict: the evidence is not put in place and the command exits 3."""

from __future__ import annotations

_received: list[int] = []


class Terminated(BaseException):
    """SIGTERM, raised where the gate is (an open MLflow run ends KILLED, a half-written
    evidence directory is removed). A BaseException, like KeyboardInterrupt, so that no
    handler of ordinary errors (an audit that failed, a plot that failed) takes it for
    one."""


def terminate(signum: int, frame: object) -> None:
    """The SIGTERM handler: remember the signal, then raise :class:`Terminated`."""
    _received.append(signum)
    raise Terminated(f"terminated by signal {signum}")


def raise_if_terminated() -> None:
    """Raise :class:`Terminated` if a signal arrived since :func:`forget_signals`, even
    one whose exception was dropped."""
    if _received:
        raise Terminated(f"terminated by signal {_received[0]}")


def forget_signals() -> None:
    _received.clear()


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
