"""``gate policy``: a policy file checked as far as it can be without data, and the
policy's JSON Schema with every installed plug-in's settings.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gate.api.preflight import check_before_work, check_remediation_block, with_engine
from gate.policy.loader import load_policy


@dataclass(frozen=True)
class PolicyValidation:
    """What ``gate policy validate`` found: a policy every command can run."""

    path: str
    name: str
    version: int
    audits: int
    checks: int
    sha256: str
    notes: tuple[str, ...] = ()  # what one command would still ask of it


def policy_schema() -> dict[str, Any]:
    """The policy's JSON Schema with the configuration of every installed plug-in: audits,
    disclosure classes, scorers (:func:`gate.policy.loader.policy_json_schema`) and
    generators (:func:`gate.generators.with_generator_configs`)."""
    from gate.generators import with_generator_configs
    from gate.policy.loader import policy_json_schema

    return with_generator_configs(policy_json_schema())


def validate_policy(path: str | Path, *, engine: str | None = None) -> PolicyValidation:
    """Check a policy file as far as it can be checked without data: the schema, every
    plug-in it names (audits, classes, scorers, the engine, rewrite attacks), the
    generators its audits train and, if it has a ``remediation`` block, the generator and
    settings ``gate remediate`` would train. ``engine`` replaces the policy's engine, as
    ``--engine`` does for ``gate check``.

    Raises:
        InputError: the policy is invalid (the message names the YAML path; exit 2).
        PluginUnavailableError: a plug-in it names cannot be loaded here (exit 3).
    """
    from gate.audits.registry import policy_checks

    loaded = with_engine(load_policy(path), engine, None)  # an engine this installation has
    checks = policy_checks(loaded.policy)
    check_before_work(loaded)
    notes = check_remediation_block(loaded)
    return PolicyValidation(
        path=loaded.path,
        name=loaded.policy.name,
        version=loaded.policy.version,
        audits=len(loaded.policy.audits.enabled()),
        checks=len(checks),
        sha256=loaded.sha256,
        notes=notes,
    )
