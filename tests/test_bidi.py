"""Text read in the order it is displayed (``text.display_order``): UAX #9's line rules
on hand-made lines with their layouts worked out by hand, the reordering against
python-bidi's own layout on random lines, the blocks that hold every right-to-left
character, and the step's place among the normalisation steps."""

from __future__ import annotations

import random
import re
import unicodedata
from pathlib import Path

import pandas as pd
import pytest
from bidi import get_display

from gate.data import bidi
from gate.data.bidi import (
    ALM,
    BIDI_FORMATTING,
    LRI,
    LRM,
    LRO,
    PDF,
    PDI,
    RLE,
    RLI,
    RLM,
    RLO,
    display_layout,
    displayed_text,
)
from gate.data.normalize import normalize_text
from gate.policy.models import TextPolicy

from .conftest import check_args, unique_text, write_jsonl, write_policy


@pytest.mark.parametrize(
    ("line", "shown"),
    [
        # an override: every character right to left, the run reversed (L2)
        (f"{RLO}cba{PDF}", "abc"),
        (f"x {RLO}dlrow olleh{PDF} y", "x hello world y"),
        # a bracket in a right-to-left run is drawn mirrored (L4): "(cba)" reversed is
        # ")abc(", drawn "(abc)"
        (f"x {RLO}(cba){PDF}", "x (abc)"),
        # a combining mark stays after its base (L3): e + U+0301 reversed with x
        (f"{RLO}e\u0301x{PDF}", "xe\u0301"),
        # words written in reverse order, each a left-to-right run between right-to-left
        # marks in a right-to-left paragraph (P2: the first strong character is RLM)
        (f"{RLM}c{LRM}{RLM} {RLM}b{LRM}{RLM} {RLM}a{LRM}{RLM}", "a b c"),
        # the same with isolates: left-to-right isolates are neutrals in a right-to-left one
        (f"{RLI}{LRI}c{PDI} {LRI}b{PDI} {LRI}a{PDI}{PDI}", "a b c"),
        # L1: white space at the end of the line takes the paragraph's level. b is L in
        # an embedding of level 1 (level 2), the space after it 1 (between L and the
        # embedding's end, R); at 1 it would be reversed with b ("a  b")
        (f"a {RLE}b {PDF}", "a b "),
        # L1 for a segment separator: the tab takes the paragraph's level 1 (ALM is the
        # first strong character); everything else is at 2 (the override's L, and the
        # Arabic digit U+0661 raised by I2): the two runs at 2 swap around the tab
        (f"\u0661{LRO}  \u0661  {ALM}\t{PDI}\u05d1", "\u05d1\t\u0661  \u0661  "),
        # a right-to-left word between left-to-right ones, no formatting character
        ("ab \u05d0\u05d1 cd", "ab \u05d1\u05d0 cd"),
        # paragraphs are laid out one by one: no run crosses a line break, each has the
        # level of its own first strong character
        ("\u05d0\u05d1\n\u05d2\u05d3 x\r\nab", "\u05d1\u05d0\nx \u05d3\u05d2\r\nab"),
    ],
)
def test_lines_are_laid_out_as_uax9_lays_them_out(line: str, shown: str) -> None:
    assert display_layout(line) == shown


def test_a_reversed_copy_reads_as_what_it_displays() -> None:
    record = "Hey, Jill Rose (775) 568-2052 writing [about] an issue."
    mirror = str.maketrans("()[]", ")(][")
    assert displayed_text(RLO + record.translate(mirror)[::-1] + PDF) == record
    # each paragraph on its own: an override ends at a line break (X8)
    two = f"abc {RLO}fed{PDF} ghi\nsecond {RLO}enil\r\n{RLO}driht"
    assert displayed_text(two) == "abc def ghi\nsecond line\r\nthird"


def test_a_right_to_left_copy_in_display_order_reads_in_logical_order() -> None:
    """A Hebrew sentence written in the order it is drawn under a left-to-right override
    is displayed as the sentence; it reads as the sentence is written."""
    sentence = "\u05e9\u05dc\u05d5\u05dd \u05e2\u05d5\u05dc\u05dd."
    drawn = ".\u05dd\u05dc\u05d5\u05e2 \u05dd\u05d5\u05dc\u05e9"
    assert display_layout(sentence) == drawn
    # first as a renderer that takes the direction from the first strong character (ם)
    # shows it, then as one that sets left to right shows it
    assert displayed_text(LRO + drawn + PDF).split("\n")[0] == sentence


