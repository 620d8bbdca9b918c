"""Crafting canaries: an in-distribution prefix and a suffix sampled from a base LM at a
target perplexity (Meeus et al., 2025, *The Canary's Echo*, §3.2; docs/methods.md §8).

The base LM is the reference generator trained on the canary-source records only (a split
that is neither train nor holdout, or public text), so crafting never touches the data the
audited generator is trained on.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from gate.errors import AuditError
from gate.generators.base import FitReport
from gate.generators.reference import ReferenceConfig, ReferenceGenerator
from gate.progress import Progress
from gate.seeds import stream_seed
from gate.stats.canary import TemperatureSearch, in_perplexity_window, search_temperature

SEARCH_BATCH = 48  # canaries per perplexity measurement of the temperature search
CANDIDATES = 4  # suffixes drawn per missing canary in each rejection round
REJECTION_ROUNDS = 40
REPICK_EVERY = 8  # rounds after which a slot still empty draws a new prefix record
# streams of the crafting seed beyond the base LM's own (GeneratorStream 0-3)
SEARCH_STREAM = 4
REJECTION_STREAM = 5  # keyed (REJECTION_STREAM, round)


@dataclass(frozen=True)
class CanarySet:
    """Canaries with their prefixes, the canary-source record each prefix came from and
    their per-byte perplexity under the base LM."""

    texts: tuple[str, ...]
    prefixes: tuple[str, ...]
    source_record_ids: tuple[str, ...]
    perplexities: np.ndarray
    target_perplexity: float
    search: TemperatureSearch
    suffixes_drawn: int
    base_lm: FitReport


def _prefix_pool(source: pd.DataFrame, prefix_words: int) -> pd.DataFrame:
    words = source["text"].str.split()
    usable = source[words.str.len() >= max(prefix_words, 1)].copy()
    usable["prefix"] = words[usable.index].str[:prefix_words].str.join(" ")
    return usable


class _SuffixSampler:
    """Canaries ``prefix + suffix`` of exactly ``total_words`` whitespace words, the suffix
    continued by the base LM; a draw that yields too few words has infinite perplexity."""

    def __init__(
        self, model: ReferenceGenerator, *, suffix_words: int, bytes_per_word: float
    ) -> None:
        self.model = model
        self.suffix_words = suffix_words
        self.wanted_bytes = int(max(16, 1.6 * bytes_per_word * suffix_words + 16))

    def draw(
        self, prefixes: list[str], *, temperature: float, seed: int
    ) -> tuple[list[str], np.ndarray]:
        prompts = [p + " " if p else "" for p in prefixes]
        longest = max(len(p.encode("utf-8")) for p in prompts)
        room = self.model.config.max_length - 1 - longest  # <bos> + prompt + suffix must fit
        if room < 8:
            raise AuditError(
                f"canary prefixes of {longest} bytes leave no room for a suffix in the base "
                f"LM's max_length {self.model.config.max_length}; raise base_lm.config."
                "max_length or lower prefix_words"
            )
        continuations = self.model.continue_texts(
            prompts, temperature=temperature, max_new_bytes=min(room, self.wanted_bytes), seed=seed
        )
        texts: list[str] = []
        complete = np.zeros(len(prefixes), dtype=bool)
        for i, (prefix, more) in enumerate(zip(prefixes, continuations, strict=True)):
            words = more.split()[: self.suffix_words]
            complete[i] = len(words) == self.suffix_words
            texts.append(" ".join([*prefix.split(), *words]))
        perplexity = np.full(len(texts), np.inf)
        if complete.any():
            perplexity[complete] = self.model.byte_perplexities(
                [t for t, ok in zip(texts, complete, strict=True) if ok]
            )
        return texts, perplexity


def craft_canaries(
    source: pd.DataFrame,
    *,
    count: int,
    prefix_words: int,
    total_words: int,
    target_perplexity: float,
    base_config: ReferenceConfig,
    base_epochs: int,
    seed: int,
    rng: np.random.Generator,
    progress: Progress,
) -> CanarySet:
    """Train the base LM on ``source`` and craft ``count`` distinct canaries whose
    per-byte perplexity under it lies in ``[0.9, 1.1] * target_perplexity``.

    Args:
        source: canary-source records (columns record_id, text).
        count: canaries to craft.
        prefix_words: F, words of a source record opening each canary (0 = none).
        total_words: words of every canary.
        target_perplexity: P_target, per byte under the base LM.
        base_config: the base LM's reference-generator settings.
        base_epochs: its training epochs.
        seed: seed of the base LM (its initialisation, batches and sampling) and, through
            streams of its own, of the temperature search's and the rejection rounds' draws.
        rng: picks the prefix records (and new ones for slots rejection sampling cannot
            fill with theirs).
        progress: progress reporter.

    Raises:
        AuditError: no source record has F words, or the perplexity window cannot be
            reached (the message gives the perplexities the base LM does reach).
    """
    pool = _prefix_pool(source, prefix_words)
    if pool.empty:
        raise AuditError(
            f"no canary-source record has {prefix_words} words for a canary prefix "
            f"({len(source)} records); lower prefix_words or give longer records"
        )
    base = ReferenceGenerator(base_config, seed=seed)
    with progress.step(f"training the canaries' base LM on {len(source)} canary-source records"):
        fit = base.fit([[t] for t in source["text"]], epochs=base_epochs, progress=progress)
    picks = rng.choice(len(pool), size=count, replace=len(pool) < count)
    prefixes = pool["prefix"].to_numpy()[picks].tolist()
    record_ids = pool["record_id"].to_numpy()[picks].astype(str).tolist()
    words = source["text"].str.split().str.len().sum()
    sampler = _SuffixSampler(
        base,
        suffix_words=total_words - prefix_words,
        bytes_per_word=float(source["text"].str.len().sum()) / max(int(words), 1),
    )

    probe = prefixes[:SEARCH_BATCH]
    search_seed = stream_seed(seed, SEARCH_STREAM)
    with progress.step(f"searching the temperature for perplexity {target_perplexity:g}"):
        search = search_temperature(
            lambda t: float(np.median(sampler.draw(probe, temperature=t, seed=search_seed)[1])),
            target=target_perplexity,
        )
    texts: list[str | None] = [None] * count
    perplexities = np.full(count, np.nan)
    drawn = 0
    with progress.step("rejection-sampling canary suffixes"):
        for round_ in range(REJECTION_ROUNDS):
            missing = [i for i in range(count) if texts[i] is None]
            if not missing:
                break
            if round_ and round_ % REPICK_EVERY == 0:
                # a prefix whose canaries stay outside the window at this temperature (too
                # predictable or too odd) gives its slot to another canary-source record
                picks = rng.integers(0, len(pool), size=len(missing))
                for i, pick in zip(missing, picks, strict=True):
                    prefixes[i] = str(pool["prefix"].iloc[pick])
                    record_ids[i] = str(pool["record_id"].iloc[pick])
            candidates = [i for i in missing for _ in range(CANDIDATES)]
            drafts, ppl = sampler.draw(
                [prefixes[i] for i in candidates],
                temperature=search.temperature,
                seed=stream_seed(seed, REJECTION_STREAM, round_),
            )
            drawn += len(candidates)
            inside = in_perplexity_window(ppl, target=target_perplexity)
            taken = {t for t in texts if t is not None}
            for i, text, p, ok in zip(candidates, drafts, ppl, inside, strict=True):
                if ok and texts[i] is None and text not in taken:
                    texts[i], perplexities[i] = text, p
                    taken.add(text)
    filled = sum(t is not None for t in texts)
    if filled < count:
        raise AuditError(
            f"only {filled} of {count} canaries reached perplexity {target_perplexity:g} ± 10% "
            f"under the base LM after {drawn} suffix draws (the temperature search reached "
            f"{search.perplexity:.3g} at temperature {search.temperature:.3g}); choose a "
            "target_perplexity nearer that value"
        )
    return CanarySet(
        texts=tuple(t for t in texts if t is not None),
        prefixes=tuple(prefixes),
        source_record_ids=tuple(record_ids),
        perplexities=perplexities,
        target_perplexity=target_perplexity,
        search=search,
        suffixes_drawn=drawn,
        base_lm=fit,
    )
