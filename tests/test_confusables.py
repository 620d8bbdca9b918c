"""The fold of non-ASCII lookalikes to ASCII (gate.data.confusables): the reader of
Unicode's list on hand-made lines, the choice of the ASCII character on a hand-made
list, and the real table's invariants and best-known entries."""

from __future__ import annotations

import re
import unicodedata

import pandas as pd
import pytest

from gate.data.confusables import (
    ascii_lookalikes,
    ascii_lookalikes_of,
    confusables_file,
    digit_lookalikes,
    digit_lookalikes_of,
    fold_confusables,
    read_prototypes,
)

LINES = [
    "\ufeff# confusables.txt",
    "# Version: 13.0.0",
    "",
    "0430 ;\t0061 ;\tMA\t# ( а → a ) CYRILLIC SMALL LETTER A → LATIN SMALL LETTER A\t# ",
    "006D ;\t0072 006E ;\tMA\t# ( m → rn )",
    "11700 ;\t0072 006E ;\tMA\t# ( 𑜀 → rn ) AHOM LETTER KA",
    "0022 ;\t0027 0027 ;\tMA\t#* ( \" → '' )",
    "201C ;\t0027 0027 ;\tMA\t#* ( “ → '' )",
    "A4FA ;\t002E 002E ;\tMA\t#* ( ꓺ → .. ) LISU LETTER TONE MYA CYA",
    "0031 ;\t006C ;\tMA\t# ( 1 → l )",
    "0049 ;\t006C ;\tMA\t# ( I → l )",
    "007C ;\t006C ;\tMA\t#* ( | → l )",
    "0406 ;\t006C ;\tMA\t# ( І → l ) CYRILLIC CAPITAL LETTER BYELORUSSIAN-UKRAINIAN I",
    "04CF ;\t006C ;\tMA\t# ( ӏ → l ) CYRILLIC SMALL LETTER PALOCHKA",
    "2223 ;\t006C ;\tMA\t#* ( ∣ → l ) DIVIDES",
    "05D5 ;\t006C ;\tMA\t# ( ו → l ) HEBREW LETTER VAV",
    "0661 ;\t006C ;\tMA\t# ( ١ → l ) ARABIC-INDIC DIGIT ONE",
    "0C02 ;\t006F ;\tMA\t# ( ం → o ) TELUGU SIGN ANUSVARA",
    "217F ;\t006D ;\tMA\t# ( ⅿ → m ) SMALL ROMAN NUMERAL ONE THOUSAND",
    "05AD ;\t0596 ;\tMA\t# ( ֭ → ֖ ) HEBREW ACCENT DEHI → HEBREW ACCENT TIPEHA",
]


def test_the_reader_takes_source_and_prototype_and_names_a_bad_line() -> None:
    prototypes = read_prototypes(LINES)
    assert prototypes["\u0430"] == "a" and prototypes["m"] == "rn" and prototypes['"'] == "''"
    assert len(prototypes) == len([line for line in LINES if line[:1].isalnum()])
    with pytest.raises(ValueError, match=r"line 2: 2 fields, expected 3"):
        read_prototypes(["# header", "0430 ; 0061"])
    with pytest.raises(ValueError, match=r"line 1: .*'0430 0431 ; 0061 ; MA'"):
        read_prototypes(["0430 0431 ; 0061 ; MA"])


