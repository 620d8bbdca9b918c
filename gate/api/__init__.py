"""The gate's library API: what every command runs, callable from Python.

The CLI and notebooks both call :func:`run_gate` (already loaded inputs) or
:func:`check_release` (files in, ``report.json`` out).
"""

from gate.api.check import CheckOutcome, audit_canaries, check_release, run_gate
from gate.api.policy import PolicyValidation, policy_schema, validate_policy
from gate.api.preflight import (
    cache_warnings,
    pii_threshold_warnings,
    precision_warnings,
    split_warnings,
)
from gate.api.remediate import remediate_release
from gate.results import GateResult

__all__ = [
    "CheckOutcome",
    "GateResult",
    "PolicyValidation",
    "audit_canaries",
    "cache_warnings",
    "check_release",
    "pii_threshold_warnings",
    "policy_schema",
    "precision_warnings",
    "remediate_release",
    "run_gate",
    "split_warnings",
    "validate_policy",
]
