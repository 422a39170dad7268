"""Progress events that graphs stream (stream mode "custom") so the CLI, the UI and notebooks can draw bars.

Nodes call ``emit(stage, total=...)`` once, then ``emit(stage, advance=1)`` per item; ``round=`` numbers the
refine round a stage belongs to.
"""

from __future__ import annotations

from typing import Any


def emit(
    stage: str, *, advance: int = 0, total: int | None = None, message: str = "", round: int | None = None
) -> None:
    """Emit ``{"progress": {...}}`` on the custom stream when one is open."""
    try:
        from langgraph.config import get_stream_writer

        writer = get_stream_writer()
    except Exception:  # noqa: BLE001 - not inside a graph run
        return
    event: dict[str, Any] = {"stage": stage, "advance": advance}
    if total is not None:
        event["total"] = total
    if message:
        event["message"] = message
    if round is not None:
        event["round"] = round
    try:
        writer({"progress": event})
    except Exception:  # noqa: BLE001 - a closed stream must never fail a node
        return
