"""Keep other libraries' chatter (deprecations, future warnings, info logs of MLflow,
Great Expectations, PySpark) out of a user's terminal; ``--verbose`` lets it through."""

from __future__ import annotations

import logging
import warnings

NOISY_LOGGERS = ("mlflow", "alembic", "great_expectations", "py4j", "pyspark", "presidio-analyzer")


def quiet_libraries(*, verbose: bool) -> None:
    if verbose:
        return
    for category in (DeprecationWarning, FutureWarning, PendingDeprecationWarning, UserWarning):
        warnings.filterwarnings("ignore", category=category)
    for name in NOISY_LOGGERS:
        logger = logging.getLogger(name)
        logger.setLevel(max(logging.WARNING, logger.level))