def test_each_source_gets_the_ascii_character_it_passes_for() -> None:
    """Hand-made groups: the group's one ASCII character (а → a, 𑜀 → m, “ → "), an ASCII
    prototype when the group has none (ꓺ → ..), the source's kind in the l 1 I | group, a
    digit as its digit; marks, characters that NFKD makes ASCII, ASCII sources and
    groups without ASCII are not folded."""
    table = ascii_lookalikes_of(read_prototypes(LINES))
    folded = {chr(k): v for k, v in table.items() if unicodedata.category(chr(k)) != "Nd"}
    assert folded == {
        "\u0430": "a",
        "\U00011700": "m",
        "\u201c": '"',
        "\ua4fa": "..",
        "\u0406": "I",  # upper-case letter
        "\u04cf": "l",  # lower-case letter
        "\u2223": "|",  # a symbol
        "\u05d5": "l",  # another letter: the prototype
    }
    assert table[0x0661] == "1"  # a digit, whatever its group
    digits = [c for c in range(0x80, 0x110000) if unicodedata.category(chr(c)) == "Nd"]
    assert {c: table[c] for c in digits} == {c: str(unicodedata.decimal(chr(c))) for c in digits}


def test_the_real_table() -> None:
    """Unicode's list as shipped: every key a non-ASCII character that is not a mark and
    that NFKD does not make ASCII, or a digit; every value ASCII; the best-known
    lookalikes, the supplement and the lunate sigmas (NFKD makes them ς and Σ)."""
    assert "Unicode Security Mechanisms for UTS #39" in confusables_file().read_text("utf-8-sig")
    table = ascii_lookalikes()
    assert len(table) > 1000
    for code, value in table.items():
        char = chr(code)
        assert code >= 0x80 and value and value.isascii(), hex(code)
        if unicodedata.category(char) != "Nd":
            assert not unicodedata.category(char).startswith("M"), hex(code)
            decomposed = unicodedata.normalize("NFKD", char)
            assert decomposed == char or not decomposed.isascii(), hex(code)
    cyrillic = "аеорсхуАВЕКМНОРСТХІј"
    assert "".join(table[ord(c)] for c in cyrillic) == "aeopcxyABEKMHOPCTXIj"
    greek = "οΑΒΕΖΗΙΚΜΝΟΡΤΧ"
    assert "".join(table[ord(c)] for c in greek) == "oABEZHIKMNOPTX"
    assert [table[ord(c)] for c in "“”‘’–١٣"] == ['"', '"', "'", "'", "-", "1", "3"]
    assert [table[ord(c)] for c in "\u03f2\u03f9\u051a\u053c\u058a"] == ["c", "C", "Q", "L", "-"]
    assert ord("\u017f") not in table  # long s: NFKC reads it as s


def test_digits_drawn_like_another_digit() -> None:
    """Hand-made: Bengali four is in 8's group, Gurmukhi one in 9's, Arabic-Indic five in
    o's (among digits, 0); Arabic-Indic one (beside l: read as 1 either way), a zero
    beside o and a digit whose group is its own digit are not listed."""
    lines = [
        "09EA ;\t0038 ;\tMA\t# ( ৪ → 8 ) BENGALI DIGIT FOUR → DIGIT EIGHT",
        "0A67 ;\t0039 ;\tMA\t# ( ੧ → 9 ) GURMUKHI DIGIT ONE → DIGIT NINE",
        "0665 ;\t006F ;\tMA\t# ( ٥ → o ) ARABIC-INDIC DIGIT FIVE",
        "0966 ;\t006F ;\tMA\t# ( ० → o ) DEVANAGARI DIGIT ZERO",
        "0661 ;\t006C ;\tMA\t# ( ١ → l ) ARABIC-INDIC DIGIT ONE",
        "1D7D0 ;\t0032 ;\tMA\t# ( 𝟐 → 2 ) MATHEMATICAL BOLD DIGIT TWO",
    ]
    assert digit_lookalikes_of(read_prototypes(lines)) == {
        0x09EA: "8",
        0x0A67: "9",
        0x0665: "0",
    }
    # Unicode 13's list: these eight
    assert digit_lookalikes() == {
        "\u09ea": "8",  # Bengali 4
        "\u09ed": "9",  # Bengali 7
        "\u0a67": "9",  # Gurmukhi 1
        "\u0a6a": "8",  # Gurmukhi 4
        "\u0b68": "9",  # Oriya 2
        "\u0d6d": "9",  # Malayalam 7
        "\u0665": "0",  # Arabic-Indic 5
        "\u06f5": "0",  # Extended Arabic-Indic 5
    }


