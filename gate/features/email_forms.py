"""E-mail addresses written for people, not for mail software: ``jill.rose at example
dot org``, ``jill.rose[at]example.org``, ``jill dot rose (at) example (dot) co (dot)
uk``, ``jill.rose&#64;example.org`` (an HTML character reference), ``jill.rose%40example
.org``, ``jill.rose @ example.org``, ``jill.rose@example[.]org``, and an address broken
over a line beside its "@".

An adversarial review rewrote the bundled example's 84 train addresses so, and
Presidio's e-mail pattern found none of them (PII ε̂ 3.316 → 0).
:func:`written_out_emails` finds them (the PII class's
:class:`gate.features.pii_recognizers.ObfuscatedEmailRecognizer`) and
:func:`readable_email` turns each into the address it spells, the PII value of the plain
address. No I/O and no Presidio here: the PII values are normalised without loading it.

Prose is not an address: "bought it at Amazon.com" ("at" spelled with the dots left as
dots), "worked at a dot com" (a function word for the name or the domain), "use my
@debian.org address".
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator

# brackets around a written "at" or "dot" (NFKC makes the full-width ones ASCII)
_OPEN = "[\\[({<\u3010\u3014\u3016\u3018\u27e8\u27ea\u00ab\u2039\u3008\u300a\u300c\u300e]"
_CLOSE = "[\\])}>\u3011\u3015\u3017\u3019\u27e9\u27eb\u00bb\u203a\u3009\u300b\u300d\u300f]"
# "@" written out, by kind: spelled " at "; bracketed [at] (at) [@] …, or (a) without
# blanks ("either (a) google.com" is an enumeration); a character reference or URL escape;
# "@" itself; the last two with or without blanks around them, and "@" also with one line
# break before or after it (an address broken over a line; more are not one:
# "pass\n\n@app.post" is code)
_SPELLED_AT = r"\s+at\s+"
_BRACKETED_AT = rf"\s*{_OPEN}\s*(?:at|@)\s*{_CLOSE}\s*|{_OPEN}a{_CLOSE}"
_ESCAPED_AT = r"[ \t]*(?:&#0*64(?![0-9]);?|&#x0*40(?![0-9a-f]);?|&commat;|%40)[ \t]*"
_LINE_BREAK = r"[ \t]*(?:\r\n|[\n\r\x0b\x0c\x85\u2028\u2029])[ \t]*"
_BARE_AT = rf"(?:{_LINE_BREAK}@[ \t]*|[ \t]*@(?:{_LINE_BREAK}|[ \t]*))"
_LINE_BREAK_AT = re.compile(rf"{_LINE_BREAK}@")
# "." written out: spelled, bracketed, escaped, with blanks on both sides (one after it
# alone ends a sentence: "example.net. You" is not example.net.you, though "you" is a
# top-level domain), or an ideographic full stop; or a plain "."
_WRITTEN_DOT = (
    rf"\s+dot\s+|\s*{_OPEN}\s*(?:dot|\.)\s*{_CLOSE}\s*|&#0*46(?![0-9]);?|&#x0*2e(?![0-9a-f]);?"
    r"|&period;|[ \t]+\.[ \t]+|[\u3002\uff61]"
)
# A written "@" starts only where a run of blanks does (one starting inside a run would
# read the rest of the run again: quadratic in the run's length), and the lookahead
# passes over most characters at once (about 0.13 ms per 3,000-character e-mail).
AT_FORM = re.compile(
    rf"(?<!\s)(?=[\s@&%{_OPEN[1:-1]}])"
    rf"(?:(?P<spelled>{_SPELLED_AT})|(?P<bracketed>{_BRACKETED_AT})|(?P<escaped>{_ESCAPED_AT})"
    rf"|(?P<bare>{_BARE_AT}))",
    re.IGNORECASE,
)
# (starting only where a run of blanks does, as AT_FORM)
WRITTEN_DOT = re.compile(rf"(?<!\s)(?:{_WRITTEN_DOT})", re.IGNORECASE)
_LOCAL_CHARS = r"[\w!#$%'*+/=?^`{|}~.-]"
# The local part before the "@", read back from it: starting at a word character (as
# Presidio's pattern does: a quote before a name is not part of it), its dots plain or
# written. Its runs are possessive: "{.}" is local characters and a written dot both, and
# a backtracking reading tried every split (exponential: 1.6 s at 20 of them).
LOCAL_PART = re.compile(
    rf"(?<!\w)\w{_LOCAL_CHARS}{{0,63}}+(?:(?:{_WRITTEN_DOT}){_LOCAL_CHARS}{{1,64}}+)*+\Z",
    re.IGNORECASE,
)
LOOK_BACK = 160
_LABEL = r"[^\W_](?:[\w-]{0,61}[^\W_])?"
# at most 16 labels: each ending is tried against the public suffixes
DOMAIN = re.compile(rf"{_LABEL}(?:(?:{_WRITTEN_DOT}|\.){_LABEL}){{1,15}}(?![\w-])", re.IGNORECASE)
_FIRST_LABEL = re.compile(_LABEL)
_DOTS = re.compile(rf"(?<!\s)(?:{_WRITTEN_DOT}|\.)", re.IGNORECASE)
# words that stand before " at " or "@" in prose, or after it ("worked at a dot com")
PROSE_WORDS = frozenset(
    {
        *("a", "an", "the", "this", "that", "these", "those", "some", "any", "all", "each"),
        *("my", "your", "his", "her", "its", "our", "their", "every", "no", "not"),
        *("i", "me", "you", "him", "us", "them", "it", "we", "he", "she", "they"),
        *("to", "from", "for", "of", "in", "on", "at", "by", "with", "and", "or", "but"),
        *("is", "was", "are", "be", "so", "as", "if", "then", "than", "there", "here"),
    }
)


def readable_email(value: str) -> str:
    """The address an e-mail written out spells (``Jill dot Rose at Example dot org`` →
    ``jill.rose@example.org``), lower-cased; a plain address lower-cased."""
    value = AT_FORM.sub("@", value.strip())
    value = WRITTEN_DOT.sub(".", value)
    return re.sub(r"\s+", "", value).lower()


def written_out_emails(
    text: str, *, public_domain: Callable[[str], bool]
) -> Iterator[tuple[int, int]]:
    """(start, end) of each e-mail address of ``text`` with its "@" or a "." written out.

    ``public_domain`` says whether a domain (as :func:`readable_email` spells it) ends in
    a public suffix; the longest such domain after the "@" is taken ("jill at example dot
    org. Then" ends at "org"). With "@" spelled " at ", or "@" itself without blanks
    around it, a "." must be written out too (prose holds "bought it at Example.com"; a
    plain address is Presidio's). With "at" spelled or blanks around "@", neither the name
    nor the domain's first label may be a function word ("worked at a dot com", "use my
    @debian.org address"). A line break before the "@" is read only where
    :func:`_not_broken_address` finds no code or address on the line above."""
    domain_end = -1  # where the domain after the last "@" read ends
    for at in AT_FORM.finditer(text):
        local = LOCAL_PART.search(text, max(at.start() - LOOK_BACK, 0), at.start())
        domain = DOMAIN.match(text, at.end())
        earlier_domain_end, domain_end = domain_end, -1 if domain is None else domain.end()
        if local is None or domain is None:
            continue
        kind = at.lastgroup
        written = at.group()
        prose_like = kind == "spelled" or (
            kind in ("bare", "escaped") and written != written.strip()
        )
        first_label = _FIRST_LABEL.match(domain.group())
        if prose_like and (
            readable_email(local.group()) in PROSE_WORDS
            or (first_label is not None and first_label.group().lower() in PROSE_WORDS)
        ):
            continue
        if _LINE_BREAK_AT.match(written) and _not_broken_address(
            text, local=local, domain=domain, earlier_domain_end=earlier_domain_end
        ):
            continue
        needs_written_dot = kind == "spelled" or written == "@"
        if needs_written_dot and WRITTEN_DOT.search(domain.group()) is None:
            continue
        end = _longest_public(
            text, start=domain.start(), end=domain.end(), public_domain=public_domain
        )
        if end is None:
            continue
        if needs_written_dot and WRITTEN_DOT.search(text, domain.start(), end) is None:
            continue
        yield local.start(), end


def _not_broken_address(
    text: str, *, local: re.Match[str], domain: re.Match[str], earlier_domain_end: int
) -> bool:
    """Whether a line ending in ``local`` and one starting with "@" and ``domain`` are
    not one address broken before its "@": the name is the domain of an "@" before it
    (an address or a decorator on the line above: "jill@example.org\\n@bob.example.com",
    "@pytest.mark.slow\\n@pytest.mark.network"), the line above is a comment, or the
    domain is called (a decorator: "# Create an item\\n@router.post('/items')")."""
    if local.start() < earlier_domain_end or text[local.start() - 1 : local.start()] == "@":
        return True
    line = text[text.rfind("\n", 0, local.start()) + 1 : local.start()].lstrip()
    return line.startswith(("#", "//")) or text.startswith("(", domain.end())


def _longest_public(
    text: str, *, start: int, end: int, public_domain: Callable[[str], bool]
) -> int | None:
    """Where the longest domain of two labels or more in ``text[start:end]`` that ends
    in a public suffix ends, or None."""
    ends = [*(m.start() for m in _DOTS.finditer(text, start, end)), end][1:]
    for stop in reversed(ends):
        if public_domain(readable_email(text[start:stop])):
            return stop
    return None
