"""Reference-based metrics over a set, per-item values kept: ROUGE, and BERTScore where a local model is.

ROUGE-1/2/L (``rouge-score``, stemmed) keep each item's best reference and the mean over references.
BERTScore never downloads: it runs only with a local model directory (``STORYJUDGE_BERTSCORE_MODEL``), else
says why not. It is ours (greedy cosine matching, no idf or rescaling, long texts in windows): comparable
across runs with one model and layer, not with published tables.
"""

from __future__ import annotations

import math
import os
import threading
from collections.abc import Sequence
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

from storyjudge.core.intervals import mean_interval

ROUGE_TYPES = ("rouge1", "rouge2", "rougeL")
BERTSCORE_MODEL_ENV = "STORYJUDGE_BERTSCORE_MODEL"
BERTSCORE_LAYER_ENV = "STORYJUDGE_BERTSCORE_LAYER"


def aggregate(values: Sequence[float | None], *, seed: int = 0, resamples: int = 1000) -> dict[str, Any]:
    """Mean, std and bootstrap 95% interval over a set; missing values (None, NaN) counted, never zero."""
    kept = [float(v) for v in values if v is not None and math.isfinite(float(v))]
    found = mean_interval(kept, resamples=resamples, seed=seed)
    return {
        "mean": found["mean"],
        "std": float(np.std(kept, ddof=1)) if len(kept) > 1 else None,
        "n": len(kept),
        "missing": len(values) - len(kept),
        "ci95": found["ci95"],
        "per_item": list(values),
    }


@cache
def _scorer() -> Any:
    from rouge_score import rouge_scorer

    return rouge_scorer.RougeScorer(list(ROUGE_TYPES), use_stemmer=True)


_scorer_lock = threading.Lock()


def rouge_item(prediction: str, references: Sequence[str]) -> dict[str, Any]:
    """ROUGE of one prediction against its references: best and mean F1, and P/R of the best reference."""
    refs = [r for r in references if r and r.strip()]
    if not refs:
        raise ValueError("ROUGE needs at least one non-empty reference")
    with _scorer_lock:  # the stemmer keeps a cache that is not thread-safe
        scores = [_scorer().score(ref, prediction) for ref in refs]
    item: dict[str, Any] = {"references": len(refs)}
    for kind in ROUGE_TYPES:
        f_values = [s[kind].fmeasure for s in scores]
        best = int(np.argmax(f_values))
        item[kind] = {
            "f1": f_values[best],
            "precision": scores[best][kind].precision,
            "recall": scores[best][kind].recall,
            "f1_mean_over_refs": float(np.mean(f_values)),
        }
    return item


def bertscore_status(model_path: str | Path | None = None) -> dict[str, Any]:
    """Whether BERTScore can run, and if not, why (said in every report that mentions it)."""
    value = str(model_path) if model_path else os.environ.get(BERTSCORE_MODEL_ENV, "")
    path = Path(value).expanduser()
    if not value:
        return {
            "available": False,
            "reason": f"no local model configured: set {BERTSCORE_MODEL_ENV} to a Hugging Face model "
            "directory (config.json + weights); nothing is downloaded",
        }
    if not (path / "config.json").is_file():
        return {"available": False, "reason": f"{path} is not a local model directory (no config.json)"}
    return {"available": True, "model": str(path)}


class _TokenEmbedder:
    """Contextual token embeddings from one layer of a local transformer, in windows (nothing truncated)."""

    def __init__(self, path: Path, layer: int | None) -> None:
        import torch
        from transformers import AutoModel, AutoTokenizer

        self.torch = torch
        self.tokenizer = AutoTokenizer.from_pretrained(str(path), local_files_only=True)
        self.model = AutoModel.from_pretrained(str(path), local_files_only=True).eval()
        layers = int(getattr(self.model.config, "num_hidden_layers", 0) or 0)
        self.layer = layers if layer is None else layer
        if not 0 <= self.layer <= layers:
            raise ValueError(f"BERTScore layer {self.layer} out of range 0..{layers}")
        limit = int(getattr(self.model.config, "max_position_embeddings", 512) or 512)
        self.window = max(16, min(limit, 512) - 2)
        # shared by parallel evaluation items; the fast tokenizer is not reentrant
        self.lock = threading.Lock()

    def embed(self, text: str) -> np.ndarray:
        """Unit vectors of the text's tokens."""
        with self.lock, self.torch.no_grad():
            ids = self.tokenizer(text, add_special_tokens=False)["input_ids"]
            if not ids:
                return np.zeros((0, 1))
            chunks = []
            for start in range(0, len(ids), self.window):
                window = self.tokenizer.build_inputs_with_special_tokens(ids[start : start + self.window])
                out = self.model(
                    input_ids=self.torch.tensor([window]), output_hidden_states=True, return_dict=True
                )
                chunks.append(out.hidden_states[self.layer][0].numpy()[1:-1])  # no special tokens
            vectors = np.concatenate(chunks, axis=0)
            norms = np.linalg.norm(vectors, axis=1, keepdims=True)
            return np.asarray(vectors / np.maximum(norms, 1e-12))


_embedders: dict[tuple[str, int | None], _TokenEmbedder] = {}
_embedders_lock = threading.Lock()


def _embedder(path: str, layer: int | None) -> _TokenEmbedder:
    """One model per (path, layer), however many items ask at once."""
    with _embedders_lock:
        if (path, layer) not in _embedders:
            _embedders[(path, layer)] = _TokenEmbedder(Path(path), layer)
        return _embedders[(path, layer)]


def _greedy_match(candidate: np.ndarray, reference: np.ndarray) -> tuple[float, float, float]:
    if candidate.shape[0] == 0 or reference.shape[0] == 0:
        return 0.0, 0.0, 0.0
    similarity = candidate @ reference.T
    p = float(similarity.max(axis=1).mean())
    r = float(similarity.max(axis=0).mean())
    return p, r, (2 * p * r / (p + r) if p + r > 0 else 0.0)


def bertscore(
    predictions: Sequence[str], references: Sequence[Sequence[str]], *, model_path: str | Path | None = None
) -> dict[str, Any]:
    """BERTScore F1 (best reference per item), or ``{"available": False, "reason": ...}``.

    The layer: ``$STORYJUDGE_BERTSCORE_LAYER`` (0 = embeddings), else the last.
    """
    status = bertscore_status(model_path)
    if not status["available"]:
        return status
    layer = int(os.environ[BERTSCORE_LAYER_ENV]) if os.environ.get(BERTSCORE_LAYER_ENV) else None
    embedder = _embedder(status["model"], layer)
    per_item = []
    for prediction, refs in zip(predictions, references, strict=True):
        candidate = embedder.embed(prediction)
        scored = [_greedy_match(candidate, embedder.embed(ref)) for ref in refs if ref.strip()]
        if not scored:
            raise ValueError("BERTScore needs at least one non-empty reference")
        best = max(scored, key=lambda s: s[2])
        per_item.append({"precision": best[0], "recall": best[1], "f1": best[2]})
    return {
        "available": True,
        "model": status["model"],
        "layer": embedder.layer,
        "idf": False,
        "rescaled": False,
        "note": "our implementation: comparable across runs with this model and layer, not with published "
        "tables",
        "f1": aggregate([it["f1"] for it in per_item]),
        "per_item": per_item,
    }
