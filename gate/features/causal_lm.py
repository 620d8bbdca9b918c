"""Surprisal of records under a released causal language model, loaded offline.

``S(x) = -Σ_t ln P(x_{t+1} | x_{<=t}; M)``: the summed next-token negative
log-likelihood of a record (Stomakhin, F., 2025, *Framework for Privacy-Preserving
Synthesis of Textual Data*, §6.2, eq. of S(x)). A model directory is either a
transformers causal LM with its tokenizer (``save_pretrained``) or a checkpoint of the
gate's reference generator (byte vocabulary, marked by ``gate-generator.json``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from gate.errors import AuditError
from gate.features.byte_vocabulary import BOS, CHECKPOINT_FILE, PAD, padded_batch
from gate.progress import Progress


class ModelLoadError(AuditError):
    """The model directory cannot be loaded as a causal language model."""


@dataclass(frozen=True)
class CausalLm:
    """A loaded model, how it tokenizes a record, and its padding id."""

    model: Any
    encode: Callable[[str, int], list[int]]
    pad_id: int
    directory: Path
    kind: str  # "reference (bytes)" or the transformers model class


def load_causal_lm(directory: str | Path) -> CausalLm:
    """Load ``directory`` offline (never from a hub), in evaluation mode on the CPU.

    Raises:
        ModelLoadError: no such directory, or it is not a causal LM with a tokenizer.
    """
    import torch  # noqa: F401  (transformers needs it; fail here with a clear error)
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = Path(directory)
    if not (path / "config.json").is_file():
        raise ModelLoadError(f"{path}: not a model directory (no config.json)")
    try:
        model = AutoModelForCausalLM.from_pretrained(path, local_files_only=True).eval()
    except (OSError, ValueError, KeyError) as exc:
        raise ModelLoadError(f"{path}: cannot load a causal language model: {exc}") from exc
    if (path / CHECKPOINT_FILE).is_file():

        def encode_bytes(text: str, limit: int) -> list[int]:
            return [BOS, *text.encode("utf-8")][:limit]

        return CausalLm(model, encode_bytes, PAD, path, "reference (bytes)")
    try:
        tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
    except (OSError, ValueError, KeyError) as exc:
        raise ModelLoadError(f"{path}: cannot load the model's tokenizer: {exc}") from exc
    pad = tokenizer.pad_token_id
    if pad is None:
        pad = tokenizer.eos_token_id if tokenizer.eos_token_id is not None else 0

    def encode_tokens(text: str, limit: int) -> list[int]:
        ids = tokenizer(text, truncation=True, max_length=limit)["input_ids"]
        return list(ids)

    return CausalLm(model, encode_tokens, int(pad), path, type(model).__name__)


def record_surprisal(
    lm: CausalLm,
    texts: Sequence[str],
    *,
    batch_size: int,
    max_tokens: int,
    progress: Progress,
    description: str = "surprisal",
) -> np.ndarray:
    """``S(x)`` in nats of each text (its first ``max_tokens`` tokens, at most the model's
    context window; the first token is context, not scored). Batched by length, no
    gradients."""
    import torch

    window = getattr(lm.model.config, "max_position_embeddings", None) or getattr(
        lm.model.config, "n_positions", None
    )
    limit = min(max_tokens, window) if window else max_tokens
    encoded = [lm.encode(t, limit) for t in texts]
    lengths = np.array([len(e) for e in encoded])
    order = np.argsort(-lengths, kind="stable")
    out = np.zeros(len(encoded))
    device = next(lm.model.parameters()).device
    starts = range(0, len(encoded), batch_size)
    with torch.no_grad():
        for start in progress.track(starts, total=len(starts), description=description):
            rows = order[start : start + batch_size]
            chunk = [encoded[i] for i in rows]
            width = max(2, int(lengths[rows].max()))
            ids = torch.from_numpy(padded_batch(chunk, length=width, pad=lm.pad_id)).to(device)
            mask = torch.from_numpy(np.arange(width)[None, :] < lengths[rows][:, None]).to(device)
            logits = lm.model(input_ids=ids, attention_mask=mask.long()).logits[:, :-1].float()
            nll = torch.nn.functional.cross_entropy(
                logits.reshape(-1, logits.shape[-1]), ids[:, 1:].reshape(-1), reduction="none"
            ).view(ids.shape[0], -1)
            out[rows] = (nll * mask[:, 1:]).sum(dim=1).double().cpu().numpy()
    return out
