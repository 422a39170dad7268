"""Progress events that graphs stream (stream mode "custom") so the CLI, the UI and notebooks can draw bars.

Nodes call ``progress.emit(stage, total=...)`` once, then ``progress.emit(stage, advance=1)`` per item;
outside a streaming run it does nothing. A stage that belongs to a round of the refine loop says which when it
starts (``round=``: 0 for the first summary, n for the n-th refinement), so that progress, tables and stop
reasons number rounds alike.
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
