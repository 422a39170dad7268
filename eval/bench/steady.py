"""A long-lived process holds steady: threads and resident memory after each web UI run and eval item.

``python -m eval.bench.steady --ui 8 --eval 33`` drives, in this process against the scripted server, the web
UI over HTTP (each run a new copy of the witches' scenes, its three steps) and ``eval run`` over STORYSUMM val,
printing threads and memory after each and the threads by name at the end: numbers, not a verdict.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import re
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from functools import partial
from http.client import HTTPConnection
from pathlib import Path
from typing import Any

from eval.bench import ROOT
from eval.bench.workload import block, triples_answer
from storyjudge.core.scripted_server import OpenAIServer, all_text, last_user_text, schema_name

SUMMARY = (
    "Three witches meet on a heath and greet Macbeth as Thane of Cawdor and future king. "
    "Macbeth writes to his wife, who resolves that he shall have the crown."
)


def thread_names() -> Counter[str]:
    """Threads by name, numbers dropped (``sqlx-sqlite-worker-3`` counts as ``sqlx-sqlite-worker-``)."""
    names: Counter[str] = Counter()
    for task in Path("/proc/self/task").iterdir():
        with contextlib.suppress(OSError):  # ended meanwhile
            names[re.sub(r"\d+", "", (task / "comm").read_text().strip())] += 1
    return names


def sample() -> dict[str, Any]:
    """Threads (native ones included) and resident MB now, as the process holds them (no collection or trim)."""
    status = Path("/proc/self/status").read_text().splitlines()
    kb = next((int(line.split()[1]) for line in status if line.startswith("VmRSS:")), 0)
    return {"threads": len(list(Path("/proc/self/task").iterdir())), "rss_mb": round(kb / 1024, 1)}


def respond(body: dict[str, Any]) -> str:
    """The scripted model for every role: a plausible answer of the right shape, everything supported."""
    name, text = schema_name(body), last_user_text(body)
    if name == "SceneTriples":
        return triples_answer(text, ("Macbeth", "Banquo", "Duncan", "Lady Macbeth"))
    if name == "AtomicFacts":
        return json.dumps({"facts": [block(text, "sentence")]})
    if name == "Verdict":
        return json.dumps({"rationale": "Stated.", "supported": True, "feedback": "", "evidence": []})
    if name:
        return "{}"
    if "causes any confusion" in all_text(body):
        return "Questions: no confusion\nTypes: no confusion"
    return SUMMARY


def _request(address: tuple[str, int], path: str, body: Any = None, *, expect: int = 200) -> Any:
    """POST ``body`` to the UI (GET without one); its answer, or a RuntimeError when the UI refused."""
    connection = HTTPConnection(*address, timeout=60)
    data = None if body is None else json.dumps(body).encode()
    method = "GET" if data is None else "POST"
    connection.request(method, path, body=data, headers={"Content-Type": "application/json"} if data else {})
    response = connection.getresponse()
    answer = json.loads(response.read())
    connection.close()
    if response.status != expect:
        raise RuntimeError(f"the UI refused {method} {path}: {answer}")
    return answer


def ui_runs(
    count: int, root: Path, *, same_document: bool = False, on_run: Callable[[int, dict[str, Any]], None]
) -> list[dict[str, Any]]:
    """``count`` runs of the web UI, each a new document (or the same one again); a sample after each."""
    from storyjudge.apps.ui.server import make_server

    ui = make_server("127.0.0.1", 0, runs_dir=root / "runs")
    threading.Thread(target=ui.serve_forever, daemon=True, name="ui-serve").start()
    address = (str(ui.server_address[0]), int(ui.server_address[1]))
    samples = []
    try:
        with OpenAIServer(respond) as model:
            settings = {"model": "openai:scripted", "base_url": model.base_url, "ckg_samples": 1}
            story = (ROOT / "examples" / "macbeth-witches.md").read_text(encoding="utf-8")
            for n in range(1, count + 1):
                text = story if same_document else f"{story}\n\nCopy {n} of the witches' scenes.\n"
                run = {"text": text, "title": "witches", "settings": settings}
                view = _request(address, "/api/runs", run, expect=201)
                for step in ("graph", "summary", "score"):
                    _ui_step(address, view["name"], step, settings)
                samples.append(sample())
                on_run(n, samples[-1])
    finally:
        ui.shutdown()
        ui.server_close()
    return samples


def _ui_step(address: tuple[str, int], name: str, step: str, settings: dict[str, Any]) -> None:
    _request(address, f"/api/runs/{name}/steps/{step}", {"settings": settings}, expect=202)
    while (job := _request(address, f"/api/runs/{name}/job")["job"])["status"] == "running":
        time.sleep(0.1)
    if job["status"] != "done":
        raise RuntimeError(f"the {step} step failed: {job}")


def eval_items(
    count: int, root: Path, *, parallel: int = 2, on_item: Callable[[int, dict[str, Any]], None]
) -> list[dict[str, Any]]:
    """``eval run`` over the first ``count`` STORYSUMM val items: a sample after each, and one at the end (0)."""
    from eval.grid import ExperimentConfig
    from eval.runner import Experiment

    samples: list[dict[str, Any]] = []
    with OpenAIServer(respond) as model:
        config = ExperimentConfig.from_dict(
            {
                "name": "steady",
                "out_dir": str(root / "eval"),
                "task": "score",
                "metrics": ["factscore"],
                "datasets": [{"kind": "storysumm", "path": "storysumm:val", "limit": count}],
                "models": ["openai:scripted"],
                "base_url": model.base_url,
                "context": {"ckg_samples": 1},
                "concurrency": parallel,
            }
        )

        def after(row: dict[str, Any], done: int, planned: int) -> None:
            if row.get("status") != "ok":
                raise RuntimeError(f"item {row['item']['id']} failed: {row.get('error')}")
            samples.append(sample())
            on_item(done, samples[-1])

        Experiment(config).run(on_row=after)
    samples.append(sample())  # the experiment over: nothing of it runs any more
    on_item(0, samples[-1])
    return samples


def main(argv: list[str] | None = None) -> None:
    """Print threads and resident memory after each run; threads by name at the end."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ui", type=int, default=8, help="web UI runs (0: none)")
    parser.add_argument("--same-document", action="store_true", help="every UI run on the same document")
    parser.add_argument("--eval", type=int, default=33, help="STORYSUMM val items of the eval run (0: none)")
    parser.add_argument("--parallel", type=int, default=2, help="eval items at once")
    args = parser.parse_args(argv)

    def show(kind: str, n: int, s: dict[str, Any]) -> None:
        where = f"{kind} {n:3d}" if n else f"{kind} end"
        print(f"{where}: {s['threads']:4d} threads, {s['rss_mb']:8.1f} MB", flush=True)

    start = sample()
    print(f"start: {start['threads']} threads, {start['rss_mb']:.1f} MB")
    with tempfile.TemporaryDirectory(prefix="steady-") as tmp:
        if args.ui:
            ui_runs(args.ui, Path(tmp), same_document=args.same_document, on_run=partial(show, "ui run"))
        if args.eval:
            eval_items(args.eval, Path(tmp), parallel=args.parallel, on_item=partial(show, "eval item"))
    print("threads by name at the end:", dict(thread_names().most_common()))


if __name__ == "__main__":
    main()