@pytest.mark.parametrize(
    ("text", "folded"),
    [
        ("775-56\u09ea-2052", "775-568-2052"),  # a reader of the Latin digits reads 8
        ("call \u09ed75-\u09ea\u09ea\u09ea-2052", "call 975-888-2052"),
        ("\uff11\uff12\u09ea", "128"),  # among full-width digits too
        ("(775) 56\u09ea 2052", "(775) 568 2052"),
        ("\u09ed\u09ed\u09eb-\u09ea\u09ea\u09ea", "775-444"),  # Bengali alone: its value
        ("\u09ea apples and 5 pears", "4 apples and 5 pears"),  # not one number
        # a number broken over lines is one, as the phone recognizer reads it
        ("775-568\n\u09ea\u09ea\u09ed\u09ea", "775-568\n8898"),
        ("\u09ea\u09ea\u09ea\r\n545-4146", "888\r\n545-4146"),
        # Arabic-Indic and Persian digits share most glyphs: a mix is read by value
        ("\u0667\u0667\u0665-\u0665\u0666\u06f8-\u0662\u0660\u0665\u0662", "775-568-2052"),
        ("\u06f1\u06f3\u06f9\u0665", "1395"),
        ("775-568-2\u066552", "775-568-2052"),  # Arabic-Indic 5, drawn like o
        # between what the fold or NFKD makes digits only later (a review boxed ৪ in so)
        ("775-5\u0431\u09ea-\u01a7052", "775-568-2052"),  # Cyrillic б, Latin Ƨ
        ("775-5\u2076\u09ea-\u00b2052", "775-568-2052"),  # superscripts
        ("775-5\u2465\u09ea-\u2461052", "775-568-2052"),  # circled digits
        ("775-5\U0001d7d4\u09ea-2052", "775-568-2052"),  # a bold digit (beyond plane 0)
        ("775-568-\n\u09ea\u09ea\u09ea\u09ea", "775-568-\n8888"),  # a break after "-"
        ("\u09ed\u09ed\u09eb\u00a0\u09ea\u09ea\u09ea", "775 444"),  # Bengali alone
    ],
)
def test_a_digit_drawn_like_another_is_read_as_drawn_in_a_mixed_number(
    text: str, folded: str
) -> None:
    """A review wrote the 8s of the example's 70 train phone numbers as Bengali ৪ (which
    means 4): read by value, no number matched (PII ε̂ 2.864 → 0)."""
    assert fold_confusables(text, decompose="NFKD") == folded
    assert fold_confusables(text, decompose=None) == folded


def test_the_fold_keeps_accents_and_ascii() -> None:
    assert fold_confusables("Jіll Rоsе", decompose="NFKD") == "Jill Rose"
    # a lookalike under an accent is folded; the caller recomposes
    assert unicodedata.normalize("NFC", fold_confusables("\u0451", decompose="NFD")) == "ë"
    assert fold_confusables("José Müller", decompose="NFD") == unicodedata.normalize(
        "NFD", "José Müller"
    )
    printable = "".join(map(chr, range(32, 127)))
    assert fold_confusables(printable, decompose="NFKD") == printable
    assert fold_confusables("𝚨", decompose=None) == "A"  # NFKD makes it Greek Α: folded
    assert fold_confusables("𝚨", decompose="NFKD") == "A"


def test_a_text_of_many_lookalikes_folds_like_one_of_few() -> None:
    """Above 16 distinct foldable characters the fold is one str.translate pass: the same
    text as the one-by-one replacement (without the digits read as drawn in a number of
    mixed scripts, which consecutive digits of several scripts are)."""
    table = ascii_lookalikes()
    codes = sorted(c for c in table if chr(c) not in digit_lookalikes())
    many = "".join(chr(code) for code in codes[:400]) + " ok"
    assert fold_confusables(many, decompose=None) == many.translate(table)
    few = "".join(chr(code) for code in codes[:16])
    assert fold_confusables(few, decompose=None) == few.translate(table)


