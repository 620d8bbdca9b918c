"""A policy's threshold checks as a Great Expectations suite over a one-row metrics batch.

Why a one-row metrics frame with built-in expectations, not custom expectations per audit:
the audits already reduce private text to numbers, so the batch holds nothing private and
neither do the suite nor Data Docs (custom expectations would need the reference data,
which must never enter a suite); built-in expectations serialise, render in Data Docs and
need no plugin code to be trusted by a reviewer. Each check ``metric <= threshold`` is an
``ExpectColumnValuesToBeBetween(max_value=threshold)`` on the column of that metric.

The run is ephemeral (nothing persists unless Data Docs are asked for), and the GX result
decides PASS: it must agree check by check with the gate's own evaluation, or the gate
reports an error (fail closed).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pandas as pd

from gate.imports import imports_blocked
from gate.policy.checks import CheckSpec
from gate.results import SuiteValidation

_LARGE = 1.0e300  # GX results are JSON: an infinite metric becomes a large finite number


def column_name(spec: CheckSpec) -> str:
    return f"{spec.audit}__{spec.metric}".replace(".", "_")


def metrics_frame(values: dict[CheckSpec, float]) -> pd.DataFrame:
    row = {}
    for spec, value in values.items():
        v = float(value)
        row[column_name(spec)] = (
            _LARGE if math.isinf(v) and v > 0 else (-_LARGE if math.isinf(v) else v)
        )
    return pd.DataFrame([row])


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
    values: dict[CheckSpec, float], *, suite_name: str, data_docs_dir: Path | None = None
) -> SuiteValidation:
    """Validate ``metric op threshold`` for every check with GX and return its verdict."""
    gx = _great_expectations()

    if not values:
        raise ValueError("no threshold check to validate")
    context = _context(data_docs_dir)
    source = context.data_sources.add_pandas(name="gate")
    asset = source.add_dataframe_asset(name="audit_metrics")
    batch = asset.add_batch_definition_whole_dataframe("this_run")
    suite = context.suites.add(gx.ExpectationSuite(name=suite_name))
    for spec in values:
        upper = spec.threshold if spec.op == "<=" else None
        lower = spec.threshold if spec.op == ">=" else None
        suite.add_expectation(
            gx.expectations.ExpectColumnValuesToBeBetween(
                column=column_name(spec),
                min_value=lower,
                max_value=upper,
                meta={
                    "audit": spec.audit,
                    "metric": spec.metric,
                    "description": spec.description,
                    "meaning": spec.spec.meaning,
                    "estimator": spec.spec.estimator,
                    "confidence": spec.spec.confidence,
                },
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
    outcome = checkpoint.run(batch_parameters={"dataframe": metrics_frame(values)})
    validation = next(iter(outcome.run_results.values()))
    by_column = {column_name(s): (s.audit, s.metric) for s in values}
    check_success = {
        by_column[r.expectation_config.kwargs["column"]]: bool(r.success)
        for r in validation.results
    }
    index = None
    if data_docs_dir is not None:
        candidate = data_docs_dir / "index.html"
        index = candidate if candidate.exists() else None
    return SuiteValidation(
        success=bool(outcome.success),
        check_success=check_success,
        result=json.loads(json.dumps(validation.to_json_dict(), default=str)),
        suite=json.loads(json.dumps(suite.to_json_dict(), default=str)),
        data_docs_index=index,
    )