RECORD = "Jill Rose lives at Oak Street"
WORDS = RECORD.split()


@pytest.mark.parametrize(
    "release",
    [
        # words in reverse order between right-to-left characters strip_invisible removes
        " ".join(f"\u070f{word}\u070f" for word in WORDS[::-1]),
        " ".join(f"\u0640{word}\u0640" for word in WORDS[::-1]),
        # one override over lines a line separator ends: each line is laid out alone
        RLO + "\u2028".join(word[::-1] for word in WORDS) + PDF,
        # a paragraph made right to left by a mark, its words left-to-right isolates: a
        # renderer that sets the direction (left to right) shows the record
        RLM + " ".join(f"{LRI}{word}{PDI}" for word in WORDS),
        # the same made right to left by a visible character (a second review, helper 52)
        "\u05f3" + " ".join(f"{word}{RLM}" for word in WORDS),
    ],
    ids=[
        "syriac-abbreviation-marks",
        "tatweels",
        "line-separators",
        "direction-by-a-mark",
        "direction-by-a-letter",
    ],
)
def test_what_a_review_displayed_as_the_record_reads_as_it(release: str) -> None:
    """Each release is displayed as the record by a renderer (a review, helper 51); it
    reads as the record, on a line of its own where its display depends on the
    direction a renderer gives the paragraph."""
    read = normalize_text(pd.Series([release]), TextPolicy()).iloc[0]
    assert any(RECORD in line for line in read.split("\n")), read


def test_a_right_to_left_record_in_reverse_order_reads_as_a_browser_shows_it() -> None:
    """A Hebrew record's words in reverse order, each left to right of the next by a mark
    or a braille blank: a renderer that sets left to right shows the record."""
    record = "\u05e9\u05dc\u05d5\u05dd \u05e8\u05d1 \u05dc\u05db\u05dc"
    for joiner in (f"{LRM} ", "\u2800"):
        release = joiner.join(record.split()[::-1])
        read = normalize_text(pd.Series([release]), TextPolicy()).iloc[0]
        assert record in read.split("\n"), (joiner, read)


def test_a_joiner_between_a_letter_and_its_accent_stays_in_the_cluster() -> None:
    assert displayed_text(f"{RLO}e\u200d\u0301fac{PDF}") == "cafe\u200d\u0301"
    # a zero-width character before no mark stays where the layout puts it
    assert displayed_text(f"{RLO}ab\u200bcd{PDF}\u0301") == "d\u0301c\u200bba"


def test_a_mark_added_to_a_right_to_left_text_keeps_its_words_in_order() -> None:
    """The display is read again at the paragraph's own level (a review saw a trailing
    LRM turn a Hebrew sentence's runs around when the second layout took its level from
    the display); only the punctuation the mark moves is elsewhere."""
    sentence = "\u05d0\u05e0\u05d9 \u05d0\u05d5\u05d4\u05d1 \u05d1-Python!"
    right_to_left, left_to_right = displayed_text(sentence + LRM).split("\n")
    assert right_to_left.startswith("\u05d0\u05e0\u05d9 \u05d0\u05d5\u05d4\u05d1 \u05d1-")
    assert sorted(right_to_left) == sorted(sentence)
    assert left_to_right == sentence + LRM  # the mark changes nothing shown left to right


def test_every_invisible_character_that_directs_a_layout_is_looked_at() -> None:
    """Every character strip_invisible removes or reads as a space whose class sets or
    changes a direction (L, R, AL, AN, the explicit ones) makes the step look at the
    text."""
    from gate.data.normalize import _BLANK_LOOKALIKES, invisible_ranges

    directing = {"L", "R", "AL", "AN", "LRE", "RLE", "LRO", "RLO", "PDF", "LRI", "RLI", "FSI"}
    directing.add("PDI")
    invisible = [chr(c) for lo, hi in invisible_ranges() for c in range(lo, hi + 1)]
    invisible += [*_BLANK_LOOKALIKES, "\u0640"]
    found = [c for c in invisible if unicodedata.bidirectional(c) in directing]
    assert len(found) >= 35
    assert all(bidi.holds_bidi_formatting(c) for c in found), [
        hex(ord(c)) for c in found if not bidi.holds_bidi_formatting(c)
    ]


