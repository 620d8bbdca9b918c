"""HTML read as the text it shows (``text.markup: html``): hand-made cases with their
answers written out, the cases a browser's parser decides (malformed markup, comments
outside the document), texts that only look like markup, and the bundled example's
train copied as HTML, which the n-gram class must read as the plain copy."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gate.api import check_release
from gate.data import markup
from gate.data.markup import html_as_text, html_shown_text, read_html_texts
from gate.data.normalize import normalize_text
from gate.policy.models import TextPolicy

from .conftest import REPO, read_report, write_jsonl, write_policy

EXAMPLE = REPO / "examples" / "bundle"


def test_inline_elements_join_their_text_and_blocks_stand_on_lines() -> None:
    assert html_as_text("775-<span>568</span>-2052") == "775-568-2052"
    assert html_as_text("<b>Jill</b>&nbsp;<i>Rose</i>") == "Jill\xa0Rose"
    assert html_as_text("<p>Dear Jill,</p><p>call me</p>") == "\nDear Jill,\n\ncall me\n"
    assert html_as_text("one<br>two<br/>three") == "one\n\ntwo\n\nthree"
    # the parser adds the table's body: table, tbody and tr each break a line
    assert html_as_text("<table><tr><td>a</td><th>b</th></tr></table>") == "\n\n\na\tb\t\n\n\n"
    assert html_as_text("<ul><li>x</li><li>y</li></ul>") == "\n\nx\n\ny\n\n"


def test_character_references_are_decoded() -> None:
    assert html_as_text("&#55;&#x37;&amp;&lt;&copy;&nbsp;") == "77&<©\xa0"
    assert html_as_text("AT&T and R&D") == "AT&T and R&D"  # no reference: as written


def test_what_is_not_shown_follows_on_lines_of_its_own() -> None:
    html = (
        "<!-- before --><!DOCTYPE html><html><head><style>p {color: red}</style></head>"
        "<body><a href='mailto:jill@example.org' title='Jill &amp; Rose'>write</a> to me"
        "<img alt='a photo of Jill' src='jill.png'><script>var phone = '775-568-2052';</script>"
        "<template><p>kept <b>too</b></p></template></body></html><!-- after -->"
    )
    shown, *unshown = html_as_text(html).split("\n")
    assert shown == "write to me a photo of Jill "  # an image's alt stands where it is
    assert unshown == [
        "before",  # Lexbor's comment without its blanks
        "mailto:jill@example.org",
        "Jill & Rose",
        "a photo of Jill",
        "jill.png",
        "after",
        "",  # the template's text: its paragraph on lines of its own
        "kept too",
        "",
        "p {color: red}",
        "var phone = '775-568-2052';",
    ]


def test_a_less_than_sign_a_plain_text_means_is_text() -> None:
    for text in (
        "Jill Rose <jill@example.org> wrote:",
        "see <https://example.org/a?b=1> now",
        "<bob@example.org>",
        "if a < b and c > d",
        "i<3 you",
        "if a <b then we stop. The rest follows",  # no ">": not a tag
        "hi <p title='unclosed",
    ):
        assert html_as_text(text) == text
    assert html_as_text("<jill@example.org><b>!</b>") == "<jill@example.org>!"
    # Microsoft Office's namespaced tags (Outlook's e-mails) are markup
    assert html_as_text("<p class=MsoNormal>Hello<o:p></o:p></p>") == "\nHello\n\nMsoNormal"
    # a "<" kept as text inside a comment or a raw-text element reads as written
    assert html_as_text("<!-- Jill <jill@example.org> -->") == "\nJill <jill@example.org>"
    assert html_as_text("<xmp>Jill <jill@example.org></xmp>") == "\nJill <jill@example.org>\n"
    # a text that holds the parser's stand-in for such a "<" keeps it
    assert html_as_text("a\ufdd0 <jill@x.org>") == "a\ufdd0 <jill@x.org>"


def test_any_element_is_markup_as_a_browser_reads_it() -> None:
    """An unknown element is an inline one: a review hid words behind ``t<x></x>he``
    (kept as text while only HTML's element names were tags), custom elements, SVG's
    ``<text>`` and tag names with a NUL or a zero-width space in them."""
    for html in (
        "t<x></x>he q<x></x>uick",
        "<x-w>the</x-w> <x-w>quick</x-w>",
        "<svg><text>the</text> <tspan>quick</tspan></svg>",
        "t<b\0>he q<sp\u200ban>uick",
    ):
        assert html_as_text(html).split() == ["the", "quick"], html
    assert html_as_text("x <p and y > z") == "x \n z\n\nand\ny"  # attribute names kept


def test_what_a_browser_does_not_draw_leaves_the_words_it_was_put_in() -> None:
    """Hidden, fallback and annotation contents put inside words (a review: ``tzhe qzuick``
    where a browser shows "the quick") go after the shown text."""
    for inside in (
        "<span hidden>z</span>",
        "<rp>z</rp>",
        "<rt>z</rt>",
        "<datalist>z</datalist>",
        "<audio>z</audio>",
        "<canvas>z</canvas>",
        "<script>z</script>",
    ):
        shown = html_as_text(f"t{inside}he q{inside}uick").split("\n")[0]
        assert shown == "the quick", inside
    nested = html_as_text("<p hidden><b hidden>x</b><audio>y</audio></p>after")
    assert nested.split("\n")[0] == "after" and "xy" in nested.split("\n")


def test_what_a_browser_draws_apart_is_apart() -> None:
    assert html_as_text("<search>the</search><search>quick</search>").split() == ["the", "quick"]
    assert html_as_text("<button>the</button><button>quick</button>").split() == ["the", "quick"]
    assert html_as_text("<textarea>the</textarea><select><option>quick</select>").split() == [
        "the",
        "quick",
    ]
    shown = html_as_text("<input value=the size=5><input type=submit value=quick>")
    assert shown.split("\n")[0].split() == ["the", "quick"]
    hidden = html_as_text("<input type=hidden value=secret>x").split("\n")
    assert hidden[0].split() == ["x"] and hidden[1:] == ["hidden", "secret"]


def test_documents_within_the_document_are_read_as_html() -> None:
    assert html_as_text("<iframe srcdoc='&lt;b>the&lt;/b>&amp;nbsp;quick'></iframe>") == (
        "\nthe\xa0quick"
    )
    assert html_as_text("<!--[if mso]><b>the</b> quick<![endif]-->") == (
        "\n[if mso]>the quick\n[endif]"
    )
    assert html_as_text("<noembed><b>the</b> quick</noembed>") == "\nthe quick"
    # nested deeper than MAX_DEPTH: kept as written, not an error
    deep = "<template>" * 1000 + "deep" + "</template>" * 1000
    assert "deep" in html_as_text(deep)


def test_what_the_parser_drops_is_kept() -> None:
    assert html_as_text("<!DOCTYPE the quick>hi") == "hi\nthe quick"
    assert html_as_text("<p the quick>hi</p>") == "\nhi\n\nthe\nquick"
    assert html_as_text("hi</p title='the quick'>") == "hi\n\n\ntitle='the quick'"


def test_malformed_markup_is_read_as_a_browser_reads_it() -> None:
    assert html_as_text("<b>bold <i>both</b> after") == "bold both after"
    assert html_as_text("text <!-- never closed") == "text \nnever closed"
    # a bogus comment, as HTML5 reads "<!" not followed by "--"
    assert html_as_text("a <![x hidden]> b") == "a  b\n[x hidden]"
    assert html_as_text("<plaintext>rest <b>x") == "\nrest <b>x\n"


def test_a_text_without_markup_is_the_same_object() -> None:
    text = "no markup here: 775-568-2052"
    assert html_as_text(text) is text


_WORD = st.text(
    alphabet=st.characters(blacklist_categories=("Cs", "Cc", "Z"), blacklist_characters="<&"),
    min_size=1,
    max_size=8,
)
_INLINE = ("span", "b", "i", "font", "a", "em", "u", "o:p")


@settings(max_examples=300, deadline=None)
@given(
    words=st.lists(_WORD, min_size=1, max_size=12),
    tags=st.lists(st.sampled_from(_INLINE), min_size=12, max_size=12),
    spaces=st.lists(st.sampled_from([" ", "&nbsp;", "&#32;", "\n"]), min_size=12, max_size=12),
)
def test_words_in_inline_elements_read_as_the_words(
    words: list[str], tags: list[str], spaces: list[str]
) -> None:
    """Any words, each in an inline element and separated by a space written as a space, a
    reference or a line break, read as the same words (an n-gram of the plain text is
    one of the HTML's). ``>`` and quotes in words are text too."""
    html = "".join(
        f"<{tag}>{word.replace('>', '&gt;')}</{tag}>" + (space if i < len(words) - 1 else "")
        for i, (word, tag, space) in enumerate(zip(words, tags, spaces, strict=False))
    )
    assert html_as_text(html).split() == [w for word in words for w in word.split()]


@settings(max_examples=500, deadline=None)
@given(
    st.lists(
        st.sampled_from(
            [
                *list("<!&[]-a>/ '\"?=;#x1b"),
                "<!--",
                "<![CDATA[",
                "]]>",
                "-->",
                "<?",
                "&#",
                "</",
                "<p>",
            ]
        ),
        max_size=40,
    ).map("".join)
)
def test_any_text_is_read(text: str) -> None:
    """Markup that the standard library's parser fails on (``<![x``: an AssertionError)
    is read as a browser reads it; no text is an error."""
    assert isinstance(html_as_text(text), str)


RECORD = "Jill Rose lives at 12 Oak Street"
REVERSED_BDI = " ".join(f"<bdi>{word}</bdi>" for word in RECORD.split()[::-1])


def test_directions_html_sets_are_read_as_displayed() -> None:
    """``bdo`` overrides the direction of its contents, ``dir`` makes an element an
    isolate of that direction (inherited by the blocks inside it without one of their
    own), ``bdi`` one of its contents' direction: a browser displays each of these as
    the words or the number, and that is how they read."""
    policy = TextPolicy(markup="html")
    cases = {
        "Call <bdo dir=rtl>2502-865-577</bdo> now": "Call 775-568-2052 now",
        "<bdo dir=RTL>(cba)</bdo>": "(abc)",  # reversed and drawn mirrored
        "<span dir=rtl><span dir=ltr>world</span> <span dir=ltr>hello</span></span>": (
            "hello world"
        ),
        "<div dir=rtl><p><b dir=ltr>two</b> <b dir=ltr>one</b></p>"
        "<p dir=ltr><b>three</b> <b>four</b></p></div>": "one two\nthree four",
        "<bdi>abc</bdi> <bdo dir=ltr>def</bdo>": "abc def",
        # the root's direction goes to the body (nothing can stand beside the root)
        "<html dir=rtl><body><b dir=ltr>world</b> <b dir=ltr>hello</b></body></html>": (
            "hello world"
        ),
        # a block inherits a bdo's direction, not its override
        "<bdo dir=rtl><p>hello world</p></bdo>": "hello world",
        # a dir HTML does not read (" rtl") is no direction: bdo overrides left to right
        '<bdo dir=" rtl">dlrow olleh</bdo>': "dlrow olleh",
        # a block ends no ancestor's direction (a second review, helper 52): the text
        # after it goes on right to left; an invalid dir sets none; a bdo without one
        # overrides with its ancestor's; a line break goes on with the override
        "<div dir=rtl><hr>" + REVERSED_BDI: RECORD,
        "<div dir=rtl><div dir=x><p>" + REVERSED_BDI: RECORD,
        "<body dir=rtl><div>a</div>" + REVERSED_BDI: "a\n" + RECORD,
        f"<div dir=rtl><bdo>{RECORD[::-1]}</bdo></div>": RECORD,
        "<bdo dir=rtl>olleh<br>dlrow</bdo>": "hello\nworld",
    }
    for html, shown in cases.items():
        read = normalize_text(pd.Series([html]), policy).iloc[0]
        assert [line for line in read.split("\n") if line][: shown.count("\n") + 1] == (
            shown.split("\n")
        ), html


def test_directed_text_reads_as_a_browser_lays_it_out() -> None:
    """A line break or a tab in a directed element's text is a space on the screen, not
    the end of its override; ``bdo dir=auto`` overrides in the direction of its first
    strong character; a right-to-left table draws its cells from the right. Each had
    shown a copy that read reversed."""
    policy = TextPolicy(markup="html")
    backwards = RECORD[::-1]  # "teertS kaO 21 ta sevil esoR lliJ"
    broken = backwards.replace(" ", "\n", 2).replace(" ", "\t", 1)
    words = RECORD.split()
    cases = {
        f"<bdo dir=rtl>{broken}</bdo>": RECORD,
        "<p dir=rtl>" + "\n".join(f"<bdi>{w}</bdi>" for w in words[::-1]) + "</p>": RECORD,
        f"<p>x <bdo dir=rtl>{broken}</bdo> y</p>": f"x {RECORD} y",
        # dir=auto: the first strong character, here a right-to-left mark (the text of
        # a bdi or of an element with a dir of its own does not count)
        f"<bdo dir=auto><b dir=ltr>x</b>\u200f{backwards}</bdo>": RECORD + "x",
        f"<bdo dir=auto>{backwards}</bdo>": backwards,
        # the rows of an rtl table: as written, then as drawn
        "<table dir=rtl><tr>" + "".join(f"<td>{w}</td>" for w in words[::-1]) + "</tr>": (
            "\t".join(words[::-1]) + "\t\n" + "\t".join(words)
        ),
        "<div dir=rtl><table><tr><td>b</td><td>a</td></tr></table></div>": "b\ta\t\na\tb",
        "<table dir=auto><tr><td>\u05d1</td><td>\u05d0</td></tr></table>": (
            "\u05d1\t\u05d0\t\n\u05d0\t\u05d1"
        ),
    }
    for html, shown in cases.items():
        read = normalize_text(pd.Series([html]), policy).iloc[0]
        assert shown in read.replace("  ", " "), (html, read)
    # white space that a browser shows as written stays so; an ltr table is not mirrored
    kept = {
        f"<bdo dir=rtl><pre>{broken}</pre></bdo>": broken,
        "<table dir=ltr><tr><td>b</td><td>a</td></tr></table><bdi>c</bdi>": "b\ta\t",
    }
    for html, shown in kept.items():
        read = normalize_text(pd.Series([html]), policy).iloc[0]
        lines = read.strip().split("\n")
        assert lines[: shown.count("\n") + 1] == shown.split("\n"), (html, read)
        assert "a\tb" not in read, (html, read)  # nothing mirrored


@pytest.mark.timeout(60)
def test_automatic_directions_are_read_once() -> None:
    """A review: each block in a `bdo dir=auto`, and each table under a `dir=auto`, read
    the element's whole text again to find its direction: 4,000 of them took 125 s and
    252 s for one text of 96 and 176 KB (the first strong character never comes)."""
    blocks = "<bdo dir=auto>" + "<p>1 2 3 4 5 6 7 8 9</p>" * 4000 + "</bdo>"
    tables = "<div dir=auto>" + "<table><tr><td>1</td><td>2</td></tr></table>" * 4000
    assert html_as_text(blocks).split().count("5") == 4000
    assert html_as_text(tables).split().count("2") == 4000  # no strong character: ltr


def test_nested_directions_cost_what_their_text_costs() -> None:
    """A block reopens at most 125 ancestors' directions, UAX #9's deepest level (a
    review timed 1,000 nested bdi around 1,000 paragraphs at 141 s, a text of 2 M
    characters; 300 and 300 here)."""
    html = "<bdi>" * 300 + "<p>a</p>" * 300
    read = normalize_text(pd.Series([html]), TextPolicy(markup="html")).iloc[0]
    assert read.split() == ["a"] * 300


def test_markup_is_read_before_the_other_steps() -> None:
    """A character reference may spell a character the next steps fold or remove: a
    Cyrillic lookalike, a zero-width space, a no-break space."""
    texts = pd.Series(["<b>J&#1072;ck</b>&nbsp;R&#8203;ose", "plain text", "<p>x</p>"])
    read = normalize_text(texts, TextPolicy(markup="html"))
    assert read.tolist() == ["Jack Rose", "plain text", "\nx\n"]
    assert normalize_text(texts, TextPolicy()).tolist() == [
        "<b>J&#1072;ck</b>&nbsp;R&#8203;ose",
        "plain text",
        "<p>x</p>",
    ]


NGRAM_POLICY = """\
version: 1
name: markup
text:
  markup: {markup}
audits:
  disclosure:
    features:
      - class: ngram
        n_min: 8
        n_max: 16
    thresholds:
      max_epsilon: 1.0
"""


def _as_html(text: str) -> str:
    """A text as an HTML e-mail client might write it: a paragraph per line, a span per
    word, no-break spaces between words."""
    return "".join(
        "<p>" + "&nbsp;".join(f"<span>{w}</span>" for w in line.split()) + "</p>"
        for line in text.split("\n")
    )


def _ngram_check(tmp_path: Path, name: str, *, markup: str, release: Path) -> dict:
    split = EXAMPLE / "split"
    check_release(
        policy=write_policy(tmp_path / f"{name}.yaml", NGRAM_POLICY.format(markup=markup)),
        train=split / "train.jsonl",
        holdout=split / "holdout.jsonl",
        synthetic=release,
        out_dir=tmp_path / name,
        mlflow=False,
        seed=0,
    )
    return read_report(tmp_path / name)["audits"]["disclosure"]["metrics"]


@pytest.fixture(scope="module")
def train_records() -> list[dict]:
    lines = (EXAMPLE / "split" / "train.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines]


def test_a_copy_written_as_html_is_the_plain_copy(
    tmp_path: Path, train_records: list[dict]
) -> None:
    """The bundled example's train copied as HTML hid every copied n-gram from the class
    (ε̂ 0); read as HTML it is the plain copy: the same T, H and ε̂."""
    plain = write_jsonl(
        tmp_path / "plain.jsonl",
        ({"record_id": f"s{i}", "text": r["text"]} for i, r in enumerate(train_records)),
    )
    html = write_jsonl(
        tmp_path / "html.jsonl",
        ({"record_id": f"s{i}", "text": _as_html(r["text"])} for i, r in enumerate(train_records)),
    )
    copy = _ngram_check(tmp_path, "plain", markup="none", release=plain)
    hidden = _ngram_check(tmp_path, "hidden", markup="none", release=html)
    read = _ngram_check(tmp_path, "read", markup="html", release=html)
    assert copy["ngram.train_disclosures"] > 100 and copy["ngram.epsilon_lower"] > 1
    assert hidden["ngram.train_disclosures"] == 0 and hidden["ngram.epsilon_lower"] == 0
    for key in ("ngram.train_disclosures", "ngram.holdout_disclosures", "ngram.epsilon_lower"):
        assert read[key] == copy[key], key


def test_the_shown_text_leaves_out_what_the_html_holds_but_does_not_show() -> None:
    html = (
        '<p>Call <a href="mailto:jill@example.org">Jill</a> &amp; co</p><!-- note -->'
        "<span hidden>secret</span>"
    )
    assert html_shown_text(html) == "\nCall Jill & co\n"
    assert html_as_text(html) == "\nCall Jill & co\n\nmailto:jill@example.org\nnote\nhidden\nsecret"
    assert html_shown_text("plain & text") == "plain & text"


_SKELETON_PARTS = [
    *("<p>", "</p>", "<br>", "<br/>", "<s>", "</s>", "<b>", "</B >", "<li>", "<SPAN\t>"),
    *("<script>", "</script>", "<style>", "</style>", "<pre>", "</pre>", "<textarea>"),
    *("</textarea>", "<title>", "</title>", "<table>", "<tr>", "<td>", "</td>", "</table>"),
    *("<frameset>", "<ruby>", "<rt>", "</rt>", "<template>", "</template>", "<iframe>"),
    *("</iframe>", "<noembed>", "<noframes>", "<plaintext>", "<xmp>", "</xmp>", "<select>"),
    *("<option>", "<colgroup>", "<head>", "<html>", "</html>", "<body>", "</body>", "<bdi>"),
    *("<bdo>", "</bdo>", "<o:p>", "<a href='x'>", "<p dir=rtl>", "<!-- c -->", "<!doctype x>"),
    *("&amp;", "&nbsp;", "&lt;", "&copy2024", "&", "<", ">", "\r\n", "\x0c", "\x00", "\xa0"),
    *("\ufdd0", "\ue123", "<jill@example.org>", "</s x>", " ", "\n", "\t"),
]
_SKELETON_WORDS = [
    *("hello", "a b", "x\ty", "line\nbreak", "123", "שלום", "é", "it's", 'say "hi"', "a=b"),
    *("end ", " start", "\n", "  ", "-->", "--", "x>y", "Jill Rose", "555-0142", "w1 w2 w3"),
    *("\ufeffa", "x\ry", "AT&T", "1 < 2", "\u200fb", "\u202eab", "a\x00b", "\U0001f600"),
]


def test_texts_read_through_their_skeleton_read_as_each_alone() -> None:
    """Texts that differ only in their words are parsed once, as a skeleton with a mark
    for each run of words (:func:`read_html_texts`): on texts made of tags that change how
    HTML reads the text in them (raw text, tables, framesets, ruby, templates, documents
    within the document) and of words with white space, quotes and other scripts inside,
    each reading equals the text's own (mistakes each failed this test)."""
    rng = np.random.default_rng(13)
    texts = [
        "123<template>\x0c--></template><b>",  # a template's ">" is serialised "&gt;"
        "<frameset>a b</s>",  # a frameset keeps the space, drops the words and the mark
    ]
    for _ in range(2_000):
        slots = rng.integers(0, len(_SKELETON_PARTS) + 4, size=rng.integers(1, 9))
        for _ in range(3):  # three texts of one skeleton where their words allow
            words = rng.choice(len(_SKELETON_WORDS), size=len(slots))
            texts.append(
                "".join(
                    _SKELETON_PARTS[s] if s < len(_SKELETON_PARTS) else _SKELETON_WORDS[w]
                    for s, w in zip(slots, words, strict=True)
                )
            )
    for shown_only, read_alone in ((True, html_shown_text), (False, html_as_text)):
        assert read_html_texts(texts, shown_only=shown_only) == [read_alone(t) for t in texts]


def test_a_template_around_many_records_is_parsed_once(monkeypatch) -> None:
    parsed = []
    real = markup._read

    def counted(html: str, **kwargs):
        parsed.append(html)
        return real(html, **kwargs)

    monkeypatch.setattr(markup, "_read", counted)
    texts = [f"### Response: record {i} of Jill's</s>" for i in range(1000)]
    read = read_html_texts([*texts, "<p dir=rtl>x</p>"], shown_only=True)
    assert read[:2] == ["### Response: record 0 of Jill's", "### Response: record 1 of Jill's"]
    assert len(parsed) == 2  # the texts' skeleton, and the text with an attribute alone
    assert parsed[1] == "<p dir=rtl>x</p>"
