"""Calls to a tracking store bounded in time: an unreachable server must not hold the gate
for minutes (MLflow's HTTP client retries with backoff for about four)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")


def with_deadline(deadline: float, cancelled: threading.Event, work: Callable[[], T]) -> T:
    """``work()`` in a daemon thread; TimeoutError (and ``cancelled`` set) if it is not
    done by ``deadline`` (``time.monotonic()``)."""
    outcome: dict[str, Any] = {}

    def target() -> None:
        try:
            outcome["value"] = work()
        except BaseException as exc:
            outcome["error"] = exc

    thread = threading.Thread(target=target, name="gate-mlflow", daemon=True)
    thread.start()
    thread.join(max(0.0, deadline - time.monotonic()))
    if thread.is_alive():
        cancelled.set()
        raise TimeoutError("the tracking store did not answer within the MLflow deadline")
    if "error" in outcome:
        raise outcome["error"]
    value: T = outcome["value"]
    return value
