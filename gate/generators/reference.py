"""The reference generator: a small Llama-style causal LM built from a config (no hub
download) over a byte-level vocabulary, trained per user with or without DP-SGD (Opacus).

Privacy of the tokenizer: the vocabulary is the 256 bytes plus four special tokens, fixed
before any data is seen. A BPE vocabulary learned from private train text can itself
carry rare strings (a merge for a rare name is a disclosure before the model is trained);
a byte vocabulary cannot.

Unit of privacy: one training example per user, ``<bos> record <sep> record ... <eos>``
truncated to ``max_length`` bytes, so DP-SGD's per-example clipping and Poisson sampling
(Opacus) bound each user's influence (user-level DP; records beyond ``max_length`` bytes
of a user are not trained on).
"""

from __future__ import annotations

import json
import logging
import math
import secrets
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
from pydantic import Field

from gate.features.byte_vocabulary import (
    BOS,
    CHECKPOINT_FILE,
    EOS,
    PAD,
    SEP,
    VOCAB_SIZE,
    padded_batch,
)
from gate.generators.base import (
    DpSgdSpec,
    FitReport,
    GeneratorConfig,
    GeneratorError,
    GeneratorStream,
    ParametricGenerator,
    PrivacySpent,
    generator_stream_seed,
    null_progress,
)
from gate.plugins import GENERATORS
from gate.progress import Progress

if TYPE_CHECKING:
    import torch

CONFIG_FILE = CHECKPOINT_FILE
WEIGHTS_FILE = "model.safetensors"


class ReferenceConfig(GeneratorConfig):
    """Sizes and training settings of the reference generator."""

    layers: int = Field(2, ge=1, le=12, description="Transformer layers.")
    hidden: int = Field(128, ge=32, le=1024, description="Hidden size.")
    heads: int = Field(4, ge=1, le=32, description="Attention heads (must divide hidden).")
    max_length: int = Field(
        512, ge=16, le=4096, description="Bytes per training example (one user) and per sample."
    )
    batch_size: int = Field(
        16, ge=1, le=4096, description="Users per batch (expected batch with Poisson sampling)."
    )
    learning_rate: float = Field(3e-3, gt=0, le=1, description="AdamW learning rate.")
    dp_learning_rate: float | None = Field(
        None, gt=0, le=1, description="Learning rate under DP-SGD; null = learning_rate."
    )
    lr_schedule: Literal["constant", "cosine"] = Field(
        "constant",
        description="Learning rate over the optimizer steps: constant, or cosine decay to 0 "
        "(steadier convergence when training to memorise or for many epochs).",
    )
    temperature: float = Field(1.0, gt=0, le=10, description="Sampling temperature.")
    grad_sample_mode: Literal["hooks", "functorch"] = Field(
        "hooks", description="Opacus per-sample gradient mode (module hooks or functorch vmap)."
    )

    def model_post_init(self, context: Any) -> None:
        if self.hidden % self.heads:
            raise ValueError(f"heads ({self.heads}) must divide hidden ({self.hidden})")


def encode_user(records: Sequence[str], *, max_length: int) -> list[int]:
    """``<bos> r1 <sep> r2 ... <eos>`` as byte ids, truncated to ``max_length``."""
    ids = [BOS]
    for i, text in enumerate(records):
        if i:
            ids.append(SEP)
        ids.extend(text.encode("utf-8"))
    ids.append(EOS)
    return ids[:max_length]


def decode_record(ids: Sequence[int]) -> str:
    """Bytes up to the first special token, decoded as UTF-8 (broken sequences dropped)."""
    data = bytearray()
    for i in ids:
        if i >= 256:
            break
        data.append(i)
    return data.decode("utf-8", errors="ignore").strip()


def _torch() -> Any:
    import torch

    return torch


