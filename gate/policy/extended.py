"""The policy schema extended by plug-ins.

The built-in audits, disclosure classes and membership scorers are fields and union
members of :class:`~gate.policy.models.Policy`. A policy that names a plug-in (an audit
key, a ``class`` or a ``scorer`` the built-ins do not know) is validated against a
subclass of ``Policy`` extended with the plug-ins' own configuration models, so their
settings are checked as strictly as the built-ins' (unknown keys, ranges, YAML paths).
A name nobody registered stays an error ("unknown key" or "unknown class"), and so does
a plug-in named by a plain string (a ``distinguishability`` attack):
:func:`unregistered_names`. A plug-in whose configuration model is unusable is refused
with a message that names it.
"""

from __future__ import annotations

import functools
import operator
import typing
from collections.abc import Mapping
from typing import Annotated, Any

from pydantic import BaseModel, Field, PydanticUserError, create_model

from gate.plugins import AUDITS, DISCLOSURE_CLASSES, MEMBERSHIP_SCORERS, REWRITE_ATTACKS
from gate.policy.models import (
    AuditConfig,
    Audits,
    DisclosureAudit,
    EmbeddingScorer,
    FeatureClassConfig,
    MembershipAudit,
    NgramFeatures,
    NgramScorer,
    PiiFeatures,
    PiiScorer,
    Policy,
    ProfileAudit,
    ScorerConfig,
    SemanticFeatures,
    lax_settings_problem,
)
from gate.registry import PluginUnavailableError, Registry

_BUILTIN_CLASSES = (NgramFeatures, PiiFeatures, SemanticFeatures)
_BUILTIN_SCORERS = (NgramScorer, PiiScorer, EmbeddingScorer)
_BUILTIN_CLASS_NAMES = {m.model_fields["feature_class"].default for m in _BUILTIN_CLASSES}
_BUILTIN_SCORER_NAMES = {m.model_fields["scorer"].default for m in _BUILTIN_SCORERS}


def _names(items: Any, key: str) -> set[str]:
    """String values of ``key`` in a list of mappings (a scorer may also be a bare name)."""
    if not isinstance(items, list | tuple):
        return set()
    found = set()
    for item in items:
        value = (
            item
            if isinstance(item, str)
            else (item.get(key) if isinstance(item, Mapping) else None)
        )
        if isinstance(value, str):
            found.add(value)
    return found


def _plugin_names(data: Mapping[str, Any]) -> tuple[list[str], list[str], list[str]]:
    """Names in the raw policy that are not built in but that some registry knows."""
    audits = data.get("audits")
    if not isinstance(audits, Mapping):
        return [], [], []
    disclosure = audits.get("disclosure")
    classes = _names(
        disclosure.get("features") if isinstance(disclosure, Mapping) else None, "class"
    )
    scorers: set[str] = set()
    for name in ("membership", "profile"):
        block = audits.get(name)
        scorers |= _names(block.get("scorers") if isinstance(block, Mapping) else None, "scorer")
    wanted: tuple[tuple[set[str], Registry[Any]], ...] = (
        ({n for n in audits if isinstance(n, str)} - set(Audits.model_fields), AUDITS),
        (classes - _BUILTIN_CLASS_NAMES, DISCLOSURE_CLASSES),
        (scorers - _BUILTIN_SCORER_NAMES, MEMBERSHIP_SCORERS),
    )
    out: list[list[str]] = []
    for names, registry in wanted:
        known = set(registry.names())
        out.append(sorted(n for n in names if n in known))
    return out[0], out[1], out[2]


def unregistered_names(policy: Policy) -> list[tuple[tuple[int | str, ...], str]]:
    """The YAML path and a message for each plug-in an enabled audit of the validated
    ``policy`` names by a plain string that no registry of this installation knows (the
    rewrite attacks); nothing is imported. (The engine is checked where it is chosen: a
    policy for a cluster's engine may run here with ``--engine local``.)"""
    problems: list[tuple[tuple[int | str, ...], str]] = []
    game = policy.audits.distinguishability
    if game is not None and game.enabled:
        known = REWRITE_ATTACKS.names()
        for i, attack in enumerate(game.attacks):
            if attack not in known:
                problems.append(
                    (
                        ("audits", "distinguishability", "attacks", i),
                        f"no rewrite attack {attack!r} in this installation (available: "
                        f"{', '.join(known)}; `gate audits` lists them)",
                    )
                )
    return problems


