"""HTML read as the text it shows (policy ``text.markup: html``), with nothing it holds
left out: a release written as HTML (a tag around each word, ``&nbsp;`` between words,
``775-<span>568</span>-2052``) is the same text to a reader of it as the plain copy, and
must be to the gate.

The markup is parsed by Lexbor (through ``selectolax``), an HTML5 parser that reads any
input as a browser does and never fails. Tags are removed and character references
decoded; block elements (paragraphs, line breaks, list items, table rows, headings, ...)
stand on lines of their own, table cells are separated by tabs, and inline elements
(``span``, ``b``, ``a``, ``font``, ...) join their text to the text around them. What a
browser does not show but the release file holds follows the shown text, each piece on
a line of its own, in the document's order: the values of attributes (a link's address,
``alt`` and ``title`` texts), comments, and the contents of ``script``, ``style`` and
``template`` elements.

A ``<`` that does not open an HTML element's tag is text (e-mails write addresses and
links so: ``Jill Rose <jill@example.org>``, ``<https://example.org>``): only the element
names of HTML (obsolete ones too) and Microsoft Office's namespaced tags (``<o:p>``) are
read as tags.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from typing import Any

# Every element of the HTML Living Standard, its obsolete elements that browsers still
# render, and MathML's and SVG's roots.
HTML_ELEMENTS = frozenset(
    """a abbr acronym address applet area article aside audio b base basefont bdi bdo
    bgsound big blink blockquote body br button canvas caption center cite code col
    colgroup data datalist dd del details dfn dialog dir div dl dt em embed fieldset
    figcaption figure font footer form frame frameset h1 h2 h3 h4 h5 h6 head header hgroup
    hr html i iframe image img input ins isindex kbd keygen label legend li link listing
    main map mark marquee math menu menuitem meta meter multicol nav nextid nobr noembed
    noframes noscript object ol optgroup option output p param picture plaintext pre
    progress q rb rp rt rtc ruby s samp script search section select slot small source
    spacer span strike strong style sub summary sup svg table tbody td template textarea
    tfoot th thead time title tr track tt u ul var video wbr xmp""".split()  # noqa: SIM905
)
# Elements a browser lays out on lines of their own (the line break and the rule too).
BLOCK_ELEMENTS = tuple(
    """address article aside blockquote br caption center dd details dialog dir div dl dt
    fieldset figcaption figure footer form frame frameset h1 h2 h3 h4 h5 h6 header hgroup
    hr legend li listing main menu nav ol optgroup option p plaintext pre section summary
    table tbody tfoot thead title tr ul xmp""".split()  # noqa: SIM905
)
CELL_ELEMENTS = ("td", "th")
# Elements whose contents a browser does not show as text.
HIDDEN_ELEMENTS = ("script", "style")
# Microsoft Office's namespaces in HTML it writes (Outlook's e-mails: <o:p>, <v:shape>).
OFFICE_PREFIXES = ("o", "v", "w", "m", "x", "st1")

# Tag names end where HTML's tokenizer ends them (white space, "/" or ">").
_NOT_A_TAG = re.compile(
    r"<(?=/?[A-Za-z])(?!/?(?:"
    + "|".join(sorted(HTML_ELEMENTS, key=len, reverse=True))
    + "|(?:"
    + "|".join(OFFICE_PREFIXES)
    + r"):[A-Za-z][\w.-]*)(?=[\t\n\f\r />]|$))",
    re.IGNORECASE,
)
_TEMPLATE = re.compile(r"\A<template\b[^>]*>(.*)</template>\Z", re.DOTALL | re.IGNORECASE)


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
        followed by the attribute values, comments and contents of script, style and
        template elements, each after a line break.
    """
    if "<" not in html and "&" not in html:
        return html
    tree = html_parser()(_NOT_A_TAG.sub("&lt;", html))
    if tree.root is None or tree.root.parent is None:
        raise RuntimeError(f"Lexbor parsed no document from a text of {len(html)} characters")
    unshown: list[str] = []
    # from the document: comments before <html> and after </html> are its children
    for node in tree.root.parent.traverse(include_text=False):
        if node.is_comment_node:
            unshown.append(node.comment_content or "")
        elif node.is_element_node:
            unshown.extend(value for value in node.attributes.values() if value)
    for node in tree.css("template"):
        inner = _TEMPLATE.match(node.html or "")
        if inner is not None:
            unshown.append(html_as_text(inner.group(1)))
        node.decompose()
    for node in tree.css(",".join(HIDDEN_ELEMENTS)):
        unshown.append(node.text(deep=True, separator="", strip=False))
        node.decompose()
    for node in tree.css(",".join(BLOCK_ELEMENTS)):
        node.insert_before("\n")
        node.insert_after("\n")
    for node in tree.css(",".join(CELL_ELEMENTS)):
        node.insert_after("\t")
    shown = tree.root.text(deep=True, separator="", strip=False)
    unshown = [piece for piece in unshown if piece.strip()]
    return "\n".join([shown, *unshown]) if unshown else shown