def privacy_engine_class() -> Any:
    """Opacus's ``PrivacyEngine``, imported without the root logging handler that Opacus
    installs at import (``logging.basicConfig`` in ``opacus/utils/module_utils.py``): that
    handler would print every library's INFO records into the user's terminal."""
    root = logging.getLogger()
    before = list(root.handlers)
    from opacus import PrivacyEngine

    for handler in [h for h in root.handlers if h not in before]:
        root.removeHandler(handler)
    return PrivacyEngine


def _device() -> torch.device:
    torch = _torch()
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def _sequence_losses(model: Any, ids: torch.Tensor) -> torch.Tensor:
    """Mean next-byte cross-entropy of each sequence (pads excluded): the loss of one user
    is one number, so per-example clipping clips users, not tokens."""
    torch = _torch()
    mask = ids != PAD
    positions = torch.arange(ids.shape[1], device=ids.device).repeat(ids.shape[0], 1)
    logits = model(
        input_ids=ids, attention_mask=mask.long(), position_ids=positions.contiguous()
    ).logits
    targets = ids[:, 1:]
    nll = torch.nn.functional.cross_entropy(
        logits[:, :-1].reshape(-1, logits.shape[-1]).float(),
        targets.reshape(-1),
        reduction="none",
    ).view(targets.shape)
    valid = mask[:, 1:].float()
    return (nll * valid).sum(dim=1) / valid.sum(dim=1).clamp(min=1.0)


def _cosine_rate(rate: float, *, step: int, steps: int) -> float:
    """Cosine decay from ``rate`` at step 0 to 0 at ``steps`` (Loshchilov & Hutter 2017,
    SGDR eq. 5 without restarts); Poisson batching may take a few more steps than planned,
    which stay at 0."""
    return 0.5 * rate * (1.0 + math.cos(math.pi * min(step, steps) / steps))


