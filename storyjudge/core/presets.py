"""The two papers' own settings, one switch away: ``preset="booookscore-paper"`` or ``preset="nfs-paper"``.

Every value a preset sets is in ``PRESETS`` below, with the place in the seed text it comes from. A preset fills
only the settings the user left alone: a value given explicitly (CLI option, ``Context(...)`` argument,
``graph.invoke(..., context=...)`` key or ``STORYJUDGE_<FIELD>`` variable) always wins, and a ``temperature``
given explicitly also keeps the summarizer's. The run record keeps the preset's name and the settings it filled
(``context.preset_applied`` in ``result.json``).

Seed 000 is BooookScore (Chang et al., ICLR 2024); seed 001 is NarrativeFactScore (Jeong et al., 2025). Where a
seed names a setting but no number (NarrativeFactScore's sample count and threshold), the value chosen and the
reason are in its source line, and the README says so.
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
            0.5, "000 §5 Experimental setup: decoding temperature 0.5, p = 1 (compression stays at 1, fn. 15)"
        ),
        "chunk_size": PresetValue(2048, "000 §5 Experimental setup: chunk size 2048"),
        "max_summary_tokens": PresetValue(900, "000 §5 Experimental setup: maximum summary length G_n = 900"),
        "context_window": PresetValue(
            8192, "000 App. D: the gpt-4 (2023-03-15) checkpoint uses its full context window, 8,192 tokens"
        ),
        "artifact_removal": PresetValue(
            True, "000 App. A.2 fn. 18 and D.1: the artifact-removal prompt (M.3)"
        ),
        "batched_coherence": PresetValue(
            False, "000 §4.1 fn. 9: the metric asks about one sentence per call (per-sentence setting)"
        ),
    },
    "nfs-paper": {
        "retrieval_k": PresetValue(
            1, "001 stage 2(i): the single most relevant scene S_i is retrieved per fact"
        ),
        "embedder": PresetValue(
            BGE_M3, "001 stage 2(i): retrieval with BGE-M3 embeddings (only when bge_m3_path is set)"
        ),
        "ckg_samples": PresetValue(
            3, "001 stage 1: inference is run several times per scene (no number given; 3, our default)"
        ),
        "predicate_min_count": PresetValue(
            2,
            "001 stage 1(b): predicates recurring for a (subject, object) pair are kept, counted over all "
            "samples and scenes (no number given; 2 = stated at least twice)",
        ),
    },
}
"""Preset name -> Context field -> value and source. The only place the papers' values live."""

NOT_SET = {
    "booookscore-paper": "models (000 uses gpt-4 / claude-2 etc.: the model is the user's choice)",
    "nfs-paper": "models (001 uses GPT-4o-mini), refinement rounds and temperatures (001 gives no numbers)",
}
"""What each seed fixes that its preset leaves to the user, for the README and ``describe``."""


def names() -> tuple[str, ...]:
    """The known preset names."""
    return tuple(PRESETS)


def resolve(name: str, settable: set[str], bge_m3_path: str) -> dict[str, Any]:
    """The values preset ``name`` fills, limited to the fields in ``settable`` (those the user left alone).

    The embedder row becomes ``bge-m3:<bge_m3_path>`` when that folder exists, and is skipped when no path is
    set (the default embedder stays); a path that is not a folder is an error, so nothing is ever downloaded.
    """
    values: dict[str, Any] = {}
    for field_name, setting in PRESETS[name].items():
        if field_name not in settable:
            continue
        value = setting.value
        if field_name == "embedder" and value == BGE_M3:
            if not bge_m3_path:
                continue
            if not Path(bge_m3_path).is_dir():
                raise ValueError(
                    f"bge_m3_path {bge_m3_path!r} is not a folder; give the local folder of the BGE-M3 weights "
                    "(nothing is downloaded) or unset it."
                )
            value = f"{BGE_M3}:{bge_m3_path}"
        values[field_name] = value
    return values


def describe(name: str) -> list[tuple[str, Any, str]]:
    """``(field, value, source)`` rows of a preset, for documentation and ``--help``."""
    return [(field_name, s.value, s.source) for field_name, s in PRESETS[name].items()]
