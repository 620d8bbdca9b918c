"""The policy schema extended by plug-ins.

The built-in audits, disclosure classes and membership scorers are fields and union
members of :class:`~gate.policy.models.Policy`. A policy that names a plug-in (an audit
key, a ``class`` or a ``scorer`` the built-ins do not know) is validated against a
subclass of ``Policy`` extended with the plug-ins' own configuration models, so their
settings are checked as strictly as the built-ins' (unknown keys, ranges, YAML paths).
A name nobody registered stays an error ("unknown key" or "unknown class").
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Mapping
from typing import Annotated, Any

from pydantic import Field, create_model

from gate.plugins import AUDITS, DISCLOSURE_CLASSES, MEMBERSHIP_SCORERS
from gate.policy.models import (
    Audits,
    DisclosureAudit,
    EmbeddingScorer,
    MembershipAudit,
    NgramFeatures,
    NgramScorer,
    PiiFeatures,
    PiiScorer,
    Policy,
    SemanticFeatures,
)

_BUILTIN_CLASSES = (NgramFeatures, PiiFeatures, SemanticFeatures)
_BUILTIN_SCORERS = (NgramScorer, PiiScorer, EmbeddingScorer)


def _plugin_names(data: Mapping[str, Any]) -> tuple[tuple[str, ...], ...]:
    """Names in the raw policy that are neither built in nor unknown to every registry."""
    audits = data.get("audits")
    if not isinstance(audits, Mapping):
        return (), (), ()
    audit_names = tuple(
        sorted(n for n in audits if isinstance(n, str) and n not in Audits.model_fields)
    )
    classes: set[Any] = set()
    disclosure = audits.get("disclosure")
    if isinstance(disclosure, Mapping) and isinstance(disclosure.get("features"), list):
        classes = {f.get("class") for f in disclosure["features"] if isinstance(f, Mapping)}
    scorers: set[Any] = set()
    membership = audits.get("membership")
    if isinstance(membership, Mapping) and isinstance(membership.get("scorers"), list):
        scorers = {
            s if isinstance(s, str) else s.get("scorer")
            for s in membership["scorers"]
            if isinstance(s, str | Mapping)
        }
    builtin_classes = {m.model_fields["feature_class"].default for m in _BUILTIN_CLASSES}
    builtin_scorers = {m.model_fields["scorer"].default for m in _BUILTIN_SCORERS}
    known = (
        (audit_names, AUDITS),
        (
            sorted(c for c in classes if isinstance(c, str) and c not in builtin_classes),
            DISCLOSURE_CLASSES,
        ),
        (
            sorted(s for s in scorers if isinstance(s, str) and s not in builtin_scorers),
            MEMBERSHIP_SCORERS,
        ),
    )
    return tuple(tuple(n for n in names if n in registry.names()) for names, registry in known)


def policy_model(data: Mapping[str, Any]) -> type[Policy]:
    """The model to validate ``data`` with: ``Policy`` itself, or ``Policy`` extended by
    the plug-ins ``data`` names (their packages are imported here)."""
    audits, classes, scorers = _plugin_names(data)
    if not (audits or classes or scorers):
        return Policy
    return _extended(audits, classes, scorers)


def _tagged_union(models: tuple[Any, ...], discriminator: str) -> Any:
    """``Annotated[M1 | M2 | ..., Field(discriminator=...)]`` built at run time."""
    return Annotated[functools.reduce(operator.or_, models), Field(discriminator=discriminator)]


@functools.cache
def _extended(
    audits: tuple[str, ...], classes: tuple[str, ...], scorers: tuple[str, ...]
) -> type[Policy]:
    fields: dict[str, Any] = {name: (AUDITS.get(name).config_model | None, None) for name in audits}
    if classes:
        models = (*_BUILTIN_CLASSES, *(DISCLOSURE_CLASSES.get(c).config_model for c in classes))
        features: Any = list.__class_getitem__(_tagged_union(models, "feature_class"))
        disclosure = create_model(
            "DisclosureAudit", __base__=DisclosureAudit, features=(features, Field(min_length=1))
        )
        fields["disclosure"] = (disclosure | None, None)
    if scorers:
        models = (*_BUILTIN_SCORERS, *(MEMBERSHIP_SCORERS.get(s).config_model for s in scorers))
        scorer_tuple: Any = tuple.__class_getitem__((_tagged_union(models, "scorer"), ...))
        membership = create_model(
            "MembershipAudit",
            __base__=MembershipAudit,
            scorers=(scorer_tuple, Field((NgramScorer(),), min_length=1)),
        )
        fields["membership"] = (membership | None, None)
    extended_audits = create_model("Audits", __base__=Audits, **fields)
    return create_model("Policy", __base__=Policy, audits=(extended_audits, ...))
