"""Load a policy file: strict YAML (``yaml.safe_load`` semantics with YAML 1.2's numbers and
booleans, duplicate keys rejected)
into :class:`~gate.policy.models.Policy`, with errors that name the file, line and YAML path."""

from __future__ import annotations

import copy
import difflib
import hashlib
import json
import math
import re
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from gate.errors import PolicyError, SettingError
from gate.policy.extended import installed_policy_model, policy_model, unregistered_names
from gate.policy.models import Policy

MAX_POLICY_BYTES = 1 << 20


@dataclass(frozen=True)
class LoadedPolicy:
    """A validated policy with the fingerprint of the file it came from."""

    policy: Policy
    path: str
    sha256: str


class _UniqueKeyLoader(yaml.SafeLoader):
    """SafeLoader that rejects duplicate mapping keys (a silently shadowed threshold
    would weaken the gate without anyone noticing)."""


def _construct_mapping(loader: _UniqueKeyLoader, node: yaml.MappingNode, deep: bool = False):
    seen: dict[Any, yaml.Node] = {}
    for key_node, _ in node.value:
        if key_node.tag == "tag:yaml.org,2002:merge":
            raise yaml.constructor.ConstructorError(
                None,
                None,
                "merge keys (<<) are YAML 1.1 and not read in a policy; write the keys out",
                key_node.start_mark,
            )
        if not isinstance(key_node, yaml.ScalarNode):  # unhashable: a review saw exit 3
            raise yaml.constructor.ConstructorError(
                None,
                None,
                "a key must be a plain name, not a mapping or a list",
                key_node.start_mark,
            )
        key = loader.construct_object(key_node, deep=deep)
        if key in seen:
            raise yaml.constructor.ConstructorError(
                None,
                None,
                f"duplicate key {key!r} (first at line {seen[key].start_mark.line + 1})",
                key_node.start_mark,
            )
        seen[key] = key_node
    return loader.construct_mapping(node, deep=deep)


_UniqueKeyLoader.add_constructor(
    yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG,
    _construct_mapping,
)
# Numbers are YAML 1.2's (core schema). PyYAML reads YAML 1.1's: 1e-6 and 1.0e9 as strings
# (an exponent needs a dot and a sign there), 010 as 8 (octal), 1:00 as 60 (sexagesimal: a
# threshold that never fails), 1_000 as 1000 and 0b1000 as 8. In YAML 1.2 the first are
# numbers, 010 is 10, and the others are strings, which the models refuse.
_INT_12 = re.compile(r"^(?:[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)$")
_FLOAT_12 = re.compile(
    r"^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?"
    r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$"
)
_NUMBER_START = list("-+.0123456789")


def _construct_int(loader: yaml.SafeLoader, node: yaml.ScalarNode) -> int:
    text = str(loader.construct_scalar(node))
    if not _INT_12.match(text):
        raise yaml.constructor.ConstructorError(
            None, None, f"{text!r} is not a YAML 1.2 integer", node.start_mark
        )
    if text.startswith(("0o", "0x")):
        return int(text[2:], 8 if text[1] == "o" else 16)
    return int(text, 10)


def _construct_float(loader: yaml.SafeLoader, node: yaml.ScalarNode) -> float:
    text = str(loader.construct_scalar(node))
    if not _FLOAT_12.match(text):
        raise yaml.constructor.ConstructorError(
            None, None, f"{text!r} is not a YAML 1.2 number", node.start_mark
        )
    lowered = text.lower()
    if lowered.endswith(".inf"):
        return -math.inf if lowered.startswith("-") else math.inf
    return math.nan if lowered == ".nan" else float(text)


class _PolicyDumper(yaml.SafeDumper):
    """SafeDumper that quotes what the policy loader would read as a number (and, for
    readers of YAML 1.1, what PyYAML would)."""