def test_formatting_that_changes_nothing_shown_is_left_to_strip() -> None:
    """A text without formatting characters is the same object; one whose marks change
    nothing a reader sees is left as written (strip_invisible removes them)."""
    plain = "no formatting at all"
    assert displayed_text(plain) is plain
    assert displayed_text(f"plain {LRM}text") == f"plain {LRM}text"
    hebrew = f"\u05d0\u05d1{RLM} \u05d2"
    assert displayed_text(hebrew) == hebrew


def test_the_reordering_is_python_bidis() -> None:
    """On random lines of letters of both directions, digits, punctuation and every
    formatting character (no brackets, combining marks or tabs, where the gate goes on
    with L3, L4 and L1 for separators), the order is python-bidi's ``get_display``."""
    alphabet = [*"ab c1.,-", "\u05d0", "\u05d1", "\u0627", "\u0661", " ", *BIDI_FORMATTING]
    formatting = re.compile(f"[{BIDI_FORMATTING}]")
    draw = random.Random(20261129)
    for _ in range(3000):
        line = "".join(draw.choice(alphabet) for _ in range(draw.randint(1, 30)))
        assert display_layout(line) == formatting.sub("", get_display(line)), repr(line)


def test_the_right_to_left_blocks_hold_every_right_to_left_character() -> None:
    """Outside them no character is of class R, AL or AN, so a text without them and
    without formatting characters is displayed as written."""
    right_to_left = [
        chr(point)
        for point in range(0x110000)
        if unicodedata.bidirectional(chr(point)) in ("R", "AL", "AN")
        and chr(point) not in BIDI_FORMATTING  # RLM and ALM
    ]
    assert len(right_to_left) > 1000
    assert all(bidi._RIGHT_TO_LEFT.match(char) for char in right_to_left)


def test_an_answer_of_another_form_is_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    """python-bidi's levels come from its debug answer; one the gate cannot read is an
    error, never a text read some other way."""
    _, mirrors = bidi._bidi()
    monkeypatch.setattr(
        bidi,
        "_bidi",
        lambda: (lambda text, base_dir, debug: "levels: 0 1 1", mirrors),
    )
    with pytest.raises(RuntimeError, match="python-bidi"):
        displayed_text(f"{RLO}cba{PDF}")


def test_a_layout_that_cannot_be_read_fails_the_check_closed(
    tmp_path: Path, bundle_files: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A release that holds a formatting character, with python-bidi answering in a form
    the gate does not read: the command exits 3 and writes no verdict (a text read some
    other way could hide a copy and pass)."""
    from gate.cli import main

    release = write_jsonl(
        tmp_path / "release.jsonl",
        [{"record_id": f"s{i}", "text": f"{RLO}{unique_text(i)[::-1]}{PDF}"} for i in range(10)],
    )
    files = {**bundle_files, "synthetic": release, "policy": write_policy(tmp_path / "p.yaml")}
    _, mirrors = bidi._bidi()
    monkeypatch.setattr(bidi, "_bidi", lambda: (lambda text, base_dir, debug: "?", mirrors))
    out = tmp_path / "out"
    assert main([*check_args(files, out), "--no-mlflow"]) == 3
    assert not (out / "report.json").exists()


def test_a_missing_text_stays_missing() -> None:
    """The Python API may pass a missing text (the bundle refuses one): it is left so."""
    read = normalize_text(pd.Series([f"a{RLO}b", None]), TextPolicy()).tolist()
    assert read[0] == "ab" and pd.isna(read[1])


def test_the_step_reads_before_the_invisible_characters_go() -> None:
    texts = pd.Series([f"x {RLO}dlrow olleh{PDF}\u200b y", "plain", f"a{LRM}b"])
    assert normalize_text(texts, TextPolicy()).tolist() == ["x hello world y", "plain", "ab"]
    kept = normalize_text(texts, TextPolicy(display_order=False)).tolist()
    assert kept == ["x dlrow olleh y", "plain", "ab"]
    untouched = TextPolicy(display_order=True, strip_invisible=False, fold_confusables=False)
    reordered, plain, marked = normalize_text(texts, untouched).tolist()
    assert "\u200b" in reordered and reordered.replace("\u200b", "") == "x hello world y"
    assert (plain, marked) == ("plain", f"a{LRM}b")
