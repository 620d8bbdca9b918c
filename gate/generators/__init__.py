"""Generators the remediation loop trains and samples: the plug-in interface
(:mod:`gate.generators.base`), the reference generator (:mod:`gate.generators.reference`)
and :func:`resolve_generator`, which finds one by registry name or ``module:Class``."""

from __future__ import annotations

import importlib
from typing import Any

from gate.errors import InputError
from gate.generators.base import Generator
from gate.plugins import GENERATORS
from gate.policy.models import lax_settings_problem
from gate.registry import PluginUnavailableError

__all__ = ["Generator", "resolve_generator", "with_generator_configs"]


def resolve_generator(spec: str, *, where: str = "remediation.generator") -> type[Generator[Any]]:
    """The generator class named by ``spec``: a registered name (built-in ``reference`` or
    an entry point in ``gate.generators``) or an import path ``module:Class``.

    Raises:
        InputError: no such generator, or the import path is not a Generator subclass
            with settings as strict as the policy's (exit 2).
        PluginUnavailableError: a registered generator whose package fails to import,
            that is not a Generator subclass or whose settings accept unknown keys
            (exit 3).
    """
    if ":" not in spec:
        if spec not in GENERATORS.names():
            raise InputError(
                f"{where}: unknown generator {spec!r} (available: "
                f"{', '.join(GENERATORS.names())}; or give an import path module:Class)"
            )
        found: Any = GENERATORS.get(spec)
    else:
        module_name, _, attribute = spec.partition(":")
        try:
            module = importlib.import_module(module_name)
        except ImportError as exc:
            raise InputError(f"{where}: cannot import module {module_name!r}: {exc}") from exc
        found = getattr(module, attribute, None)
        if found is None:
            raise InputError(f"{where}: module {module_name!r} has no attribute {attribute!r}")
    if not (isinstance(found, type) and issubclass(found, Generator)):
        message = f"{where}: {spec!r} is not a subclass of gate.generators.base.Generator"
        if ":" not in spec:  # a registered plug-in that is broken, not a bad setting
            raise PluginUnavailableError(f"{message} (the installed plug-in is unusable)")
        raise InputError(message)
    problem = lax_settings_problem(found.config_model)
    if problem is not None:
        message = f"{where}: generator {spec!r}: {problem}"
        if ":" not in spec:
            raise PluginUnavailableError(message)
        raise InputError(message)
    return found


def with_generator_configs(schema: dict[str, Any]) -> dict[str, Any]:
    """The policy JSON Schema ``schema`` with every installed generator's settings: each
    block that has a ``generator`` and a ``generator_config`` checks the latter against
    the configuration model of the generator it names (JSON Schema ``if``/``then``; a
    block's default generator when it names none; an import path ``module:Class`` stays
    free-form).

    Raises:
        PluginUnavailableError: an installed generator cannot be loaded or is unusable.
    """
    defs: dict[str, Any] = schema.setdefault("$defs", {})
    configs: dict[str, dict[str, Any]] = {}
    for name in GENERATORS.names():
        model = resolve_generator(name, where=f"generator {name!r}").config_model
        config = model.model_json_schema(by_alias=True, ref_template="#/$defs/{model}")
        for key, nested in config.pop("$defs", {}).items():
            if defs.setdefault(key, nested) != nested:
                raise PluginUnavailableError(
                    f"generator {name!r}: its settings define {key!r}, which the policy "
                    "schema defines otherwise; rename that model"
                )
        key = f"GeneratorConfig[{name}]"
        defs[key] = config
        configs[name] = {"properties": {"generator_config": {"$ref": f"#/$defs/{key}"}}}
    for block in defs.values():
        properties = block.get("properties", {})
        if "generator" not in properties or "generator_config" not in properties:
            continue
        rules = [
            {
                "if": {"properties": {"generator": {"const": name}}, "required": ["generator"]},
                "then": then,
            }
            for name, then in configs.items()
        ]
        default = properties["generator"].get("default")
        if default in configs:
            rules.append({"if": {"not": {"required": ["generator"]}}, "then": configs[default]})
        block["allOf"] = rules
    return schema