_NUMBER_TAGS = ("tag:yaml.org,2002:int", "tag:yaml.org,2002:float")
_UniqueKeyLoader.yaml_implicit_resolvers = {
    first: [(tag, rx) for tag, rx in resolvers if tag not in _NUMBER_TAGS]
    for first, resolvers in _UniqueKeyLoader.yaml_implicit_resolvers.items()
}
for _resolving in (_UniqueKeyLoader, _PolicyDumper):
    _resolving.add_implicit_resolver(_NUMBER_TAGS[0], _INT_12, _NUMBER_START)
    _resolving.add_implicit_resolver(_NUMBER_TAGS[1], _FLOAT_12, _NUMBER_START)
_UniqueKeyLoader.add_constructor(_NUMBER_TAGS[0], _construct_int)
_UniqueKeyLoader.add_constructor(_NUMBER_TAGS[1], _construct_float)
# YAML 1.1 (PyYAML) also reads yes/no/on/off as booleans: `enabled: off` would disable an
# audit. YAML 1.2 knows true and false only; the others stay strings, which the models
# refuse. (The dumper keeps quoting them, for readers of YAML 1.1.)
_UniqueKeyLoader.yaml_implicit_resolvers = {
    first: [(tag, rx) for tag, rx in resolvers if tag != "tag:yaml.org,2002:bool"]
    for first, resolvers in _UniqueKeyLoader.yaml_implicit_resolvers.items()
}
_BOOLEANS = {
    spelling: value
    for value in (True, False)
    for spelling in (str(value).lower(), str(value), str(value).upper())
}
_UniqueKeyLoader.add_implicit_resolver(
    "tag:yaml.org,2002:bool", re.compile(f"^(?:{'|'.join(_BOOLEANS)})$"), list("tTfF")
)


def _construct_bool(loader: yaml.SafeLoader, node: yaml.ScalarNode) -> bool:
    text = str(loader.construct_scalar(node))
    if text not in _BOOLEANS:  # `!!bool x` (PyYAML's own constructor raised a KeyError)
        raise yaml.constructor.ConstructorError(
            None, None, f"{text!r} is not a YAML 1.2 boolean", node.start_mark
        )
    return _BOOLEANS[text]


def _refuse_tag(loader: yaml.SafeLoader, node: yaml.Node) -> None:
    tag = node.tag.replace("tag:yaml.org,2002:", "!!")
    raise yaml.constructor.ConstructorError(
        None, None, f"{tag} is a tag of YAML 1.1, not read in a policy", node.start_mark
    )


_UniqueKeyLoader.add_constructor("tag:yaml.org,2002:bool", _construct_bool)
# YAML 1.1's timestamps and its `=` (the "value" key) are no types of YAML 1.2:
# `description: 2026-11-29` is a string (PyYAML made it a date, which the models refused
# as "not a valid string"), and so is `=`.
_YAML_11_ONLY = ("tag:yaml.org,2002:timestamp", "tag:yaml.org,2002:value")
_UniqueKeyLoader.yaml_implicit_resolvers = {
    first: [(tag, rx) for tag, rx in resolvers if tag not in _YAML_11_ONLY]
    for first, resolvers in _UniqueKeyLoader.yaml_implicit_resolvers.items()
}
# Written as explicit tags, YAML 1.1's types are refused by name: a review's `!!set x:` and
# `!!timestamp x:` keys ended in a TypeError and an AttributeError (exit 3).
for _tag in ("timestamp", "set", "omap", "pairs", "binary", "value"):
    _UniqueKeyLoader.add_constructor(f"tag:yaml.org,2002:{_tag}", _refuse_tag)


class _AliasLocatingLoader(_UniqueKeyLoader):
    """:class:`_UniqueKeyLoader` composing each use of an alias as a copy of its anchor's
    node that holds the alias's line (``alias_line``), so that an error is located where
    the alias is written, not only at its anchor (the copy shares the anchor's children)."""

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node | None:
        if not self.check_event(yaml.AliasEvent):
            return super().compose_node(parent, index)
        line = self.peek_event().start_mark.line + 1
        used = copy.copy(super().compose_node(parent, index))
        setattr(used, "alias_line", line)  # noqa: B010 (yaml.Node declares no such field)
        return used


def _written_line(node: yaml.Node) -> int:
    """The line ``node`` is written at: its alias's, if it is one."""
    alias_line: int | None = getattr(node, "alias_line", None)
    return node.start_mark.line + 1 if alias_line is None else alias_line


