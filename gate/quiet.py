"""Keep other libraries' chatter (deprecations, future warnings, info logs of MLflow,
Great Expectations, PySpark) out of a user's terminal, and the messages of the warnings
and log records that remain, which may quote records; ``--verbose`` lets it through."""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import warnings
from typing import TextIO

WITHHELD = "its message is withheld, as it may quote records (--verbose shows it)"

NOISY_LOGGERS = (
    "mlflow",
    "alembic",
    "py4j",
    "pyspark",
    "transformers",
    "opacus",
)
# Great Expectations logs its own failures with a traceback; the gate reports every one of
# them in the verdict (an error), so its log adds nothing but noise.
SILENT_LOGGERS = ("great_expectations",)
# Presidio warns once per record about every spaCy entity label it does not map (CARDINAL,
# MONEY, ...): on generated text that is thousands of lines of nothing a user can act on.
# matplotlib warns per font family when its font cache (shared by every installation of
# one user) lists fonts that are gone, and draws the plots with another font all the same.
# urllib3 warns at every retry of a connection (MLflow's client retries a tracking server
# that does not answer up to 7 times); the gate's error says the server cannot be reached.
# MLflow retries a database store (SQLite, PostgreSQL, ...) it cannot open, with a warning of
# its own handler each time (a page before the gate's deadline); the gate says it failed.
ERROR_ONLY_LOGGERS = (
    "presidio-analyzer",
    "matplotlib.font_manager",
    "urllib3",
    "mlflow.store.db.utils",
)


class Py4JRootRecords(logging.Filter):
    """Drops the records Py4J logs through the root logger rather than its own: on every
    Ctrl-C during a call to the JVM, "KeyboardInterrupt while sending command." with a
    traceback. The gate reports the interruption, or the lost connection, itself."""

    PACKAGE = f"{os.sep}py4j{os.sep}"

    def filter(self, record: logging.LogRecord) -> bool:
        return self.PACKAGE not in record.pathname


def _place(filename: str, lineno: int) -> str:
    return f"{os.path.basename(filename)}:{lineno}"


def _withheld_warning(
    message: Warning | str,
    category: type[Warning],
    filename: str,
    lineno: int,
    file: TextIO | None = None,
    line: str | None = None,
) -> None:
    """``warnings.showwarning`` without the message: a plug-in or a library that warns
    with a record's text (a review's judge did) would put it in the CI log."""
    stream = file if file is not None else sys.stderr
    if stream is None:
        return
    with contextlib.suppress(OSError):  # as Python's own: a closed stderr loses the warning
        stream.write(f"gate: a {category.__name__} at {_place(filename, lineno)}; {WITHHELD}\n")


class _Stderr(logging.StreamHandler):
    """A handler on whatever ``sys.stderr`` is when a record comes (as Python's last
    resort is), not on the stream of when it was made."""

    def __init__(self) -> None:
        super().__init__()
        self.setLevel(logging.WARNING)
        self.setFormatter(WithheldMessages())

    def emit(self, record: logging.LogRecord) -> None:
        self.stream = sys.stderr
        super().emit(record)


class WithheldMessages(logging.Formatter):
    """Another library's log record by its level, logger and place, not its message."""

    def format(self, record: logging.LogRecord) -> str:
        return (
            f"gate: {record.levelname.lower()} logged by {record.name} at "
            f"{_place(record.pathname, record.lineno)}; {WITHHELD}"
        )


def quiet_libraries(*, verbose: bool) -> None:
    if verbose:
        return
    for category in (DeprecationWarning, FutureWarning, PendingDeprecationWarning, UserWarning):
        warnings.filterwarnings("ignore", category=category)
    for name in NOISY_LOGGERS:
        logger = logging.getLogger(name)
        logger.setLevel(max(logging.WARNING, logger.level))
    for name in ERROR_ONLY_LOGGERS:
        logger = logging.getLogger(name)
        logger.setLevel(max(logging.ERROR, logger.level))
    for name in SILENT_LOGGERS:
        logging.getLogger(name).setLevel(logging.CRITICAL)
    root = logging.getLogger()
    if not any(isinstance(f, Py4JRootRecords) for f in root.filters):
        root.addFilter(Py4JRootRecords())
    warnings.showwarning = _withheld_warning
    if not root.handlers:
        # warnings and errors on stderr, as Python prints them without a handler but with
        # their message withheld; a handler: a library's logging.basicConfig (Py4J's,
        # Opacus's) is then a no-op (it had put every library's INFO records on the terminal)
        root.addHandler(_Stderr())
