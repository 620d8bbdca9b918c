"""A policy's threshold checks as a Great Expectations suite over a one-row metrics batch.

Why a one-row metrics frame with built-in expectations, not custom expectations per audit:
the audits already reduce private text to numbers, so the batch holds nothing private and
neither do the suite nor Data Docs (custom expectations would need the reference data,
which must never enter a suite); built-in expectations serialise, render in Data Docs and
need no plugin code to be trusted by a reviewer. Each check ``metric <= threshold`` is an
``ExpectColumnValuesToNotBeNull`` and an ``ExpectColumnValuesToBeBetween(max_value=threshold)``
on the column of that metric, and each audit has an ``ExpectColumnValuesToBeInSet`` on a
column saying whether it completed: the suite holds every check of the policy, and a check
whose audit did not complete is a missing value, which fails (GX's range expectations skip
missing values, hence the not-null one). So GX succeeds exactly when the gate passes.

The run is ephemeral (nothing persists unless Data Docs are asked for), and the GX result
decides PASS: it must agree check by check with the gate's own evaluation, or the gate
reports an error (fail closed).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from gate.imports import imports_blocked
from gate.policy.checks import CheckSpec
from gate.results import SuiteValidation

_LARGE = 1.0e300  # GX results are JSON: an infinite metric becomes a large finite number
COMPLETED = "completed"


def column_name(spec: CheckSpec) -> str:
    return f"{spec.audit}__{spec.metric}".replace(".", "_")


def completion_column(audit: str) -> str:
    return f"{audit}__completed"


def metrics_frame(
    values: Mapping[CheckSpec, float | None], *, completed: Mapping[str, bool]
) -> pd.DataFrame:
    """The one-row batch: each check's metric (NaN when it was not measured) and each
    audit's completion (``completed`` or ``error``)."""
    row: dict[str, float | str] = {
        completion_column(audit): COMPLETED if done else "error"
        for audit, done in completed.items()
    }
    for spec, value in values.items():
        column = column_name(spec)
        if column in row:
            raise ValueError(f"two checks or audits share the suite column {column!r}")
        if value is None:
            row[column] = math.nan
            continue
        v = float(value)
        row[column] = _LARGE if math.isinf(v) and v > 0 else (-_LARGE if math.isinf(v) else v)
    return pd.DataFrame([row])


# What GX writes into a Data Docs site directory, and how its index page begins.
DATA_DOCS_ENTRIES = frozenset({"index.html", "static", "expectations", "validations"})
_DATA_DOCS_TITLE = b"<title>Data Docs created by Great Expectations</title>"


def is_data_docs_entry(name: str) -> bool:
    """Whether ``name`` is one of the entries of a Data Docs site directory."""
    return name in DATA_DOCS_ENTRIES


def is_data_docs_site(directory: Path) -> bool:
    """Whether ``directory`` is a Data Docs site GX built (by its index page), not a
    user's files of the same names."""
    try:
        with open(directory / "index.html", "rb") as index:
            head = index.read(4096)
    except OSError:
        return False
    entries = [directory / name for name in DATA_DOCS_ENTRIES - {"index.html"}]
    return _DATA_DOCS_TITLE in head and all(e.is_dir() for e in entries if e.exists())


# Optional backends Great Expectations imports when installed (about 0.5 s); the gate
# validates one pandas frame and uses neither (the Spark engine imports PySpark itself).
_GX_UNUSED_BACKENDS = ("sqlalchemy", "pyspark")


def _great_expectations() -> Any:
    with imports_blocked(_GX_UNUSED_BACKENDS):
        import great_expectations

    return great_expectations


def _context(data_docs_dir: Path | None) -> Any:
    gx = _great_expectations()
    from great_expectations.data_context.types.base import ProgressBarsConfig

    context = gx.get_context(mode="ephemeral")
    context.variables.progress_bars = ProgressBarsConfig(globally=False)
    if data_docs_dir is not None:
        context.add_data_docs_site(
            site_name="gate",
            site_config={
                "class_name": "SiteBuilder",
                "store_backend": {
                    "class_name": "TupleFilesystemStoreBackend",
                    "base_directory": str(data_docs_dir.resolve()),
                },
                "site_index_builder": {"class_name": "DefaultSiteIndexBuilder"},
            },
        )
    return context


def validate_checks(
    values: Mapping[CheckSpec, float | None],
    *,
    completed: Mapping[str, bool],
    suite_name: str,
    data_docs_dir: Path | None = None,
) -> SuiteValidation:
    """Validate every check of the policy with GX and return its verdict.

    Args:
        values: each check's measured value; ``None`` when its audit did not complete.
        completed: for every audit the policy runs, whether it ran to completion.
        suite_name: the suite's name (in Data Docs).
        data_docs_dir: if given, GX builds a Data Docs site there.
    """
    gx = _great_expectations()

    if not completed:
        raise ValueError("no audit to validate")
    context = _context(data_docs_dir)
    source = context.data_sources.add_pandas(name="gate")
    asset = source.add_dataframe_asset(name="audit_metrics")
    batch = asset.add_batch_definition_whole_dataframe("this_run")
    suite = context.suites.add(gx.ExpectationSuite(name=suite_name))
    for audit in completed:
        suite.add_expectation(
            gx.expectations.ExpectColumnValuesToBeInSet(
                column=completion_column(audit),
                value_set=[COMPLETED],
                meta={
                    "audit": audit,
                    "description": "the audit ran to completion (its checks are measured)",
                },
            )
        )
    for spec in values:
        meta = {
            "audit": spec.audit,
            "metric": spec.metric,
            "description": spec.description,
            "meaning": spec.spec.meaning,
            "estimator": spec.spec.estimator,
            "confidence": spec.spec.confidence,
        }
        suite.add_expectation(
            gx.expectations.ExpectColumnValuesToNotBeNull(column=column_name(spec), meta=meta)
        )
        suite.add_expectation(
            gx.expectations.ExpectColumnValuesToBeBetween(
                column=column_name(spec),
                min_value=spec.threshold if spec.op == ">=" else None,
                max_value=spec.threshold if spec.op == "<=" else None,
                meta=meta,
            )
        )
    definition = context.validation_definitions.add(
        gx.ValidationDefinition(name=f"{suite_name}-validation", data=batch, suite=suite)
    )
    actions: list[Any] = []
    if data_docs_dir is not None:
        from great_expectations.checkpoint import UpdateDataDocsAction

        actions.append(UpdateDataDocsAction(name="data_docs", site_names=["gate"]))
    checkpoint = context.checkpoints.add(
        gx.Checkpoint(
            name=f"{suite_name}-checkpoint", validation_definitions=[definition], actions=actions
        )
    )
    outcome = checkpoint.run(
        batch_parameters={"dataframe": metrics_frame(values, completed=completed)}
    )
    validation = next(iter(outcome.run_results.values()))
    success_by_column: dict[str, bool] = {}
    for r in validation.results:
        column = r.expectation_config.kwargs["column"]
        success_by_column[column] = success_by_column.get(column, True) and bool(r.success)
    index = None
    if data_docs_dir is not None:
        candidate = data_docs_dir / "index.html"
        index = candidate if candidate.exists() else None
    return SuiteValidation(
        success=bool(outcome.success),
        check_success={(s.audit, s.metric): success_by_column[column_name(s)] for s in values},
        completed={a: success_by_column[completion_column(a)] for a in completed},
        result=json.loads(json.dumps(validation.to_json_dict(), default=str)),
        suite=json.loads(json.dumps(suite.to_json_dict(), default=str)),
        data_docs_index=index,
    )