@GENERATORS.register("reference")
class ReferenceGenerator(ParametricGenerator[ReferenceConfig]):
    """Small Llama causal LM over bytes; ``fit`` trains it from scratch (AdamW), with
    Opacus DP-SGD when a :class:`DpSgdSpec` is given."""

    name = "reference"
    config_model = ReferenceConfig

    def __init__(self, config: ReferenceConfig, *, seed: int) -> None:
        super().__init__(config, seed=seed)
        self._model: Any = None

    def _new_model(self) -> Any:
        torch = _torch()
        from transformers import LlamaConfig, LlamaForCausalLM

        c = self.config
        config = LlamaConfig(
            vocab_size=VOCAB_SIZE,
            hidden_size=c.hidden,
            intermediate_size=2 * c.hidden,
            num_hidden_layers=c.layers,
            num_attention_heads=c.heads,
            num_key_value_heads=c.heads,
            max_position_embeddings=c.max_length,
            pad_token_id=PAD,
            bos_token_id=BOS,
            eos_token_id=EOS,
            tie_word_embeddings=False,
        )
        with torch.random.fork_rng(devices=range(torch.cuda.device_count())):
            torch.manual_seed(generator_stream_seed(self.seed, GeneratorStream.INITIALISATION))
            model: Any = LlamaForCausalLM(config)
        return model.to(device=_device())

    @property
    def model(self) -> Any:
        if self._model is None:
            raise GeneratorError("the reference generator has not been fitted or loaded")
        return self._model

    def fit(
        self,
        users: Sequence[Sequence[str]],
        *,
        epochs: int,
        privacy: DpSgdSpec | None = None,
        progress: Progress | None = None,
    ) -> FitReport:
        torch = _torch()
        progress = null_progress(progress)
        if epochs < 1:
            raise ValueError(f"epochs must be >= 1; found {epochs}")
        if not users:
            raise ValueError("fit needs at least one user")
        started = time.perf_counter()
        c = self.config
        encoded = [encode_user(records, max_length=c.max_length) for records in users]
        length = max(len(e) for e in encoded)
        data = torch.from_numpy(padded_batch(encoded, length=length))
        device = _device()
        model = self._new_model()
        model.train()
        lr = c.learning_rate if privacy is None else (c.dp_learning_rate or c.learning_rate)
        optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
        batches_gen = torch.Generator().manual_seed(
            generator_stream_seed(self.seed, GeneratorStream.BATCHES)
        )
        if privacy is not None and privacy.noise_seed is None:
            # secret Poisson batches: which users a step sampled is part of the mechanism
            batches_gen.manual_seed(secrets.randbits(63))
        loader = torch.utils.data.DataLoader(
            torch.utils.data.TensorDataset(data),
            batch_size=min(c.batch_size, len(encoded)),
            shuffle=True,
            generator=batches_gen,
        )
        engine = None
        trained = model
        if privacy is not None:
            engine = privacy_engine_class()(accountant=privacy.accountant)
            noise_gen = torch.Generator(device=device).manual_seed(
                secrets.randbits(63) if privacy.noise_seed is None else privacy.noise_seed
            )
            try:
                trained, optimizer, loader = engine.make_private_with_epsilon(
                    module=model,
                    optimizer=optimizer,
                    data_loader=loader,
                    target_epsilon=privacy.epsilon,
                    target_delta=privacy.delta,
                    epochs=epochs,
                    max_grad_norm=privacy.max_grad_norm,
                    poisson_sampling=True,
                    grad_sample_mode=c.grad_sample_mode,
                    noise_generator=noise_gen,
                )
            except ValueError as exc:
                if "budget" not in str(exc):  # Opacus: "The privacy budget is too low."
                    raise
                raise GeneratorError(
                    f"Opacus's {privacy.accountant} accountant finds no noise for epsilon "
                    f"{privacy.epsilon:g} at delta {privacy.delta:g} over {epochs} epochs of "
                    f"{len(loader)} batches ({exc}); set a larger remediation.dpsgd.epsilons "
                    "target or delta, or another accountant"
                ) from None
            loader.batch_sampler.generator = batches_gen  # seeded Poisson batches
        losses: list[float] = []
        steps = 0
        planned_steps = max(1, epochs * len(loader))
        for epoch in progress.track(range(epochs), total=epochs, description="training epochs"):
            total, count = 0.0, 0
            for (batch,) in loader:
                batch = batch.to(device)
                if c.lr_schedule == "cosine":
                    for group in optimizer.param_groups:
                        group["lr"] = _cosine_rate(lr, step=steps, steps=planned_steps)
                optimizer.zero_grad(set_to_none=True)
                if batch.shape[0] == 0:  # Poisson sampling drew no user (DP-SGD only)
                    # a step of noise alone, as the analysis assumes: skipping it would
                    # show that no user was sampled (the model cannot run an empty batch;
                    # Opacus clips and sums empty per-example gradients to zero)
                    for p in optimizer.params:
                        p.grad_sample = torch.zeros((0, *p.shape), dtype=p.dtype, device=p.device)
                    optimizer.step()
                    steps += 1
                    continue
                per_user = _sequence_losses(trained, batch)
                loss = per_user.mean()
                if not torch.isfinite(loss):
                    raise GeneratorError(
                        f"training diverged: loss {loss.item()} at epoch {epoch + 1}, step "
                        f"{steps + 1}; lower the learning rate"
                    )
                loss.backward()
                optimizer.step()
                total += float(per_user.detach().sum())
                count += batch.shape[0]
                steps += 1
            losses.append(total / max(count, 1))
        if engine is not None:
            trained.remove_hooks()  # Opacus keeps capturing activations otherwise
        self._model = model
        self._model.eval()
        spent = None
        if engine is not None and privacy is not None:
            spent = PrivacySpent(
                accountant=privacy.accountant,
                epsilon=float(engine.get_epsilon(privacy.delta)),
                delta=privacy.delta,
                noise_multiplier=float(optimizer.noise_multiplier),
                sample_rate=float(loader.sample_rate),
                steps=steps,
                max_grad_norm=privacy.max_grad_norm,
                unit="user",  # one training example per user (encode_user)
            )
        if not all(math.isfinite(x) for x in losses):
            raise GeneratorError("training diverged: a non-finite epoch loss")
        return FitReport(
            epochs=epochs,
            steps=steps,
            losses=tuple(losses),
            seconds=time.perf_counter() - started,
            examples=len(encoded),
            privacy=spent,
            details={
                "parameters": int(sum(p.numel() for p in self._model.parameters())),
                "device": str(device),
                "unit": "user",
                "max_length": c.max_length,
            },
        )

    def sample(
        self,
        n: int,
        *,
        prompts: Sequence[str] | None = None,
        progress: Progress | None = None,
    ) -> list[str]:
        torch = _torch()
        progress = null_progress(progress)
        if n < 1:
            raise ValueError(f"n must be >= 1; found {n}")
        if prompts is not None and len(prompts) != n:
            raise ValueError(f"prompts must have n = {n} entries; found {len(prompts)}")
        model = self.model
        device = next(model.parameters()).device
        heads = [
            [BOS, *(p.encode("utf-8") if prompts is not None else b"")]
            for p in (prompts or [""] * n)
        ]
        out: list[str] = [""] * n
        batch = 64
        todo = list(range(n))
        with torch.random.fork_rng(devices=range(torch.cuda.device_count())), torch.no_grad():
            torch.manual_seed(generator_stream_seed(self.seed, GeneratorStream.SAMPLING))
            for attempt in range(5):  # records that came out empty are drawn again
                chunks = [todo[i : i + batch] for i in range(0, len(todo), batch)]
                label = "sampling records" if attempt == 0 else "resampling empty records"
                for chunk in progress.track(chunks, total=len(chunks), description=label):
                    width = max(len(heads[i]) for i in chunk)
                    ids = np.full((len(chunk), width), PAD, dtype=np.int64)  # left padding
                    for row, i in enumerate(chunk):
                        ids[row, width - len(heads[i]) :] = heads[i]
                    input_ids = torch.from_numpy(ids).to(device)
                    generated = model.generate(
                        input_ids=input_ids,
                        attention_mask=(input_ids != PAD).long(),
                        do_sample=True,
                        temperature=self.config.temperature,
                        top_k=0,
                        max_new_tokens=max(1, self.config.max_length - width),
                        eos_token_id=[SEP, EOS],
                        pad_token_id=PAD,
                    )
                    for row, i in enumerate(chunk):
                        out[i] = decode_record(generated[row, width:].tolist())
                todo = [i for i in todo if not out[i]]
                if not todo:
                    return out
        raise GeneratorError(
            f"the generator produced {len(todo)} empty records of {n} after 5 attempts"
        )

    def perplexity(self, texts: Sequence[str]) -> float | None:
        torch = _torch()
        model = self.model
        device = next(model.parameters()).device
        encoded = [encode_user([t], max_length=self.config.max_length) for t in texts]
        total, tokens = 0.0, 0
        with torch.no_grad():
            for i in range(0, len(encoded), 64):
                chunk = encoded[i : i + 64]
                ids = torch.from_numpy(padded_batch(chunk, length=max(len(e) for e in chunk))).to(
                    device
                )
                per_seq = _sequence_losses(model, ids)
                counts = torch.tensor([len(e) - 1 for e in chunk], dtype=torch.float32)
                total += float((per_seq.cpu() * counts).sum())
                tokens += int(counts.sum())
        if tokens == 0:
            return None
        return math.exp(total / tokens)

    def continue_texts(
        self,
        prefixes: Sequence[str],
        *,
        temperature: float,
        max_new_bytes: int,
        seed: int,
    ) -> list[str]:
        """Continue each prefix with exactly ``max_new_bytes`` sampled bytes (special tokens
        suppressed, so no record ends early), decoded as UTF-8; seeded by ``seed``. The
        canary audit samples canary suffixes from a base LM with this."""
        torch = _torch()
        if not temperature > 0:
            raise ValueError(f"temperature must be > 0; found {temperature!r}")
        if max_new_bytes < 1:
            raise ValueError(f"max_new_bytes must be >= 1; found {max_new_bytes}")
        model = self.model
        device = next(model.parameters()).device
        heads = [[BOS, *p.encode("utf-8")] for p in prefixes]
        out: list[str] = []
        with torch.random.fork_rng(devices=range(torch.cuda.device_count())), torch.no_grad():
            torch.manual_seed(seed)
            for start in range(0, len(heads), 64):
                chunk = heads[start : start + 64]
                width = max(len(h) for h in chunk)
                ids = np.full((len(chunk), width), PAD, dtype=np.int64)
                for row, head in enumerate(chunk):
                    ids[row, width - len(head) :] = head
                input_ids = torch.from_numpy(ids).to(device)
                generated = model.generate(
                    input_ids=input_ids,
                    attention_mask=(input_ids != PAD).long(),
                    do_sample=True,
                    temperature=temperature,
                    top_k=0,
                    max_new_tokens=max_new_bytes,
                    min_new_tokens=max_new_bytes,
                    suppress_tokens=[PAD, BOS, SEP, EOS],
                    pad_token_id=PAD,
                )
                new = generated[:, width:].cpu().numpy()
                out.extend(
                    bytes(row[row < 256].astype(np.uint8)).decode("utf-8", errors="ignore")
                    for row in new
                )
        return out

    def byte_perplexities(self, texts: Sequence[str]) -> np.ndarray:
        """Per-byte perplexity of each text as a record, ``exp`` of the mean negative
        log-likelihood of its bytes after ``<bos>`` (the end token is not scored)."""
        torch = _torch()
        model = self.model
        device = next(model.parameters()).device
        encoded = [[BOS, *t.encode("utf-8")][: self.config.max_length] for t in texts]
        out = np.empty(len(encoded))
        with torch.no_grad():
            for start in range(0, len(encoded), 64):
                chunk = encoded[start : start + 64]
                ids = torch.from_numpy(padded_batch(chunk, length=max(len(e) for e in chunk))).to(
                    device
                )
                out[start : start + len(chunk)] = np.exp(
                    _sequence_losses(model, ids).double().cpu().numpy()
                )
        return out

    def parameter_vector(self) -> np.ndarray:
        torch = _torch()
        with torch.no_grad():
            flat = torch.cat([p.detach().reshape(-1).cpu() for p in self.model.parameters()])
        return flat.double().numpy()

    def set_parameter_vector(self, vector: np.ndarray) -> None:
        torch = _torch()
        params = list(self.model.parameters())
        size = sum(p.numel() for p in params)
        if vector.shape != (size,):
            raise ValueError(f"vector must have shape ({size},); found {vector.shape}")
        with torch.no_grad():
            offset = 0
            for p in params:
                piece = vector[offset : offset + p.numel()].reshape(tuple(p.shape))
                p.copy_(torch.from_numpy(piece).to(p.dtype))
                offset += p.numel()

    def save(self, directory: Path) -> None:
        self.model.save_pretrained(directory, safe_serialization=True)
        meta = {
            "generator": self.name,
            "config": self.config.model_dump(mode="json"),
            "seed": self.seed,
            "vocabulary": "bytes 0-255 + pad, bos, sep, eos",
        }
        (directory / CONFIG_FILE).write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")

    @classmethod
    def load(cls, directory: Path) -> ReferenceGenerator:
        from transformers import LlamaForCausalLM

        path = directory / CONFIG_FILE
        try:
            meta = json.loads(path.read_text(encoding="utf-8"))
            config = ReferenceConfig.model_validate(meta["config"])
            generator = cls(config, seed=int(meta["seed"]))
            model: Any = LlamaForCausalLM.from_pretrained(directory)
            generator._model = model.to(device=_device()).eval()
        except (OSError, ValueError, KeyError) as exc:
            raise GeneratorError(
                f"{directory}: not a reference generator checkpoint: {exc}"
            ) from exc
        return generator
