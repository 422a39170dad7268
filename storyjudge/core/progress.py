"""Progress events that graphs stream (stream mode "custom"): ``emit(stage, total=...)``, then ``advance=1``."""

from __future__ import annotations


def emit(
    stage: str, *, advance: int = 0, total: int | None = None, message: str = "", round: int | None = None
) -> None:
    """Emit ``{"progress": {...}}`` on the custom stream when one is open."""
    extra = {"total": total, "message": message or None, "round": round}
    event = {"stage": stage, "advance": advance, **{k: v for k, v in extra.items() if v is not None}}
    try:
        from langgraph.config import get_stream_writer

        get_stream_writer()({"progress": event})
    except Exception:  # noqa: BLE001 - not inside a graph run, or a closed stream: never fails a node
        return
