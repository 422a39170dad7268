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


def context_record(ctx: Context) -> dict[str, Any]:
    """The settings of the run with resolved model specs per role."""
    record = ctx.public_dict()
    record["base_url"] = scrub(record.get("base_url", ""))
    record["chroma_url"] = scrub(record.get("chroma_url", ""))
    record["resolved_models"] = {role: resolve_spec(ctx, role) for role in ROLES}
    record["preset_applied"] = ctx.preset_applied
    return record


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
        "context": context_record(ctx),
        "prompts": dict(prompt_versions or {}),
        "ckg_stats": state.get("ckg_stats") or {},
        "initial_summary_events": state.get("events") or [],
        "iterations": iterations,
        # the texts the verdicts' evidence names (scene id -> text), each once (``core.passages``)
        "passages": record_passages(iterations, state.get("scenes") or []),
        "scores": [
            {
                "iteration": it["iteration"],
                "nfs": it["factscore"]["score"],
                "nfs_ci95": it["factscore"].get("score_ci95"),
                "nfs_ci95_over": it["factscore"].get("score_ci95_over"),
                "nfs_corrected": it["factscore"].get("score_corrected"),
                "nfs_coverage": it["factscore"].get("coverage"),
                "nfs_reliable": it["factscore"].get("reliable"),
                "accepted": it["accepted"],
                "coherence": (it.get("coherence") or {}).get("score"),
                "coherence_coverage": (it.get("coherence") or {}).get("coverage"),
                "coherence_reliable": (it.get("coherence") or {}).get("reliable"),
                **_checks(it),
                "note": it.get("note", ""),
            }
            for it in iterations
        ],
        "best_iteration": best_iteration,
        "best_summary": best["summary"] if best else state.get("summary", ""),
        # False: no round was judged on enough of its facts; the best summary is then the unrefined one
        "best_reliable": bool(best and card_reliable(best["factscore"])),
        "stop_reason": state.get("stop_reason", ""),
        "usage": {"by_model": usage, "total": totals(usage)},
        "timings": state.get("timings") or {},
    }


def _checks(iteration: Mapping[str, Any]) -> dict[str, Any]:
    """The judge's record on the round's planted facts (and the annotator's on planted sentences), if any."""
    check = iteration["factscore"].get("judge_check")
    out: dict[str, Any] = {}
    if check:
        out["judge_false_acceptance"] = check["false_acceptance"]
        out["judge_true_acceptance"] = check["true_acceptance"]
        out["judge_false_acceptance_ci95"] = check.get("false_acceptance_ci95")
        out["judge_passed"] = check["passed"]
        out["judge_decision"] = check.get("decision")
        out["judge_note"] = check["note"]
    coherence = iteration.get("coherence") or {}
    annotator = [s["annotator_check"] for s in coherence.get("summaries") or [] if s.get("annotator_check")]
    if annotator:
        out["annotator_passed"] = all(a["passed"] for a in annotator)
        out["annotator_note"] = "; ".join(a["note"] for a in annotator)
    return out


def write_result(run_dir: str | Path, result: dict[str, Any]) -> Path:
    """Write result.json atomically into the run directory."""
    rd = RunDir(Path(run_dir))
    rd.root.mkdir(parents=True, exist_ok=True)
    rd.write_json(rd.result, result)
    return rd.result
