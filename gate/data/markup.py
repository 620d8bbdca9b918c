"""HTML read as the text it shows (policy ``text.markup: html``), with nothing it holds
left out: a release written as HTML (a tag around each word, ``&nbsp;`` between words,
``775-<span>568</span>-2052``) is the same text to a reader of it as the plain copy, and
must be to the gate.

The markup is parsed by Lexbor (through ``selectolax``), an HTML5 parser that reads any
input as a browser does and never fails. Tags are removed and character references
decoded; block elements (paragraphs, line breaks, list items, table rows, headings, ...)
stand on lines of their own, table cells are separated by tabs, form controls by spaces,
and inline elements (``span``, ``b``, ``a``, ``font``, unknown ones) join their text to
the text around them; the values a browser draws in place (an input's ``value``, an
image's ``alt``, an option's ``label``) stand in place. What a browser does not show but
the release file holds follows the shown text, each piece on a line of its own, in the
document's order: the values of attributes (a link's address, ``title`` texts), the
names of attributes without a value, comments, the attributes of end tags, the doctype,
and the contents of ``script``, ``style``, ``template``, hidden and fallback elements and
of ruby annotations. Documents within the document (comments, which may be Outlook's
conditional HTML, ``srcdoc`` attributes, ``template``, ``iframe``, ``noembed`` and
``noframes`` contents) are read the same way, to a depth of :data:`MAX_DEPTH`; deeper
ones are kept as written.

A ``<`` is text, not a tag, where a browser would read a tag but the writer of a plain
text meant none: before a name that holds ``@`` or ``.`` or a ``:`` (``Jill Rose
<jill@example.org>``, ``<https://example.org>``; Microsoft Office's namespaced tags such
as ``<o:p>`` are tags), and where no ``>`` follows before the next ``<`` (``if a <b then
...``: a browser reads the rest of the text as the tag's attributes).
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from gate.data.bidi import FSI, LRI, LRO, PDF, PDI, RLI, RLO

if TYPE_CHECKING:
    import pandas as pd

# Elements a browser lays out on lines of their own (the line break and the rule too).
BLOCK_ELEMENTS = tuple(
    """address article aside blockquote br caption center dd details dialog dir div dl dt
    fieldset figcaption figure footer form frame frameset h1 h2 h3 h4 h5 h6 header hgroup
    hr legend li listing main menu nav ol optgroup option p plaintext pre search section
    summary table tbody tfoot thead title tr ul xmp""".split()  # noqa: SIM905
)
SPACED_ELEMENTS = ("button", "input", "meter", "progress", "select", "textarea")
CELL_ELEMENTS = ("td", "th")
# Elements whose contents a browser does not show as text (ruby annotations are drawn
# above their base, which they would split), and what it does not show at all.
UNSHOWN_ELEMENTS = "script, style, rp, rt, datalist, audio, video, canvas, [hidden]"
# Elements whose contents are a document a browser does not show (raw text to Lexbor).
UNSHOWN_DOCUMENTS = ("iframe", "noembed", "noframes")

# HTML a text written as plain text rarely holds: a character reference other than the
# escapes of &, <, > and quotes that plain-text exports carry (``&nbsp;``, ``&#8209;``,
# with or without the semicolon), a comment, or a tag of an element that formats text
# (RE2 syntax, for Arrow)
FORMATTING_ELEMENTS = tuple(
    """a abbr b bdi bdo big cite code del dfn em font i ins kbd mark nobr q s samp small
    span strike strong sub sup tt u var wbr""".split()  # noqa: SIM905
)
_HTML_MARKUP = (
    r"(?i)&(?:#[0-9]{1,7};?|#x[0-9a-f]{1,6};?|nbsp;?|shy;?|zwj;|zwnj;|"
    r"(?:[a-z][a-z0-9]{1,31});)|<!--|"
    r"</?(?:"
    + "|".join((*BLOCK_ELEMENTS, *CELL_ELEMENTS, *FORMATTING_ELEMENTS))
    + r")(?:\s[^<>]*)?/?>"
)
_PLAIN_TEXT_ESCAPES = r"(?i)&(?:amp|lt|gt|quot|apos|#0*3[89]|#0*6[02]|#x0*2[67]|#x0*3[ce]);"
# The attributes a browser draws where their element stands.
SHOWN_ATTRIBUTES = (
    ("input:not([type=hidden])", "value"),
    ("input", "placeholder"),
    ("textarea", "placeholder"),
    ("img", "alt"),
    ("area", "alt"),
    ("option", "label"),
    ("optgroup", "label"),
)
# Elements whose white space a browser shows as written (it collapses the rest)
PREFORMATTED_ELEMENTS = ("pre", "textarea", "listing", "plaintext", "xmp")
# What a browser shows as a space outside those: line breaks, tabs (and form feeds, not
# drawn) would end every isolate and override (UAX #9 X8) or reset the level (L1)
_COLLAPSED = str.maketrans("\n\r\t\f", "    ")
# Elements whose text HTML's automatic direction (dir=auto) does not look at
_AUTO_SKIPPED = ("bdi", "script", "style", "textarea")
# Microsoft Office's namespaces in HTML it writes (Outlook's e-mails: <o:p>, <v:shape>).
OFFICE_PREFIXES = ("o", "v", "w", "m", "x", "st1")
MAX_DEPTH = 8  # documents within documents read as HTML; deeper ones are kept as written

_NAME_END = "\\t\\n\\f\\r />"
# A "<" before a tag name that is an address or a link, or that no ">" closes before the
# next "<" (HTML's tokenizer ends a name at white space, "/" or ">").
_TEXT_LESS_THAN = re.compile(
    "<(?=/?[A-Za-z])(?:"
    f"(?=/?[^{_NAME_END}]*[@.])"
    f"|(?=/?(?!(?:{'|'.join(OFFICE_PREFIXES)}):)[^{_NAME_END}:]*:)"
    "|(?![^<>]*>))",
    re.IGNORECASE,
)
# What HTML's parser drops but a reader of the file sees: an end tag's attributes and
# the doctype's words after its name
_END_TAG_ATTRIBUTES = re.compile(f"</[A-Za-z][^{_NAME_END}]*[\\t\\n\\f\\r /]+([^>]+)>")
_DOCTYPE = re.compile(r"<!doctype\s*([^>]*)>", re.IGNORECASE)
_TEMPLATE = re.compile(r"\A<template\b[^>]*>(.*)</template>\Z", re.DOTALL | re.IGNORECASE)
# Of read_html_texts: a "<" and what follows it to the next "<" or ">", each of which
# must be a tag without attributes (and not one that sets a direction)
_TAG_OPENING = re.compile(r"<[^<>]*>?")
_PLAIN_TAG = re.compile(r"</?[A-Za-z][A-Za-z0-9]*[\t\n\f ]*/?>")
# such a tag, or a "&" and what may follow it in a character reference, kept as written
_MARKUP_SPLIT = re.compile(r"(</?[A-Za-z][A-Za-z0-9]*[\t\n\f ]*/?>|&[^;\t\n\f\r <>&]*;?)")
_DIRECTED_TAG = re.compile(r"</?bd[io][\t\n\f />]", re.IGNORECASE)
# characters HTML's tokenizer passes through as they are in every state text can be in
# outside tags without attributes (not "<", "&", NUL, CR; no controls;
# not ">" or a no-break space, which a serialiser writes as "&gt;" and "&nbsp;", and a
# template's contents are read as serialised; no private-use characters,
# which stand for runs, no noncharacters, which stand for "<" that is text, no surrogates)
_PASSED = "[^<>&\x00-\x08\x0b-\x1f\x7f-\xa0\ud800-\udfff\ue000-\uf8ff\ufdd0-\ufdef]"
_PASSED_RUN = re.compile(f"(?![\\t\\n ]){_PASSED}(?:(?:{_PASSED}|[\\t\\n ])*(?<![\\t\\n ]))?")
_FIRST_RUN_MARK = 0xE000
_RUN_MARK_COUNT = 0xF8FF - 0xE000 + 1
_RUN_MARKS = re.compile("[\ue000-\uf8ff]")
# stands for a "<" that is text while Lexbor parses (a noncharacter: not in real text;
# a text that holds it escapes such a "<" as "&lt;", which raw-text elements keep)
_SENTINEL = "\ufdd0"


@functools.cache
def html_parser() -> Callable[[str], Any]:
    """Lexbor's parser from ``selectolax``, imported on first use.

    Raises:
        RuntimeError: ``selectolax`` is not installed.
    """
    try:
        from selectolax.lexbor import LexborHTMLParser
    except ImportError as exc:
        raise RuntimeError(
            "text.markup: html needs the 'selectolax' package (pip install "
            f"'selectolax>=1.0'): {exc}"
        ) from exc
    return LexborHTMLParser


def html_as_text(html: str) -> str:
    """The text ``html`` shows, then what it holds but does not show (module docstring).

    Args:
        html: A text that may hold HTML markup; a text without ``<`` or ``&`` is
            returned as it is.

    Returns:
        The shown text (white space as written; block elements on lines of their own),
        followed by what the text holds but a browser does not show, each piece after a
        line break.
    """
    return _read(html, depth=0)


def html_shown_text(html: str) -> str:
    """The text ``html`` shows, without what it holds but does not show: what a pipeline
    that extracts the text of HTML keeps (white space as written; block elements on lines
    of their own); a text without ``<`` or ``&`` is returned as it is."""
    return _read(html, depth=0, shown_only=True)


def read_html_texts(texts: Iterable[str], *, shown_only: bool) -> list[str]:
    """:func:`html_shown_text` (``shown_only``) or :func:`html_as_text` of each of
    ``texts``, with one parse for the texts that differ only in their words.

    A text whose every ``<`` opens a tag without attributes (``</s>``, ``<p>``, ``<br/>``,
    not ``bdi`` or ``bdo``) is read as its *skeleton*: the text with each run of
    characters HTML's tokenizer passes through as they are (no ``<``, ``>``, ``&`` and
    what follows it in a character reference, controls, no-break space or private-use
    character; starting and ending with one that is not HTML's white space) replaced by
    one private-use character. A skeleton is parsed once; its reading stands for every
    text that has it, with the runs put back, if it holds each private-use character
    exactly once (the parser read each like the run it stands for; where it dropped one,
    in a ``frameset`` or behind ``rt`` when ``shown_only``, the texts are parsed
    themselves). A prompt template's ``</s>`` around 100,000 records is one parse
    instead of 100,000.

    Args:
        texts: texts that may hold HTML markup.
        shown_only: read the shown text only (:func:`html_shown_text`), else with what
            the text holds but does not show after it (:func:`html_as_text`).

    Returns:
        The readings, in the order of ``texts``.
    """
    readings: dict[str, tuple[list[str], list[int]] | None] = {}
    read = []
    for text in texts:
        runs: list[str] = []
        skeleton = _skeleton(text, runs)
        if skeleton is not None and skeleton not in readings:
            reading = _read(skeleton, depth=0, shown_only=shown_only)
            order = [ord(mark) - _FIRST_RUN_MARK for mark in _RUN_MARKS.findall(reading)]
            whole = sorted(order) == list(range(len(runs)))
            readings[skeleton] = (_RUN_MARKS.split(reading), order) if whole else None
        between = readings[skeleton] if skeleton is not None else None
        if between is None:
            read.append(_read(text, depth=0, shown_only=shown_only))
        else:
            pieces, order = between
            filled = [
                piece for at, run in zip(pieces, order, strict=False) for piece in (at, runs[run])
            ]
            read.append("".join(filled) + pieces[-1])
    return read


def _skeleton(text: str, runs: list[str]) -> str | None:
    """``text`` with its runs of characters read as they are (:func:`read_html_texts`)
    replaced by private-use characters, appended to ``runs``; None for a text outside
    the form whose skeleton reads like it (a ``<`` that opens no attribute-free tag, a
    private-use character of its own, more runs than marks)."""
    if _RUN_MARKS.search(text):
        return None
    for tag in _TAG_OPENING.findall(text):
        if not _PLAIN_TAG.fullmatch(tag) or _DIRECTED_TAG.match(tag):
            return None

    def mark(match: re.Match[str]) -> str:
        runs.append(match.group())
        return chr(_FIRST_RUN_MARK + len(runs) - 1)

    parts = _MARKUP_SPLIT.split(text)
    parts[::2] = [_PASSED_RUN.sub(mark, part) for part in parts[::2]]
    return "".join(parts) if len(runs) <= _RUN_MARK_COUNT else None


def _read(html: str, *, depth: int, shown_only: bool = False) -> str:
    if ("<" not in html and "&" not in html) or depth > MAX_DEPTH:
        return html
    escape = "&lt;" if _SENTINEL in html else _SENTINEL
    tree = html_parser()(_TEXT_LESS_THAN.sub(escape, html))
    if tree.root is None or tree.root.parent is None:
        raise RuntimeError(f"Lexbor parsed no document from a text of {len(html)} characters")
    unshown = [name for name in _DOCTYPE.findall(html) if name.strip().lower() != "html"]
    unshown += _END_TAG_ATTRIBUTES.findall(html)
    # from the document: comments before <html> and after </html> are its children
    for node in tree.root.parent.traverse(include_text=False):
        if node.is_comment_node:
            unshown.append(_read(node.comment_content or "", depth=depth + 1))
        elif node.is_element_node:
            for name, value in node.attributes.items():
                if not value:
                    unshown.append(name)
                elif name == "srcdoc":
                    unshown.append(_read(value, depth=depth + 1))
                else:
                    unshown.append(value)
    for node in tree.css("template"):
        inner = _TEMPLATE.match(node.html or "")
        if inner is not None:
            unshown.append(_read(inner.group(1), depth=depth + 1))
        node.decompose()
    documents = tree.css(",".join(UNSHOWN_DOCUMENTS))
    for node in documents:
        unshown.append(_read(node.text(deep=True, separator="", strip=False), depth=depth + 1))
    for selector, attribute in SHOWN_ATTRIBUTES:
        for node in tree.css(f"{selector}[{attribute}]"):
            node.insert_before(f" {node.attributes[attribute]} ")
    hidden = tree.css(UNSHOWN_ELEMENTS)
    unshown += [node.text(deep=True, separator="", strip=False) for node in hidden]
    # removed once, from the outermost: a node inside a removed one is gone with it
    removed = documents + hidden
    matched = {node.mem_id for node in removed}
    for node in removed:
        if not _inside(node, matched):
            node.decompose()
    directed = {node.mem_id: node for node in tree.css("[dir], bdo, bdi") if _directs(node)}
    if directed:
        _collapse_white_space(tree, directed)
    # each directed element's controls, once (dir=auto reads its text: per block, quadratic)
    controls = {key: (_controls(n), _controls(n, override=False)) for key, n in directed.items()}
    for node in tree.css(",".join(BLOCK_ELEMENTS)):
        before, after = _line_breaks(node, controls)
        node.insert_before(before)
        node.insert_after(after)
    for node in tree.css(",".join(SPACED_ELEMENTS)):
        node.insert_before(" ")
        node.insert_after(" ")
    for node in tree.css(",".join(CELL_ELEMENTS)):
        node.insert_after("\t")
    _mark_directions(tree, directed, controls)
    if directed:
        _mirror_right_to_left_rows(tree)
    pieces = [tree.root.text(deep=True, separator="", strip=False)]
    if not shown_only:
        pieces += [piece for piece in unshown if piece.strip()]
    text = "\n".join(pieces)
    return text.replace(_SENTINEL, "<") if escape == _SENTINEL else text


def _directs(node: Any) -> bool:
    """Whether ``node`` sets a direction: a ``bdo`` or ``bdi``, or a ``dir`` HTML reads."""
    return node.tag in ("bdo", "bdi") or _direction(node) != ""


def _direction(node: Any) -> str:
    """An element's ``dir`` as HTML reads it: ``ltr``, ``rtl``, ``auto`` in any case, else
    none (``""``)."""
    value = (node.attributes.get("dir") or "").lower()
    return value if value in ("ltr", "rtl", "auto") else ""


def _controls(node: Any, *, override: bool = True) -> tuple[str, str]:
    """The formatting characters that open and close a directed element's layout (HTML's
    rendering): ``dir`` makes it an isolate of that direction (``auto``, and ``bdi``
    without a ``dir``, of its contents' direction); ``bdo`` also overrides its contents'
    direction, with its ``dir``, else with its nearest ancestor's (left to right without
    one). A block inside inherits the direction, not the override (``override=False``)."""
    direction = _direction(node)
    if node.tag == "bdo" and direction == "auto":
        direction = _first_strong_direction(node)
    opening, closing = {"ltr": LRI, "rtl": RLI}.get(direction, FSI), PDI
    if node.tag == "bdo" and override:
        if direction not in ("ltr", "rtl"):
            inherited = (_direction(a) for a in _ancestors(node))
            direction = next((d for d in inherited if d in ("ltr", "rtl")), "ltr")
        opening, closing = opening + (RLO if direction == "rtl" else LRO), PDF + closing
    return opening, closing


def _first_strong_direction(node: Any) -> str:
    """The direction HTML's ``dir=auto`` gives ``node``: that of the first character of a
    strong direction in its text, left out the text of ``bdi``, ``script``, ``style``,
    ``textarea`` and elements with a ``dir`` of their own; left to right without one."""
    skipped = _text_nodes(node, skip=lambda e: e.tag in _AUTO_SKIPPED or _direction(e) != "")
    for text_node in skipped:
        for character in text_node.text_content or "":
            kind = unicodedata.bidirectional(character)
            if kind in ("L", "R", "AL"):
                return "ltr" if kind == "L" else "rtl"
    return "ltr"


def _collapse_white_space(tree: Any, directed: dict[int, Any]) -> None:
    """Line breaks and tabs in the text of directed elements read as the spaces a browser
    shows in their place, except in preformatted elements (:data:`PREFORMATTED_ELEMENTS`):
    read as written, a line break in the source would end the element's override (UAX
    #9 X8: ``<bdo dir=rtl>`` around a reversed text broken over two lines) and a tab
    would split it (L1), where the browser's display reads as one line. One walk of the
    document, its text nodes replaced after it."""
    root = tree.root
    pending = [
        (root.iter(include_text=True), root.mem_id in directed, root.tag in PREFORMATTED_ELEMENTS)
    ]
    collapsed: list[tuple[Any, str]] = []
    while pending:
        children, inside, preformatted = pending[-1]
        child = next(children, None)
        if child is None:
            pending.pop()
        elif child.is_text_node:
            text = child.text_content or ""
            if inside and not preformatted and text != text.translate(_COLLAPSED):
                collapsed.append((child, text.translate(_COLLAPSED)))
        elif child.is_element_node:
            pending.append(
                (
                    child.iter(include_text=True),
                    inside or child.mem_id in directed,
                    preformatted or child.tag in PREFORMATTED_ELEMENTS,
                )
            )
    for child, text in collapsed:
        child.replace_with(text)


def _text_nodes(node: Any, *, skip: Callable[[Any], bool]) -> Iterator[Any]:
    """The text nodes below ``node`` in the document's order, but none inside an element
    ``skip`` is true of."""
    pending = [node.iter(include_text=True)]
    while pending:
        child = next(pending[-1], None)
        if child is None:
            pending.pop()
        elif child.is_text_node:
            yield child
        elif child.is_element_node and not skip(child):
            pending.append(child.iter(include_text=True))


def _line_breaks(
    block: Any, controls: dict[int, tuple[tuple[str, str], tuple[str, str]]]
) -> tuple[str, str]:
    """The line breaks around a block element, with its directed ancestors' layouts
    closed before each and opened again after it (a line break ends every isolate and
    override, UAX #9 X8, where HTML's blocks go on in their ancestors' direction): inside
    the block their isolates only, after it their overrides too. Up to 125 ancestors, the
    deepest level UAX #9 keeps."""
    if not controls:
        return "\n", "\n"
    chain = [node for node in _ancestors(block) if node.mem_id in controls][::-1][:125]
    if not chain:
        return "\n", "\n"
    full = [controls[node.mem_id][0] for node in chain]
    isolates = [controls[node.mem_id][1] for node in chain]
    return (
        "".join(closing for _, closing in reversed(full))
        + "\n"
        + "".join(opening for opening, _ in isolates),
        "".join(closing for _, closing in reversed(isolates))
        + "\n"
        + "".join(opening for opening, _ in full),
    )


def _mark_directions(
    tree: Any,
    directed: dict[int, Any],
    controls: dict[int, tuple[tuple[str, str], tuple[str, str]]],
) -> None:
    """The formatting characters of each directed element's layout (:func:`_controls`)
    put around it; the root's around the body (nothing can stand beside the root).
    :mod:`gate.data.bidi` then reads the text as it is displayed."""
    for node in directed.values():
        opening, closing = controls[node.mem_id][0]
        target = tree.body if node.tag == "html" else node
        if target is not None:
            target.insert_before(opening)
            target.insert_after(closing)


def _mirror_right_to_left_rows(tree: Any) -> None:
    """Each row of a right-to-left table followed by a line of its cells in the order a
    browser draws them, right to left (a copy written cell by cell from its end, in a
    ``<table dir=rtl>``, is displayed, and read, as the copy). The row stays as written
    too: a right-to-left reader's order. A table within a cell has rows of its own: the
    line leaves it out."""
    directions: dict[int, str] = {}
    automatic: dict[int, str] = {}  # each dir=auto element's direction, read once
    for row in tree.css("tr"):
        table = next((a for a in _ancestors(row) if a.tag == "table"), None)
        if table is None:
            continue
        if table.mem_id not in directions:
            directions[table.mem_id] = _table_direction(table, automatic)
        cells = [c for c in row.iter(include_text=False) if c.tag in CELL_ELEMENTS]
        if directions[table.mem_id] == "rtl" and len(cells) > 1:
            drawn = (_text_outside_tables(cell) for cell in cells[::-1])
            row.insert_after("\n" + "\t".join(drawn))


def _text_outside_tables(cell: Any) -> str:
    """A table cell's text, without that of the tables within it."""
    inner = _text_nodes(cell, skip=lambda element: element.tag == "table")
    return "".join(node.text_content or "" for node in inner)


def _table_direction(table: Any, automatic: dict[int, str]) -> str:
    """The direction a table lays its columns out in: its own ``dir``, else its nearest
    ancestor's (``auto``: of its first strong character, kept in ``automatic``), else
    left to right."""
    for node in (table, *_ancestors(table)):
        direction = _direction(node)
        if direction == "auto":
            if node.mem_id not in automatic:
                automatic[node.mem_id] = _first_strong_direction(node)
            return automatic[node.mem_id]
        if direction:
            return direction
    return "ltr"


def _inside(node: Any, ids: set[int]) -> bool:
    """Whether an ancestor of ``node`` is one of the nodes ``ids`` name."""
    return any(parent.mem_id in ids for parent in _ancestors(node))


def _ancestors(node: Any) -> Iterator[Any]:
    """``node``'s parent, its parent's parent, ... up to the document."""
    parent = node.parent
    while parent is not None:
        yield parent
        parent = parent.parent


def share_with_markup(texts: pd.Series) -> float:
    """The share of ``texts`` that hold HTML a plain text rarely does (:data:`_HTML_MARKUP`,
    the escapes of plain-text exports left out); 0 for no text. One RE2 pass per text."""
    if len(texts) == 0:
        return 0.0
    read = pc.replace_substring_regex(pa.array(texts.array), _PLAIN_TEXT_ESCAPES, "")
    return float(pc.sum(pc.match_substring_regex(read, _HTML_MARKUP)).as_py() or 0) / len(texts)