def test_letters_fold_in_words_of_latin_letters_and_lookalikes_only() -> None:
    """A review: the fold had written Russian, Arabic, Hebrew and Japanese text in mixed
    scripts (Пpивeт, lسلlم, שלlם, /ート); lookalike letters fold only in words without a
    letter of another script that has no ASCII lookalike; punctuation and digits fold
    everywhere."""
    from gate.data.normalize import normalize_text
    from gate.policy.models import TextPolicy

    others = [
        "Привет, как дела? Анна Петрова.",
        "السلام عليكم، اسمي أحمد",
        "שלום, קוראים לי דוד",
        "ノートとペン",
        "Καλημέρα σας",
    ]
    assert normalize_text(pd.Series(others), TextPolicy()).tolist() == [
        unicodedata.normalize("NFKC", t) for t in others
    ]
    mixed = pd.Series(["Jіll Rоsе wrote а note «to» Анна: ٣ “items”"])
    assert normalize_text(mixed, TextPolicy()).tolist() == [
        'Jill Rose wrote a note «to» Анна: 3 "items"'
    ]


def test_lookalikes_through_compatibility_forms_and_dots() -> None:
    """A review: lunate sigma (NFKC makes it ς), dotless i and j under a dot above, and a
    letter missing from Unicode's list had read as other text than c, i, j and Q."""
    from gate.data.normalize import normalize_text
    from gate.policy.models import TextPolicy

    texts = pd.Series(["\u03f2at \u03f9at", "b\u0131\u0307rd \u0237\u0307am", "\u051aueen"])
    for form in ("NFKC", "NFC"):
        got = normalize_text(texts, TextPolicy(normalization=form)).tolist()
        assert got == ["cat Cat", "bird jam", "Queen"], form


def test_compatibility_lookalikes_fold_in_every_normal_form() -> None:
    """Under NFKC the normal form reads ℓ, 𝖺 and full-width letters as ASCII; under NFC or
    none the fold does (they had hidden a copy from the n-gram class there). A
    compatibility form that is not ASCII (½ is 1⁄2) stays unless NFKC takes it; so do
    words of other scripts."""
    from gate.data.confusables import compatibility_lookalikes
    from gate.data.normalize import normalize_text
    from gate.policy.models import TextPolicy

    table = compatibility_lookalikes()
    assert table[0x2113] == "l" and table[0x1D5BA] == "a" and table[0xFB01] == "fi"
    assert 0xBD not in table  # ½
    beyond = [
        c
        for c in range(0x20000, 0x110000)
        if not 0xD800 <= c <= 0xDFFF and unicodedata.normalize("NFKD", chr(c)).isascii()
    ]
    assert beyond == []
    texts = pd.Series(
        ["\u2113ate \U0001d5ba \uff46\uff55\uff4c\uff4c \u00b2 \u00bd", "Привет \u2113"]
    )
    for form in ("NFKC", "NFC", "none"):
        got = normalize_text(texts, TextPolicy(normalization=form)).tolist()
        half = "1/2" if form == "NFKC" else "\u00bd"  # the fraction slash folds
        assert got == [f"late a full 2 {half}", "Привет l"], form
        accented = normalize_text(
            pd.Series(["c\u0430f\u00e9 \u0451\u0436"]), TextPolicy(normalization=form)
        )
        assert accented.tolist() == ["caf\u00e9 \u0451\u0436"]  # é is a Latin letter
    kept = normalize_text(texts, TextPolicy(normalization="NFC", fold_confusables=False))
    assert kept.tolist() == texts.tolist()


