"""The benchmark's scripted model: a story, its summaries, deterministic answers, and a server process.

The judge rejects exactly the facts that say someone "steals" and the refiner repairs two per round, so a
2-iteration refine scores 0.933 -> 0.967 -> 1.0 with known calls per stage. The server runs in its own process
(as a real endpoint would, off the benchmark's interpreter lock) and logs each body for the bound.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

from eval.bench import ROOT, checkout_env
from storyjudge.core.scripted_server import OpenAIServer, all_text, last_user_text, schema_name

CAST = ("Mara", "Oren", "Ilsa", "Tobin", "Vera", "Anselm", "Greta", "Piet")
PLACES = ("harbour", "lighthouse", "market", "chapel", "mill", "bridge", "orchard", "quay", "tower", "inn")
VERBS = ("meets", "helps", "warns", "follows", "thanks", "visits")
WRONG = "steals the lamp from"
RIGHT = "gives the lamp to"
FIXES_PER_ROUND = 2


def story(chapters: int = 12) -> str:
    """A narrative of ``chapters`` chapters, about 200 words each."""
    parts = []
    for c in range(chapters):
        lines = []
        for s in range(12):
            a, b = CAST[(c + s) % len(CAST)], CAST[(c + 3 * s + 1) % len(CAST)]
            place = PLACES[(c * 7 + s) % len(PLACES)]
            lines.append(f"{a} {VERBS[(c + s) % len(VERBS)]} {b} near the {place} while the tide turns.")
        parts.append(f"Chapter {c + 1}\n\n" + " ".join(lines))
    return "\n\n".join(parts) + "\n"


def book_summary(sentences: int = 20) -> str:
    """The first summary: ``sentences`` sentences of three facts; every fifth's first is false."""
    parts = []
    for i in range(sentences):
        a, b, c = CAST[i % len(CAST)], CAST[(i + 1) % len(CAST)], CAST[(i + 2) % len(CAST)]
        first = f"{a} {WRONG if i % 5 == 0 else RIGHT} {b}"
        second = f"{b} {VERBS[i % len(VERBS)]} {c} at the {PLACES[i % len(PLACES)]}"
        parts.append(f"In part {i + 1}, {first}, and {second}, and {c} sleeps when part {i + 1} ends.")
    return " ".join(parts)


def coherence_summaries(count: int = 100, sentences: int = 20) -> list[dict[str, str]]:
    """``count`` distinct summaries of ``sentences`` sentences each, for BooookScore."""
    return [
        {
            "id": f"s{k:03d}",
            "summary": " ".join(
                f"In part {i + 1} of tale {k}, {CAST[(k + i) % len(CAST)]} repairs the lamp at the "
                f"{PLACES[(k + 2 * i) % len(PLACES)]}."
                for i in range(sentences)
            ),
        }
        for k in range(count)
    ]


def block(text: str, tag: str) -> str:
    """The last ``tag`` data block of a prompt (prompts may show an example block first)."""
    found = re.findall(rf"<{tag}[^>]*>\n?(.*?)\n?</{tag}>", text, re.DOTALL)
    return found[-1].strip() if found else ""


def triples_answer(text: str, cast: tuple[str, ...]) -> str:
    """The extraction's answer: the cast named in the scene, each meeting the next."""
    named = [person for person in cast if person in block(text, "scene")]
    triples = [
        {"subject": a, "predicate": "meets", "object": b} for a, b in zip(named, named[1:], strict=False)
    ]
    return json.dumps({"characters": [{"name": p, "aliases": []} for p in named], "triples": triples})


class BenchResponder:
    """The scripted model for every role (see the module docstring)."""

    def __init__(self, sentences: int = 20) -> None:
        self.sentences = sentences

    def __call__(self, body: dict[str, Any]) -> str:
        """The scripted answer to one request."""
        name = schema_name(body)
        text = last_user_text(body)
        if name == "SceneTriples":
            return triples_answer(text, CAST)
        if name == "AtomicFacts":
            sentence = block(text, "sentence").rstrip(".")
            return json.dumps({"facts": [f"{part.strip()}." for part in sentence.split(", and ")]})
        if name == "Verdict":
            wrong = WRONG in block(text, "fact")
            rationale = (
                "The scenes never show anyone stealing the lamp." if wrong else "The scenes state this."
            )
            feedback = f"Replace '{WRONG}' with '{RIGHT}'." if wrong else ""
            return json.dumps(
                {"rationale": rationale, "supported": not wrong, "feedback": feedback, "evidence": []}
            )
        whole = all_text(body)
        if "causes any confusion" in whole:
            number = int(re.findall(r'<sentence number="(\d+)">', text)[-1])
            if number % 4 == 0:
                return f"Questions: What led to part {number}?\nTypes: causal omission"
            return "Questions: no confusion\nTypes: no confusion"
        if "You revise a summary" in whole:
            summary = block(text, "summary")
            return summary.replace(WRONG, RIGHT, FIXES_PER_ROUND)
        if "Below is a summary of a book" in whole:  # artifact removal: the summary unchanged
            return block(text, "summary")
        return book_summary(self.sentences)  # a chunk summary or a merge


class ServerProcess:
    """``with ServerProcess(latency, slots, log) as server:`` gives ``base_url`` and ``completions``."""

    def __init__(self, latency: float, slots: int, log: Path, sentences: int = 20) -> None:
        self.log = log
        args = [sys.executable, "-m", "eval.bench.workload", *map(str, (latency, slots, log, sentences))]
        self.process = subprocess.Popen(
            args, cwd=ROOT, env=checkout_env(), stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        assert self.process.stdout is not None
        self.base_url = self.process.stdout.readline().strip()
        if not self.base_url.startswith("http://127.0.0.1:"):
            raise RuntimeError(f"the scripted server did not start: {self.base_url!r}")

    def __enter__(self) -> ServerProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.process.terminate()
        self.process.wait(timeout=30)

    @property
    def completions(self) -> list[dict[str, Any]]:
        """Request bodies answered so far, in the order they were answered."""
        if not self.log.exists():
            return []
        lines = self.log.read_text(encoding="utf-8").splitlines()
        return [json.loads(line) for line in lines if line.strip()]


def serve() -> None:
    """The server process (``ServerProcess`` gives latency, slots, log and sentences): answer, log each body."""
    latency, slots, path, sentences = sys.argv[1:5]
    responder, lock = BenchResponder(int(sentences)), threading.Lock()
    with open(path, "a", encoding="utf-8") as log:

        def answer(body: dict[str, Any]) -> str:
            with lock:
                log.write(json.dumps(body) + "\n")
                log.flush()
            return responder(body)

        with OpenAIServer(answer, latency=float(latency), slots=int(slots)) as server:
            print(server.base_url, flush=True)
            sys.stdin.read()  # returns when the parent closes the pipe or exits


if __name__ == "__main__":
    serve()
