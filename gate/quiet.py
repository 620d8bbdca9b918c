"""Keep other libraries' chatter (deprecations, future warnings, info logs of MLflow,
Great Expectations, PySpark) out of a user's terminal; ``--verbose`` lets it through."""

from __future__ import annotations

import logging
import os
import warnings

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
ERROR_ONLY_LOGGERS = ("presidio-analyzer", "matplotlib.font_manager", "urllib3")


class Py4JRootRecords(logging.Filter):
    """Drops the records Py4J logs through the root logger rather than its own: on every
    Ctrl-C during a call to the JVM, "KeyboardInterrupt while sending command." with a
    traceback. The gate reports the interruption, or the lost connection, itself."""

    PACKAGE = f"{os.sep}py4j{os.sep}"

    def filter(self, record: logging.LogRecord) -> bool:
        return self.PACKAGE not in record.pathname


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
    if not root.handlers and logging.lastResort is not None:
        # what Python prints without a handler (warnings and errors, their message only),
        # as a handler: a library's logging.basicConfig (Py4J's, Opacus's) is then a no-op;
        # it had put every library's INFO records on the terminal
        root.addHandler(logging.lastResort)