def _config_model(registry: Registry[Any], name: str, base: type[BaseModel], tag: str) -> Any:
    """The plug-in's configuration model, checked: a subclass of ``base`` as strict as
    the built-ins' (:func:`~gate.policy.models.lax_settings_problem`) whose ``tag`` field (if
    any) is ``Literal[name]``."""
    model = getattr(registry.get(name), "config_model", None)
    if not (isinstance(model, type) and issubclass(model, base)):
        raise PluginUnavailableError(
            f"{registry.kind} {name!r}: config_model must be a subclass of "
            f"gate.policy.models.{base.__name__}; found {model!r}"
        )
    problem = lax_settings_problem(model)
    if problem is not None:
        raise PluginUnavailableError(f"{registry.kind} {name!r}: {problem}")
    if tag:
        field = model.model_fields[tag]
        if typing.get_origin(field.annotation) is not typing.Literal or typing.get_args(
            field.annotation
        ) != (name,):
            raise PluginUnavailableError(
                f"{registry.kind} {name!r}: its config_model's {tag!r} field must be "
                f"Literal[{name!r}]; found {field.annotation!r}"
            )
    return model


def policy_model(data: Mapping[str, Any]) -> type[Policy]:
    """The model to validate ``data`` with: ``Policy`` itself, or ``Policy`` extended by
    the plug-ins ``data`` names (their packages are imported here).

    Raises:
        PluginUnavailableError: a named plug-in cannot be loaded or its configuration
            model is unusable.
    """
    return _with_plugins(*_plugin_names(data))


def installed_policy_model() -> type[Policy]:
    """``Policy`` extended by every installed plug-in (for ``gate policy schema``).

    Raises:
        PluginUnavailableError: an installed plug-in cannot be loaded or is unusable.
    """
    return _with_plugins(
        sorted(set(AUDITS.names()) - set(Audits.model_fields)),
        sorted(set(DISCLOSURE_CLASSES.names()) - _BUILTIN_CLASS_NAMES),
        sorted(set(MEMBERSHIP_SCORERS.names()) - _BUILTIN_SCORER_NAMES),
    )


def _with_plugins(audits: list[str], classes: list[str], scorers: list[str]) -> type[Policy]:
    """``Policy`` extended by the named plug-ins' checked configuration models."""
    if not (audits or classes or scorers):
        return Policy
    return _extended(
        tuple((n, _config_model(AUDITS, n, AuditConfig, "")) for n in audits),
        tuple(
            _config_model(DISCLOSURE_CLASSES, n, FeatureClassConfig, "feature_class")
            for n in classes
        ),
        tuple(_config_model(MEMBERSHIP_SCORERS, n, ScorerConfig, "scorer") for n in scorers),
    )


def _tagged_union(models: tuple[Any, ...], discriminator: str) -> Any:
    """``Annotated[M1 | M2 | ..., Field(discriminator=...)]`` built at run time."""
    return Annotated[functools.reduce(operator.or_, models), Field(discriminator=discriminator)]


@functools.cache
def _extended(
    audits: tuple[tuple[str, Any], ...], classes: tuple[Any, ...], scorers: tuple[Any, ...]
) -> type[Policy]:
    """Cached by the plug-in models themselves, so a re-registered plug-in gets a new
    schema."""
    fields: dict[str, Any] = {name: (model | None, None) for name, model in audits}
    try:
        if classes:
            features: Any = list.__class_getitem__(
                _tagged_union((*_BUILTIN_CLASSES, *classes), "feature_class")
            )
            disclosure = create_model(
                "DisclosureAudit",
                __base__=DisclosureAudit,
                features=(features, Field(min_length=1)),
            )
            fields["disclosure"] = (disclosure | None, None)
        if scorers:
            scorer_list: Any = list.__class_getitem__(
                _tagged_union((*_BUILTIN_SCORERS, *scorers), "scorer")
            )
            membership = create_model(
                "MembershipAudit",
                __base__=MembershipAudit,
                scorers=(scorer_list, Field(default_factory=lambda: [NgramScorer()])),
            )
            fields["membership"] = (membership | None, None)
            profile = create_model(
                "ProfileAudit",
                __base__=ProfileAudit,
                scorers=(scorer_list, Field(default_factory=lambda: [NgramScorer()])),
            )
            fields["profile"] = (profile | None, None)
        extended_audits = create_model("Audits", __base__=Audits, **fields)
        return create_model("Policy", __base__=Policy, audits=(extended_audits, ...))
    except PydanticUserError as exc:
        raise PluginUnavailableError(
            f"a plug-in's configuration model cannot extend the policy schema: {exc}"
        ) from exc
