"""Audits by name (through :data:`gate.plugins.AUDITS`), and the checks a policy implies."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from gate.audits.base import Audit
from gate.plugins import AUDITS, DISCLOSURE_CLASSES, MEMBERSHIP_SCORERS
from gate.policy.checks import CheckSpec
from gate.policy.models import (
    AuditConfig,
    FeatureClassConfig,
    ScorerConfig,
    lax_settings_problem,
)
from gate.registry import PluginUnavailableError

if TYPE_CHECKING:
    from gate.policy.models import Policy


def create_audit(name: str) -> Audit:
    """A new instance of the audit called ``name``.

    Raises:
        PluginUnavailableError: no such audit, its package fails to import, or what is
            registered is not an audit with a configuration model.
    """
    cls = AUDITS.get(name)
    if not (isinstance(cls, type) and issubclass(cls, Audit)):
        raise PluginUnavailableError(
            f"audit {name!r} is registered as {cls!r}, which is not a gate.audits.base.Audit"
        )
    model = getattr(cls, "config_model", None)
    if not (isinstance(model, type) and issubclass(model, AuditConfig)):
        raise PluginUnavailableError(
            f"audit {name!r}: config_model must be a subclass of "
            f"gate.policy.models.AuditConfig; found {model!r}"
        )
    problem = lax_settings_problem(model)
    if problem is not None:
        raise PluginUnavailableError(f"audit {name!r}: {problem}")
    return cls()


def audit_checks(name: str, config: AuditConfig) -> list[CheckSpec]:
    """The checks of one audit's configuration; each must gate a metric the audit
    declares (else the plug-in is broken, never a pass)."""
    audit = create_audit(name)
    if not isinstance(config, audit.config_model):
        raise PluginUnavailableError(
            f"audit {name!r} expects a {audit.config_model.__name__} configuration; the "
            f"policy gave a {type(config).__name__} (is a plug-in using a reserved name?)"
        )
    checks = audit.checks(config)
    if config.sets_threshold() and not checks:
        raise PluginUnavailableError(
            f"audit {name!r} sets thresholds but its checks() returned none: a policy with "
            "thresholds that check nothing is never a pass"
        )
    declared = audit.declared_metrics(config)
    for check in checks:
        if check.spec.name not in declared or declared[check.spec.name] != check.spec:
            raise PluginUnavailableError(
                f"audit {name!r} checks metric {check.spec.name!r}, which it does not declare"
            )
    return checks


def _nested_models(value: Any) -> list[BaseModel]:
    """``value`` and every pydantic model inside it (fields, lists, tuples, dicts)."""
    if isinstance(value, BaseModel):
        inner = [getattr(value, field) for field in type(value).model_fields]
        return [value, *(m for item in inner for m in _nested_models(item))]
    if isinstance(value, (list, tuple)):
        return [m for item in value for m in _nested_models(item)]
    if isinstance(value, dict):
        return [m for item in value.values() for m in _nested_models(item)]
    return []


def load_named_plugins(policy: Policy) -> None:
    """Load every disclosure class and membership scorer the enabled audits name, so that
    one that cannot be loaded, or a package's plug-in that takes a built-in's name, stops
    the run before any work (and ``gate policy validate`` reports it).

    Raises:
        PluginUnavailableError: as :meth:`gate.registry.Registry.get`.
    """
    for model in _nested_models(list(policy.audits.enabled().values())):
        if isinstance(model, FeatureClassConfig):
            DISCLOSURE_CLASSES.get(model.feature_class)
        elif isinstance(model, ScorerConfig):
            MEMBERSHIP_SCORERS.get(model.scorer)


def policy_checks(policy: Policy) -> list[CheckSpec]:
    """Every threshold check of the enabled audits, in a stable order (after loading
    every plug-in they name: :func:`load_named_plugins`)."""
    load_named_plugins(policy)
    return [
        check
        for name, config in policy.audits.enabled().items()
        for check in audit_checks(name, config)
    ]
