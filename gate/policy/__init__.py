"""Policies: schema, loading with YAML-path errors, and threshold checks."""

from gate.policy.checks import CheckResult, CheckSpec, evaluate_check
from gate.policy.loader import (
    LoadedPolicy,
    effective_policy_yaml,
    load_policy,
    parse_policy,
    policy_json_schema,
)
from gate.policy.models import Policy

__all__ = [
    "CheckResult",
    "CheckSpec",
    "LoadedPolicy",
    "Policy",
    "effective_policy_yaml",
    "evaluate_check",
    "load_policy",
    "parse_policy",
    "policy_json_schema",
]