_MARKS = "".join(
    re.escape(chr(c)) for c in range(0x300, 0x20000) if unicodedata.category(chr(c))[0] == "M"
)
_WORD = re.compile(f"[\\w{_MARKS}]+")


def _fold_word_by_word(text: str, letters: dict[str, str]) -> str:
    """The letter fold as first written (a regular-expression callback per word), with
    accented letters read by their base letter."""

    def fold(match: re.Match[str]) -> str:
        word = match.group()
        if any(
            c.isalpha()
            and not c.isascii()
            and c not in letters
            and not (b := unicodedata.normalize("NFD", c)[0]).isascii()
            and b not in letters
            for c in word
        ):
            return word
        return "".join(letters.get(c, c) for c in word)

    return _WORD.sub(fold, text)


def test_letters_fold_as_word_by_word() -> None:
    """The letter fold splits the text at runs of words of another script and replaces
    the rest: the same text as a check of every word, on random texts of Latin letters,
    lookalikes, Cyrillic and Greek letters without one, marks, digits, underscores,
    compatibility forms and separators, in every mode."""
    import numpy as np

    from gate.data.confusables import _fold_once, compatibility_lookalikes

    rng = np.random.default_rng(11)
    alphabet = list("abcXYZ019_ ,.-\n'") + list("аеорсхуАЕОВ") + list("бдфжБДЖλπΩ")
    alphabet += ["\u0301", "\u0308", "\u2113", "\U0001d5ba", "\uff46", "\u00b2", "\u2160"]
    alphabet += ["\u0660", "\u05d0", "\u3042", "\u0131", "\u01c5", "\u02b0", "\u1d2c"]
    alphabet += ["\u00e9", "\u0451", "\u01d6", "\uac00", "\u1e9b"]  # é ё ǖ 가 ẛ
    texts = ["".join(rng.choice(alphabet, int(rng.integers(0, 40)))) for _ in range(3000)]
    texts += ["", "x" * 5000 + "д", "д" + "x" * 5000, "а " * 500 + "б"]
    for compatibility in (False, True):
        table = dict(ascii_lookalikes())
        if compatibility:
            table = {**compatibility_lookalikes(), **table}
        letters = {chr(c): v for c, v in table.items() if unicodedata.category(chr(c))[0] == "L"}
        others = {chr(c): v for c, v in table.items() if unicodedata.category(chr(c))[0] != "L"}
        for text in texts:
            expected = _fold_word_by_word("".join(others.get(c, c) for c in text), letters)
            assert _fold_once(text, compatibility) == expected, (text, compatibility)


def test_normalising_twice_is_normalising_once() -> None:
    """With casefold too (Γ folds only as γ → y): every code point of planes 0 and 1."""
    from gate.data.normalize import normalize_text
    from gate.policy.models import TextPolicy

    points = [c for c in range(0x80, 0x20000) if not 0xD800 <= c <= 0xDFFF]
    digits = [c for c in points if unicodedata.category(chr(c)) == "Nd"]
    texts = pd.Series(
        ["x" + chr(c) + "y" for c in points]
        + ["5" + chr(c) + "5" for c in digits]  # mixed numbers
        + ["\u09ea" + chr(c) for c in digits]
        + ["Γειά ΓΑΤΑ ϲ"]
    )
    for policy in (TextPolicy(casefold=True), TextPolicy(normalization="NFC"), TextPolicy()):
        once = normalize_text(texts, policy)
        assert normalize_text(once, policy).tolist() == once.tolist(), policy


def test_the_policy_switch() -> None:
    from gate.data.normalize import normalize_text
    from gate.policy.models import TextPolicy

    texts = pd.Series(["Jіll Rоsе “called” at ٣:٠٥", "plain"])
    assert normalize_text(texts, TextPolicy()).tolist() == ['Jill Rose "called" at 3:05', "plain"]
    kept = normalize_text(texts, TextPolicy(fold_confusables=False)).tolist()
    assert kept == texts.tolist()