def _compose_for_locating(text: str) -> yaml.Node | None:
    return yaml.compose(text, Loader=_AliasLocatingLoader)


_BARE_KEY = re.compile(r"[^\W\d][\w-]*")


def _reads_back_bare(key: str) -> bool:
    """Whether ``key`` written unquoted is a plain name the policy loader reads as this
    string (not ``true`` or ``null``, which its resolvers read as other types)."""
    tag = _UniqueKeyLoader("").resolve(yaml.ScalarNode, key, (True, False))
    return bool(_BARE_KEY.fullmatch(key)) and tag == "tag:yaml.org,2002:str"


def format_yaml_path(loc: tuple[int | str, ...]) -> str:
    """``('audits', 'disclosure', 'features', 1, 'n_max')`` becomes
    ``audits.disclosure.features[1].n_max``. A string key that YAML would not read back as
    that string unquoted, or that holds a ``.`` or brackets, is quoted as YAML quotes it
    (``audits.'1'``, ``a.'b.c'``), so that it differs from the key ``1`` and from a path
    (both printed ``audits.1``); a key YAML reads as no string
    (:class:`NonStringKey`) is written as the file writes it, in brackets where it holds
    a ``.`` or brackets (``audits[1.5]``, not ``audits.1.5``, the key ``5`` in the key
    ``1``; a list's index is an integer)."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
            continue
        if isinstance(part, NonStringKey) and any(c in part for c in ".[]"):
            out += f"[{part}]"
            continue
        if not isinstance(part, NonStringKey) and not _reads_back_bare(part):
            printable = part.isprintable()  # else YAML's double quotes, escapes as JSON's
            part = "'" + part.replace("'", "''") + "'" if printable else json.dumps(part)
        out += f".{part}" if out else part
    return out or "(top level)"


def _key_part(error: Mapping[str, Any]) -> int | None:
    """The index of the part of a pydantic error's location that names a key refused as a
    key (a key that is no string): the last part of an ``invalid_key`` error, or the part
    before a ``dict[str, ...]`` field's ``[key]``; None for an error on a value."""
    loc = error["loc"]
    if error["type"] == "invalid_key" and loc:
        return len(loc) - 1
    if len(loc) >= 2 and loc[-1] == "[key]":
        return len(loc) - 2
    return None


def _input_path(
    loc: tuple[int | str, ...],
    data: Any,
    *,
    key_at: int | None = None,
    key_indexes: dict[int, _NonStringKeys] | None = None,
) -> tuple[int | str, ...]:
    """Drop the parts of a pydantic error location that are not keys of the input
    (union tags such as 'ngram', validator names) so the path is the user's YAML path.

    pydantic names a key that is no string by its text (``1.5`` as '1.5', ``~`` as
    'None'), as it names the string key beside it. Only the part that names a key refused
    as a key (``key_at``, :func:`_key_part`) is such a key where its string twin stands
    beside it. A union's tag comes right after the entry it chooses the branch of, so a
    key of the entry named like the tag (``ngram:`` in an entry of class ngram) is still
    a key. ``key_indexes`` keeps each mapping's keys that are no strings indexed across
    the calls for one ``data``."""
    path: list[int | str] = []
    node = data
    entered = True  # no part has been read in ``node`` yet
    for i, part in enumerate(loc):
        if isinstance(node, dict) and entered and part in (node.get("class"), node.get("scorer")):
            entered = False
            continue
        entered = True
        string_key = isinstance(part, str) and isinstance(node, dict) and part in node
        keys = []
        if isinstance(node, dict) and (i == key_at or not string_key):
            index = None if key_indexes is None else key_indexes.get(id(node))
            if index is None:
                index = _NonStringKeys(node)
                if key_indexes is not None:
                    key_indexes[id(node)] = index
            keys = index.find(part)
        if keys:
            path.append(NonStringKey(_yaml_spelling(keys[0])))
            node = node[keys[0]]
        elif isinstance(node, dict) and part in node:
            path.append(part)
            node = node[part]
        elif isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node):
            path.append(part)
            node = node[part]
        elif isinstance(node, dict) and isinstance(part, str) and not path_is_tag(part, node):
            path.append(part)  # a missing or unknown key: still the user's path
            node = None
        # else: a union tag or validator name; skip it
    return tuple(path)


