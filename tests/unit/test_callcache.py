"""The LLM call cache: a rerun costs nothing, and anything that changes the answer changes the key."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from pydantic import BaseModel

from prompts import Prompt
from storyjudge.core.callcache import CallCache, cache_for, request_key, server_id
from storyjudge.core.context import Context
from storyjudge.core.llm import Message, ask_structured, ask_text
from storyjudge.core.scripted_server import OpenAIServer
from storyjudge.core.usage import totals

PROMPT_V1 = Prompt(name="story", version="1", text="Tell a story.")
PROMPT_V2 = Prompt(name="story", version="2", text="Tell a story.")
MESSAGES: list[Message] = [("user", "Once upon a time")]


class Verdict(BaseModel):
    rationale: str
    supported: bool


def counting(answer: str = "There was a king.") -> Callable[[dict[str, object]], str]:
    return lambda body: answer


def test_identical_call_is_a_cache_hit_without_a_request(
    scripted_server: Callable[..., OpenAIServer], ctx_for: Callable[..., Context]
) -> None:
    server = scripted_server(counting())
    ctx = ctx_for(server)
    first = ask_text(ctx, "summarizer", PROMPT_V1, MESSAGES)
    second = ask_text(ctx, "summarizer", PROMPT_V1, MESSAGES)
    assert len(server.completions) == 1
    assert (first.cached, second.cached) == (False, True)
    assert second.text == first.text == "There was a king."
    assert totals(second.usage)["cache_hits"] == 1
    assert totals(second.usage)["calls"] == 0
    assert totals(second.usage)["input_tokens"] == 0


def test_structured_call_replays_from_the_cache(
    scripted_server: Callable[..., OpenAIServer], ctx_for: Callable[..., Context]
) -> None:
    server = scripted_server(counting('{"rationale": "r", "supported": false}'))
    ctx = ctx_for(server)
    first = ask_structured(ctx, "judge", PROMPT_V1, MESSAGES, Verdict)
    second = ask_structured(ctx, "judge", PROMPT_V1, MESSAGES, Verdict)
    assert len(server.completions) == 1
    assert second.cached and second.value == first.value


def test_answers_persist_on_disk(
    scripted_server: Callable[..., OpenAIServer], ctx_for: Callable[..., Context], tmp_path: Path
) -> None:
    server = scripted_server(counting())
    ask_text(ctx_for(server), "summarizer", PROMPT_V1, MESSAGES)
    # a fresh CallCache on the same directory (as in a new process) sees the stored answer
    assert len(CallCache(tmp_path / "cache")) == 1


def test_different_prompt_version_is_a_miss(
    scripted_server: Callable[..., OpenAIServer], ctx_for: Callable[..., Context]
) -> None:
    server = scripted_server(counting())
    ctx = ctx_for(server)
    ask_text(ctx, "summarizer", PROMPT_V1, MESSAGES)
    answer = ask_text(ctx, "summarizer", PROMPT_V2, MESSAGES)
    assert not answer.cached
    assert len(server.completions) == 2
    edited = Prompt(name="story", version="1", text="Tell a sad story.")  # same label, edited text
    assert not ask_text(ctx, "summarizer", edited, MESSAGES).cached
    assert len(server.completions) == 3


def test_sample_index_changes_the_key(
    scripted_server: Callable[..., OpenAIServer], ctx_for: Callable[..., Context]
) -> None:
    server = scripted_server(counting())
    ctx = ctx_for(server)
    for sample in (0, 1, 2):
        assert not ask_text(ctx, "extractor", PROMPT_V1, MESSAGES, temperature=0.7, sample=sample).cached
    assert ask_text(ctx, "extractor", PROMPT_V1, MESSAGES, temperature=0.7, sample=1).cached
    assert len(server.completions) == 3
    # samples differ in the seed sent to the server, so a sampling server draws distinct answers
    assert [body.get("seed") for body in server.completions] == [None, 1, 2]


def test_other_request_settings_change_the_key(
    scripted_server: Callable[..., OpenAIServer], ctx_for: Callable[..., Context]
) -> None:
    server = scripted_server(counting())
    ctx = ctx_for(server)
    ask_text(ctx, "summarizer", PROMPT_V1, MESSAGES)
    assert not ask_text(ctx, "summarizer", PROMPT_V1, MESSAGES, temperature=0.5).cached
    assert not ask_text(ctx, "summarizer", PROMPT_V1, MESSAGES, max_tokens=7).cached
    assert not ask_text(ctx, "summarizer", PROMPT_V1, [("user", "Once upon a time.")]).cached
    assert not ask_text(ctx.replace(model="openai:other"), "summarizer", PROMPT_V1, MESSAGES).cached
    assert len(server.completions) == 5


def test_empty_answers_are_not_cached(
    scripted_server: Callable[..., OpenAIServer], ctx_for: Callable[..., Context]
) -> None:
    answers = ["", "  \n", "Now it speaks."]
    server = scripted_server(lambda body: answers.pop(0))
    ctx = ctx_for(server)
    texts = [ask_text(ctx, "summarizer", PROMPT_V1, MESSAGES).text for _ in range(3)]
    assert texts == ["", "", "Now it speaks."]
    assert len(server.completions) == 3
    assert ask_text(ctx, "summarizer", PROMPT_V1, MESSAGES).cached


def test_request_key_is_stable_and_order_independent() -> None:
    a = request_key("openai:m", "p@1+abc", {"messages": [["user", "x"]], "temperature": 0.0})
    b = request_key("openai:m", "p@1+abc", {"temperature": 0.0, "messages": [["user", "x"]]})
    assert a == b and len(a) == 64
    assert a != request_key("openai:n", "p@1+abc", {"messages": [["user", "x"]], "temperature": 0.0})


def test_cache_is_shared_per_directory_and_thread_safe(tmp_path: Path) -> None:
    cache = cache_for(tmp_path)
    assert cache_for(tmp_path / ".") is cache

    def write(worker: int) -> None:
        for i in range(20):
            cache.put(f"{worker}-{i}", "openai:m", "p@1", {"text": f"{worker}:{i}"})

    threads = [threading.Thread(target=write, args=(w,)) for w in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(cache) == 80
    assert cache.get("3-19") == {"text": "3:19"}
    assert cache.get("missing") is None


def test_two_servers_with_a_model_of_the_same_name_do_not_share_answers(
    scripted_server: Callable[..., OpenAIServer], ctx_for: Callable[..., Context]
) -> None:
    first_server = scripted_server(counting("First server."))
    second_server = scripted_server(counting("Second server."))
    assert ask_text(ctx_for(first_server), "summarizer", PROMPT_V1, MESSAGES).text == "First server."
    second = ask_text(ctx_for(second_server), "summarizer", PROMPT_V1, MESSAGES)  # the same cache directory
    assert (second.text, second.cached) == ("Second server.", False)
    assert len(second_server.completions) == 1
    again = ask_text(
        ctx_for(first_server, base_url=first_server.base_url + "/"), "summarizer", PROMPT_V1, MESSAGES
    )
    assert (again.text, again.cached) == ("First server.", True)  # the same server, written differently


def test_server_ids_normalise_the_base_url() -> None:
    assert server_id("HTTP://LocalHost:80/v1/") == server_id("http://localhost/v1") == "http://localhost/v1"
    assert server_id("https://host.example:443/v1") == "https://host.example/v1"
    assert server_id("http://127.0.0.1:8080/v1") != server_id("http://127.0.0.1:8081/v1")
    assert server_id("http://[::1]:8080/v1") == "http://[::1]:8080/v1"
    assert server_id("") == server_id("https://api.openai.com/v1") == ""
    key = {"messages": [["user", "x"]]}
    assert request_key("openai:m", "p", key) == request_key("openai:m", "p", key, "")
    assert request_key("openai:m", "p", key) != request_key("openai:m", "p", key, "http://localhost/v1")


def test_an_answer_that_does_not_parse_is_asked_again_on_a_rerun(
    scripted_server: Callable[..., OpenAIServer], ctx_for: Callable[..., Context]
) -> None:
    """A broken server's unreadable answers are never replayed: the rerun against a healthy one reaches it."""
    broken = scripted_server(counting("I think it is supported."))
    failed = ask_structured(ctx_for(broken, parse_retries=1), "judge", PROMPT_V1, MESSAGES, Verdict)
    assert not failed.ok and len(broken.completions) == 2
    healthy = '{"rationale": "r", "supported": true}'
    broken.responder = counting(healthy)  # the same server, fixed
    rerun = ask_structured(ctx_for(broken, parse_retries=1), "judge", PROMPT_V1, MESSAGES, Verdict)
    assert rerun.ok and not rerun.cached and rerun.attempts == 1
    assert len(broken.completions) == 3
    replay = ask_structured(ctx_for(broken, parse_retries=1), "judge", PROMPT_V1, MESSAGES, Verdict)
    assert replay.ok and replay.cached and len(broken.completions) == 3


