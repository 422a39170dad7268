"""The two papers' own settings, one switch away: ``preset="booookscore-paper"`` or ``preset="nfs-paper"``.

Each value carries its source (``seed 000``, ``seed 001``, ``official code`` or ``ours``). A preset fills only the
settings the user left alone; the run record keeps what it filled (``context.preset_applied``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class PresetValue:
    """One setting of a preset and where the seed fixes it."""

    value: Any
    source: str


BGE_M3 = "bge-m3"
"""Marker value of the ``embedder`` row: BGE-M3 loaded from the ``bge_m3_path`` folder (never downloaded)."""

PRESETS: dict[str, dict[str, PresetValue]] = {
    "booookscore-paper": {
        "summary_temperature": PresetValue(
            0.5, "seed 000 §5 Experimental setup: decoding temperature 0.5, p = 1 (compression at 1, fn. 15)"
        ),
        "chunk_size": PresetValue(2048, "seed 000 §5 Experimental setup: chunk size 2048"),
        "chunker": PresetValue(
            "official",
            "official code booookscore/chunk.py: lines packed greedily, cut where it cuts (the seed gives only "
            "the size)",
        ),
        "max_summary_tokens": PresetValue(
            900, "seed 000 §5 Experimental setup: maximum summary length G_n = 900"
        ),
        "context_window": PresetValue(
            8192,
            "ours: seed 000 App. D says models use their full context window and gives no number; 8,192 is our "
            "default",
        ),
        "artifact_removal": PresetValue(
            True, "seed 000 App. A.2 fn. 18 and App. D.1: the artifact-removal prompt (M.3)"
        ),
        "batched_coherence": PresetValue(
            False, "seed 000 §4.1 Specification: the model is prompted separately for each sentence"
        ),
        "sentence_splitter": PresetValue(
            "punkt", "official code booookscore/score.py: NLTK sent_tokenize (the seed names no splitter)"
        ),
        "repeated_sentences": PresetValue(
            "once",
            "official code booookscore/score.py: annotations keyed by sentence text, a repeated sentence counts "
            "once (equation 1 of seed 000 does not say)",
        ),
    },
    "nfs-paper": {
        "retrieval_k": PresetValue(
            1, "seed 001 stage 2(i): the single most relevant scene S_i is retrieved per fact"
        ),
        "embedder": PresetValue(
            BGE_M3, "seed 001 stage 2(i): retrieval with BGE-M3 embeddings (bge_m3_path must be set)"
        ),
        "ckg_samples": PresetValue(
            3,
            "seed 001 stage 1: inference is run several times per scene (no number; 3 is ours, the official "
            "code extracts once)",
        ),
        "predicate_min_count": PresetValue(
            2,
            "official code src/kg: the refined graph keeps relations extracted at least twice (seed 001 stage "
            "1(b) keeps predicates above a threshold it does not give)",
        ),
        "refine_guard": PresetValue(
            False,
            "seed 001 stage 3: the refined summary is taken as it is, no acceptance check (official code "
            "self_correction.py likewise)",
        ),
        "nfs_unjudged": PresetValue(
            "unsupported",
            "seed 001 stage 2: the score is the mean of an indicator over every atomic fact; official code "
            "calculate_factuality.py reads '1' in the answer, anything else is a 0",
        ),
    },
}
"""Preset name -> Context field -> value and source. The only place the papers' values live."""

SOURCES = ("seed 000", "seed 001", "official code", "ours")
"""How every source line begins."""


def resolve(name: str, settable: set[str], bge_m3_path: str) -> dict[str, Any]:
    """The values preset ``name`` fills, limited to the fields in ``settable``.

    The embedder row needs ``bge_m3_path`` to be a folder (nothing is ever downloaded).
    """
    values = {field: setting.value for field, setting in PRESETS[name].items() if field in settable}
    if values.get("embedder") == BGE_M3:
        if not bge_m3_path:
            raise ValueError(
                f"the {name} preset retrieves with BGE-M3, as the paper does: set bge_m3_path to the local "
                "folder of the BGE-M3 weights (--set bge_m3_path=DIR or STORYJUDGE_BGE_M3_PATH; nothing is "
                "downloaded), or choose the embedder yourself (embedder=minilm) to run it without BGE-M3."
            )
        if not Path(bge_m3_path).is_dir():
            raise ValueError(
                f"bge_m3_path {bge_m3_path!r} is not a folder; give the local folder of the BGE-M3 weights "
                "(nothing is downloaded) or unset it."
            )
        values["embedder"] = f"{BGE_M3}:{bge_m3_path}"
    return values