class _NonStringKeys:
    """The keys of a mapping that are no strings (``true``, ``1``, ``null``), indexed by
    how pydantic names them (``true`` as 1, ``null`` as 'None'). A review found ``true:``
    shown as a list's ``[1]``; another, 8,000 float keys placed in 31 s when every key was
    compared with every error's part."""

    def __init__(self, node: dict[Any, Any]) -> None:
        self.by_text: dict[str, list[Any]] = {}
        self.by_value: dict[Any, list[Any]] = {}
        for key in node:
            if not isinstance(key, str):
                self.by_text.setdefault(str(key), []).append(key)
                self.by_value.setdefault(key, []).append(key)

    def find(self, part: int | str) -> list[Any]:
        """The keys pydantic names ``part``: by their text, or an integer by value."""
        if isinstance(part, str):
            return self.by_text.get(part, [])
        return self.by_value.get(part, [])


class NonStringKey(str):
    """A path part that is a mapping key YAML reads as no string (``true``, ``1``,
    ``null``), spelled as YAML writes it: matched only by such a key, never by its quoted
    twin (``'1'`` beside ``1``: a review)."""


def _yaml_spelling(key: Any) -> str:
    """A mapping key as YAML writes it: ``true``, ``1``, ``null``, ``1.5``."""
    return str(yaml.safe_dump(key).split("\n", 1)[0])


def path_is_tag(part: str, node: dict[str, Any]) -> bool:
    return (
        part in (node.get("class"), node.get("scorer"))
        or "[" in part
        or part.startswith("function-")
    )


class _MappingKeys:
    """The keys of one mapping node, indexed the three ways a path part names a key, each
    by its first occurrence: a string key by its text; any other key (``1``, ``null``,
    ``True``) by the scalar YAML reads, as pydantic names it (1, 'None') or as
    ``_input_path`` spells it (a :class:`NonStringKey`). A review found such keys reported
    at their parent's line; indexing once keeps placing N errors linear (matching every
    key against every error took 39 s for 8,000 unknown keys)."""

    def __init__(self, node: yaml.MappingNode) -> None:
        self.by_text: dict[str, tuple[yaml.Node, yaml.Node]] = {}
        self.by_spelling: dict[str, tuple[yaml.Node, yaml.Node]] = {}
        self.by_name: dict[str, tuple[yaml.Node, yaml.Node]] = {}
        for pair in node.value:
            key = pair[0]
            if not isinstance(key, yaml.ScalarNode):
                continue
            if key.tag == "tag:yaml.org,2002:str":
                self.by_text.setdefault(key.value, pair)
                continue
            # the key the policy loader built (YAML 1.2: `1e3` and `0o17` are numbers), from
            # the node and its tag: a review's `!!null "{a: 1, a: 2}"` failed when its text
            # was read
            built = _UniqueKeyLoader("").construct_object(key, deep=True)
            self.by_spelling.setdefault(_yaml_spelling(built), pair)
            self.by_name.setdefault(str(built), pair)

    def find(self, part: int | str) -> tuple[yaml.Node, yaml.Node] | None:
        """The first key and value that the path's ``part`` names."""
        if isinstance(part, NonStringKey):
            return self.by_spelling.get(part)
        if isinstance(part, str):
            return self.by_text.get(part)
        return self.by_name.get(str(part))