def test_an_unusable_answer_in_an_older_cache_is_not_replayed(
    scripted_server: Callable[..., OpenAIServer], ctx_for: Callable[..., Context]
) -> None:
    server = scripted_server(counting('{"rationale": "r", "supported": true}'))
    ctx = ctx_for(server, parse_retries=0)
    assert ask_structured(ctx, "judge", PROMPT_V1, MESSAGES, Verdict).ok
    store = cache_for(ctx.cache_dir)
    with store._connection() as conn:  # as an older version stored it: an answer that is not the schema's
        conn.execute("UPDATE calls SET response = ?", ('{"text": "not json", "finish_reason": "stop"}',))
    again = ask_structured(ctx, "judge", PROMPT_V1, MESSAGES, Verdict)
    assert again.ok and not again.cached and len(server.completions) == 2


def _open_files(name: str) -> int:
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            count += os.readlink(f"/proc/self/fd/{fd}").endswith(name)
        except OSError:
            continue
    return count


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="counts open files through /proc")
def test_many_threads_and_many_caches_keep_few_files_open(tmp_path: Path) -> None:
    """Short-lived threads over many caches (an experiment: a cache per item) do not pile up open files.

    With a connection per thread, every thread that ever used a long-lived cache left its connection open:
    a factscore run left about 60, and a long benchmark ran out of descriptors ``select()`` accepts.
    """
    from storyjudge.core import callcache

    before = _open_files("llm_calls.sqlite")
    for item in range(3 * callcache.OPEN_CACHES):
        cache = callcache.cache_for(tmp_path / f"item-{item}")

        def work(n: int, cache: callcache.CallCache = cache) -> None:
            cache.put(f"k{n}", "openai:m", "v1", {"text": str(n)})
            assert cache.get(f"k{n}") == {"text": str(n)}

        threads = [threading.Thread(target=work, args=(n,)) for n in range(12)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert len(cache) == 12
    held = _open_files("llm_calls.sqlite") - before
    # idle pools hold at most OPEN_CACHES x IDLE_CONNECTIONS; SQLite may keep a closed connection's descriptor a
    # while longer (POSIX locks are per process, so it defers closing one while the file is locked elsewhere).
    # Per-thread connections left 312 here.
    assert held <= 2 * callcache.OPEN_CACHES * callcache.IDLE_CONNECTIONS, held
    assert callcache.cache_for(tmp_path / "item-0").get("k3") == {"text": "3"}  # a closed pool opens again
