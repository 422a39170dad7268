"""The run record (``result.json``): everything a score rests on, reproducible and free of secrets.

API keys are never part of a Context; URLs are stripped of credentials before they are written.
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from storyjudge import __version__
from storyjudge.core.context import ROLES, Context
from storyjudge.core.coverage import card_reliable
from storyjudge.core.models import resolve_spec
from storyjudge.core.passages import record_passages
from storyjudge.core.rundir import RunDir
from storyjudge.core.runrecord import SCHEMA_VERSION
from storyjudge.core.usage import run_usage, totals

_SECRET = re.compile(r"(sk-[A-Za-z0-9_\-]{8,}|Bearer\s+\S+)")


def scrub(value: str) -> str:
    """Remove credentials from a URL or string."""
    parts = urlsplit(value)
    if "@" in parts.netloc:
        value = urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2]))
    return _SECRET.sub("[redacted]", value)


def build_result(
    state: dict[str, Any],
    ctx: Context,
    *,
    kind: str = "refine",
    prompt_versions: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The run record of a finished (or scored) run; ``prompt_versions`` comes from the caller."""
    iterations = state.get("iterations") or []
    best_iteration = state.get("best_iteration")
    # every request of the run, those of parts interrupted before a resume included (the run's ledger)
    usage = run_usage(ctx.run_dir or str(state.get("run_dir") or ""), state.get("usage"))
    best = next((it for it in iterations if it["iteration"] == best_iteration), None)
    return {
        "schema_version": SCHEMA_VERSION,  # the shape (``core.runrecord``), so readers can migrate old records
        "kind": kind,
        "storyjudge_version": __version__,
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "document": {
            "title": state.get("title", ""),
            "hash": state.get("doc_hash", ""),
            "segmentation": state.get("segmentation", ""),
            "scenes": len(state.get("scenes") or []),
        },
        "run_dir": state.get("run_dir", ""),
        "context": {
            **ctx.public_dict(),
            "base_url": scrub(ctx.base_url),
            "chroma_url": scrub(ctx.chroma_url),
            "resolved_models": {role: resolve_spec(ctx, role) for role in ROLES},  # as each role resolved it
            "preset_applied": ctx.preset_applied,
        },
        "prompts": dict(prompt_versions or {}),
        "ckg_stats": state.get("ckg_stats") or {},
        "initial_summary_events": state.get("events") or [],
        "iterations": iterations,
        # the texts the verdicts' evidence names (scene id -> text), each once (``core.passages``)
        "passages": record_passages(iterations, state.get("scenes") or []),
        "scores": [_score_row(it) for it in iterations],
        "best_iteration": best_iteration,
        "best_summary": best["summary"] if best else state.get("summary", ""),
        # False: no round was judged on enough of its facts; the best summary is then the unrefined one
        "best_reliable": bool(best and card_reliable(best["factscore"])),
        "stop_reason": state.get("stop_reason", ""),
        "usage": {"by_model": usage, "total": totals(usage)},
        "timings": state.get("timings") or {},
    }


def _score_row(iteration: Mapping[str, Any]) -> dict[str, Any]:
    """A round's headline numbers, and the judge's (and annotator's) record on its planted items, if any."""
    card, coherence = iteration["factscore"], iteration.get("coherence") or {}
    row = {"iteration": iteration["iteration"], "nfs": card["score"]}
    row |= {f"nfs_{key}": card.get(f"score_{key}") for key in ("ci95", "ci95_over", "corrected")}
    row |= {f"nfs_{key}": card.get(key) for key in ("coverage", "reliable")}
    row |= {"accepted": iteration["accepted"], "coherence": coherence.get("score")}
    row |= {f"coherence_{key}": coherence.get(key) for key in ("coverage", "reliable")}
    check = card.get("judge_check")
    if check:
        keys = ("false_acceptance", "true_acceptance", "false_acceptance_ci95", "passed", "decision", "note")
        row |= {f"judge_{key}": check.get(key) for key in keys}
    annotator = [s["annotator_check"] for s in coherence.get("summaries") or [] if s.get("annotator_check")]
    if annotator:
        row["annotator_passed"] = all(a["passed"] for a in annotator)
        row["annotator_note"] = "; ".join(a["note"] for a in annotator)
    return row | {"note": iteration.get("note", "")}


def write_result(run_dir: str | Path, result: dict[str, Any]) -> Path:
    """Write result.json atomically into the run directory."""
    rd = RunDir(Path(run_dir))
    rd.write_json(rd.result, result)
    return rd.result