def _locate(
    root: yaml.Node | None,
    path: tuple[int | str, ...],
    indexes: dict[int, _MappingKeys] | None = None,
) -> tuple[int | None, tuple[int | str, ...], str]:
    """The line of the deepest key of ``path`` present in ``root`` (composed by
    :func:`_compose_for_locating`; a key written as an alias at the alias), ``path`` with
    its keys that are no strings spelled as the file writes them (``0x10``, not 16), and a
    note naming every alias whose value the path enters, outermost first (`` (through the
    aliases at lines 10 and 7)``), and, when the path's key is missing from a mapping
    used through an alias, or the path ends in an alias's value, the line that value is
    written at (where it is mended).
    ``indexes`` keeps the mappings' keys indexed across the calls for one ``root``."""
    node = root
    line = None if node is None else _written_line(node)
    written = list(path)
    aliases: list[int] = []  # the lines of the aliases whose values the path enters
    written_from: yaml.Node | None = None  # the aliased value the path ends in or misses a key of
    for i, part in enumerate(path):
        alias_line: int | None = getattr(node, "alias_line", None)
        if isinstance(node, yaml.MappingNode):
            keys = indexes.get(id(node.value)) if indexes is not None else None
            if keys is None:
                keys = _MappingKeys(node)
                if indexes is not None:  # an alias's copy shares its anchor's list of pairs
                    indexes[id(node.value)] = keys
            match = keys.find(part)
            if match is None:
                if alias_line is not None:
                    aliases.append(alias_line)
                    written_from = node
                break
            key, node = match
            line = _written_line(key)
            if isinstance(part, NonStringKey) and key.value:
                written[i] = NonStringKey(key.value)
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int):
            if part >= len(node.value):
                break
            node = node.value[part]
            line = _written_line(node)
        else:
            break
        if alias_line is not None:
            aliases.append(alias_line)
    else:  # the whole path is here; its value may be an alias's (an entry without a class)
        alias_line = getattr(node, "alias_line", None)
        if alias_line is not None and node is not None:
            aliases.append(alias_line)
            written_from = node
    if not aliases:
        return line, tuple(written), ""
    lines = (
        f"alias at line {aliases[0]}"
        if len(aliases) == 1
        else "aliases at lines " + ", ".join(map(str, aliases[:-1])) + f" and {aliases[-1]}"
    )
    kind = (
        "mapping"
        if isinstance(written_from, yaml.MappingNode)
        else "list"
        if isinstance(written_from, yaml.SequenceNode)
        else "value"
    )
    written_at = (
        ""
        if written_from is None
        else f", in the {kind} written at line {written_from.start_mark.line + 1}"
    )
    return line, tuple(written), f" (through the {lines}{written_at})"


def _keys_at(schema: dict[str, Any], path: tuple[int | str, ...]) -> set[str]:
    """The keys the JSON Schema ``schema`` allows in the mapping at ``path`` (of every
    branch where a union stands there: a class's, a scorer's); none if the path leaves
    the schema."""
    definitions = schema.get("$defs", {})

    def resolved(node: Any) -> list[dict[str, Any]]:
        """``node`` with its references followed and its unions spread out."""
        if not isinstance(node, dict):
            return []
        if "$ref" in node:
            return resolved(definitions.get(str(node["$ref"]).rsplit("/", 1)[-1]))
        branches = [b for key in ("anyOf", "oneOf", "allOf") for b in node.get(key, [])]
        return [node] + [n for branch in branches for n in resolved(branch)]

    nodes = resolved(schema)
    for part in path:
        step = "items" if isinstance(part, int) else None
        following = []
        for node in nodes:
            child = node.get(step) if step else node.get("properties", {}).get(part)
            if child is None and not step and isinstance(node.get("additionalProperties"), dict):
                child = node["additionalProperties"]
            following += resolved(child)
        nodes = following
    return {key for node in nodes for key in node.get("properties", {})}


