"""The gate's plug-in registries: every pluggable part is found through one of these.

- ``AUDITS`` (entry-point group ``gate.audits``): subclasses of ``gate.audits.base.Audit``;
- ``DISCLOSURE_CLASSES`` (``gate.disclosure_classes``): subclasses of
  ``gate.audits.feature_store.DisclosureClass``;
- ``MEMBERSHIP_SCORERS`` (``gate.membership_scorers``): subclasses of
  ``gate.audits.membership.MembershipScorer``;
- ``REWRITE_ATTACKS`` (``gate.rewrite_attacks``): subclasses of
  ``gate.audits.distinguishability.RewriteAttack``;
- ``GENERATORS`` (``gate.generators``): subclasses of ``gate.generators.base.Generator``;
- ``ENGINES`` (``gate.engines``): subclasses of ``gate.engines.base.Engine``.

Each plug-in carries its typed configuration model (``config_model``), which the policy
loader uses to validate the policy's block for it. Built-ins are imported lazily.
"""

from __future__ import annotations

from typing import Any

from gate.registry import Registry

AUDITS: Registry[Any] = Registry(
    "audit",
    group="gate.audits",
    builtins={
        "disclosure": "gate.audits.disclosure",
        "membership": "gate.audits.membership",
        "profile": "gate.profile.audit",
        "distinguishability": "gate.audits.distinguishability",
        "canary": "gate.canary.audit",
    },
)

DISCLOSURE_CLASSES: Registry[Any] = Registry(
    "disclosure class",
    group="gate.disclosure_classes",
    builtins={
        "ngram": "gate.audits.feature_classes",
        "pii": "gate.audits.feature_classes",
        "semantic": "gate.audits.feature_classes",
    },
)

MEMBERSHIP_SCORERS: Registry[Any] = Registry(
    "membership scorer",
    group="gate.membership_scorers",
    builtins={
        "ngram": "gate.audits.membership",
        "pii": "gate.audits.membership",
        "embedding": "gate.audits.membership",
    },
)

REWRITE_ATTACKS: Registry[Any] = Registry(
    "rewrite attack",
    group="gate.rewrite_attacks",
    builtins={
        "embedding": "gate.audits.distinguishability",
        "lexical": "gate.audits.distinguishability",
        "judge": "gate.audits.distinguishability",
    },
)

GENERATORS: Registry[Any] = Registry(
    "generator",
    group="gate.generators",
    builtins={"reference": "gate.generators.reference"},
)

ENGINES: Registry[Any] = Registry(
    "engine",
    group="gate.engines",
    builtins={"local": "gate.engines.local", "spark": "gate.engines.spark"},
)