def _describe(error: Mapping[str, Any], known_keys: set[str]) -> str:
    kind = error["type"]
    if kind == "extra_forbidden":
        key = str(error["loc"][-1]) if error["loc"] else ""
        # never the key itself: a union's other branch (another class) may have it
        close = difflib.get_close_matches(key, sorted(known_keys - {key}), n=1, cutoff=0.75)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        return f"unknown key (the schema does not allow it; see `gate policy schema`){hint}"
    if kind == "missing":
        return "required key is missing"
    if _key_part(error) is not None:  # also a dict[str, ...] field's, worded as a value's
        return f"Keys should be strings; found {json.dumps(error.get('input'), default=str)}"
    ctx = error.get("ctx", {})
    key = "scorer" if "scorer" in str(ctx.get("discriminator", "")) else "class"
    if kind == "union_tag_invalid":
        return (
            f"unknown {key} {ctx.get('tag')!r}; expected one of {ctx.get('expected_tags')} "
            "or an installed plug-in (`gate audits` lists them)"
        )
    if kind == "union_tag_not_found":
        return f"each entry needs a {key!r} key"
    message = str(error["msg"])
    if message.startswith("Value error, "):
        message = message[len("Value error, ") :]
    if kind in {"model_type", "dict_type"}:  # pydantic names its class (TextPolicy)
        found = error.get("input")
        shown = "null" if found is None else type(found).__name__
        return f"Input should be a mapping of keys; found {shown}"
    if "input" not in error:
        return message
    found = error["input"]
    if isinstance(found, dict | list):
        return message
    if kind == "bool_type" and isinstance(found, str):
        return f"{message}; found {json.dumps(found)} (a YAML 1.2 boolean is true or false)"
    return f"{message}; found {json.dumps(found, default=str)}"


MAX_POLICY_SIZE = 1_000_000  # values and characters of a policy, its aliases expanded


def _expanded_size(root: yaml.Node | None, *, source: str) -> int:
    """How many values and characters ``root`` holds with every alias expanded, counted
    without expanding them (a review's 1.6 KB of nested aliases expanded to 10⁹ values,
    and another's 100 KB string aliased 99,000 times to 10 GB, when the policy was
    written into the report).

    Raises:
        PolicyError: a value that holds itself through an alias.
    """
    sizes: dict[int, int] = {}
    open_nodes: set[int] = set()

    def size(node: yaml.Node) -> int:
        known = sizes.get(id(node))
        if known is not None:
            return known
        if id(node) in open_nodes:
            raise PolicyError(
                f"{source}:{node.start_mark.line + 1}: a YAML alias refers to a value that "
                "holds it (the policy would be infinite)"
            )
        open_nodes.add(id(node))
        if isinstance(node, yaml.ScalarNode):
            total = 1 + len(node.value)
        else:
            parts = (
                node.value
                if isinstance(node, yaml.SequenceNode)
                else [part for pair in node.value for part in pair]
            )
            total = 1 + sum(size(part) for part in parts)
        open_nodes.discard(id(node))
        sizes[id(node)] = total
        return total

    return 0 if root is None else size(root)


def parse_policy(text: str, *, source: str = "<policy>") -> Policy:
    """Parse and validate policy text; raise :class:`PolicyError` naming the YAML path."""
    try:
        root = yaml.compose(text, Loader=_UniqueKeyLoader)
        data = yaml.load(text, Loader=_UniqueKeyLoader)
    except yaml.reader.ReaderError as exc:  # a character YAML refuses: no mark, a position
        row = text.count("\n", 0, exc.position) + 1
        column = exc.position - (text.rfind("\n", 0, exc.position) + 1) + 1
        code = exc.character if isinstance(exc.character, int) else ord(exc.character)
        raise PolicyError(
            f"{source}:{row}:{column}: not valid YAML: character U+{code:04X} is not "
            "allowed in YAML (it takes printable characters only)"
        ) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{source}:{mark.line + 1}:{mark.column + 1}" if mark else source
        problem = getattr(exc, "problem", None) or str(exc)
        raise PolicyError(f"{where}: not valid YAML: {problem}") from None
    except RecursionError:
        raise PolicyError(f"{source}: YAML nested too deeply to be a policy") from None
    if data is None:
        raise PolicyError(f"{source}: the policy file is empty")
    try:
        expanded = _expanded_size(root, source=source)
    except RecursionError:
        raise PolicyError(f"{source}: YAML nested too deeply to be a policy") from None
    if expanded > MAX_POLICY_SIZE:
        raise PolicyError(
            f"{source}: the policy holds more than {MAX_POLICY_SIZE:,} values and characters "
            "with its YAML aliases expanded; a policy is not that large"
        )
    if not isinstance(data, dict):
        raise PolicyError(
            f"{source}: the policy must be a mapping at the top level; found {type(data).__name__}"
        )
    model = policy_model(data)
    try:
        policy = model.model_validate(data)
    except ValidationError as exc:
        schema = model.model_json_schema(by_alias=True)
        problems = []
        key_indexes: dict[int, _NonStringKeys] = {}
        for error in exc.errors():
            path = _input_path(
                tuple(error["loc"]), data, key_at=_key_part(error), key_indexes=key_indexes
            )
            # a suggestion for an unknown key is a key of the place it stands in
            problems.append((path, _describe(error, _keys_at(schema, path[:-1]))))
    else:
        problems = unregistered_names(policy)
        if not problems:
            return policy
    lines = []
    try:
        located = _compose_for_locating(text)
    except RecursionError:  # its composer takes more stack per level than the first read
        located = root
    indexes: dict[int, _MappingKeys] = {}
    for path, message in problems:
        line, written, note = _locate(located, path, indexes)
        where = f"{source}:{line}" if line else source
        lines.append(f"{where}: {format_yaml_path(written)}{note}: {message}")
    raise PolicyError("\n".join(lines), problems=lines) from None


def policy_location(loaded: LoadedPolicy, path: tuple[int | str, ...]) -> str:
    """``file:line: yaml.path`` of ``path`` in the policy's file, for an error found after
    parsing (a setting only a plug-in can check). The line is that of the deepest key
    present; without it when the file no longer reads as YAML."""
    try:
        root = _compose_for_locating(Path(loaded.path).read_text("utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError, RecursionError):
        root = None
    line, written, note = _locate(root, path)
    where = f"{loaded.path}:{line}" if line else loaded.path
    return f"{where}: {format_yaml_path(written)}{note}"


def setting_error(
    exc: ValidationError,
    model: type[BaseModel],
    data: Mapping[str, Any],
    *,
    path: tuple[int | str, ...],
) -> SettingError:
    """The first error of a plug-in's settings ``model`` on ``data`` (found at ``path`` of
    the policy) as a :class:`SettingError`, its path read as the policy's own errors'
    (union tags and pydantic's ``[key]`` dropped, a key that is no string spelled as YAML
    writes it) and worded as theirs (an unknown key with a suggestion, what was expected
    and what was found)."""
    first = exc.errors()[0]
    inner = _input_path(tuple(first["loc"]), data, key_at=_key_part(first))
    detail = _describe(first, _keys_at(model.model_json_schema(by_alias=True), inner[:-1]))
    full = (*path, *inner)
    return SettingError(f"{format_yaml_path(full)}: {detail}", path=full, detail=detail)


def load_policy(path: str | Path) -> LoadedPolicy:
    """Read, parse and validate a policy file."""
    p = Path(path)
    try:
        mode = p.stat().st_mode
        if not stat.S_ISREG(mode):  # a FIFO or a device would block or never end
            raise PolicyError(f"{p}: not a regular file; expected a policy YAML file")
        if p.stat().st_size > MAX_POLICY_BYTES:
            raise PolicyError(f"{p}: larger than {MAX_POLICY_BYTES:,} bytes; not a policy")
        raw = p.read_bytes()
    except FileNotFoundError:
        raise PolicyError(f"{p}: policy file not found") from None
    except OSError as exc:
        raise PolicyError(f"{p}: cannot read the policy file: {exc.strerror}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise PolicyError(f"{p}: not UTF-8 text (byte {exc.start})") from None
    policy = parse_policy(text, source=str(p))
    return LoadedPolicy(policy=policy, path=str(p), sha256=hashlib.sha256(raw).hexdigest())


def effective_policy_yaml(policy: Policy) -> str:
    """The policy after defaults, as YAML."""
    data = policy.model_dump(mode="json", by_alias=True)
    return yaml.dump(data, Dumper=_PolicyDumper, sort_keys=False, allow_unicode=True)


def policy_json_schema() -> dict[str, Any]:
    """The JSON Schema of a policy, with every installed plug-in's configuration."""
    schema = installed_policy_model().model_json_schema(by_alias=True)
    schema["$id"] = "https://gate.invalid/schemas/policy-v1.json"
    schema["title"] = "gate policy (version 1)"
    return schema
