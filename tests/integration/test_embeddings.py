"""The default embedder loads offline from its wheel and returns 384-d unit vectors."""

from __future__ import annotations

import logging
import math

import pytest

from storyjudge.core.context import ConfigError
from storyjudge.core.embeddings import WindowedEmbeddings, get_embedder


@pytest.fixture
def embedder(monkeypatch: pytest.MonkeyPatch) -> WindowedEmbeddings:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "1")
    return get_embedder("minilm")


def dot(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True))


def test_default_embedder_returns_384_d_unit_vectors(embedder: WindowedEmbeddings) -> None:
    vectors = embedder.embed_documents(
        ["Macbeth kills Duncan.", "The witches meet on the heath.", "é ✓ 東京"]
    )
    assert len(vectors) == 3
    assert all(len(v) == 384 for v in vectors)
    assert all(math.isclose(math.sqrt(dot(v, v)), 1.0, abs_tol=1e-4) for v in vectors)
    assert embedder.embed_documents([]) == []


def test_window_and_tokenizer(embedder: WindowedEmbeddings) -> None:
    assert embedder.name == "minilm"
    assert embedder.window_tokens == 256
    assert embedder.count_tokens("hello world") == 2  # no [CLS]/[SEP]
    assert embedder.count_tokens("") == 0


def test_counting_a_long_scene_prints_no_tokenizer_warning(embedder: WindowedEmbeddings) -> None:
    seen: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            seen.append(record.getMessage())

    keep = Keep(logging.WARNING)
    logger = logging.getLogger("transformers.tokenization_utils_base")
    logger.addHandler(keep)
    try:
        assert embedder.count_tokens("word " * 2000) == 2000  # over the 512 the tokenizer would warn at
    finally:
        logger.removeHandler(keep)
    assert not [m for m in seen if "sequence length is longer" in m]


def test_query_and_document_vectors_agree_and_rank_sensibly(embedder: WindowedEmbeddings) -> None:
    query = embedder.embed_query("Who murders the king?")
    assert query == pytest.approx(embedder.embed_documents(["Who murders the king?"])[0], abs=1e-5)
    murder, weather = embedder.embed_documents(
        [
            "Macbeth stabs King Duncan to death in his sleep.",
            "It rained all afternoon over the quiet harbour.",
        ]
    )
    assert dot(query, murder) > dot(query, weather) + 0.1


def test_traced_forward_gives_the_vectors_sentence_transformers_gives(embedder: WindowedEmbeddings) -> None:
    """The traced transformer (one call without the interpreter lock) changes no vector.

    Texts of many lengths in one call, so batches pad; one is over the 256-token window, so it is truncated;
    one has spaces around it, which sentence-transformers strips.
    """
    import numpy as np
    import torch

    from storyjudge.core.embeddings import MiniLMEmbeddings

    assert isinstance(embedder, MiniLMEmbeddings)
    assert isinstance(embedder._forward, torch.jit.ScriptModule)
    texts = [
        "  Macbeth kills Duncan.  ",
        "word " * 400,
        "é ✓ 東京",
        *(
            f"Fact {n}: Lady Macbeth walks in her sleep and washes her hands. " * (1 + n % 5)
            for n in range(40)
        ),
    ]
    ours = np.array(embedder.embed_documents(texts))
    reference = embedder.model.encode(texts, batch_size=32, normalize_embeddings=True)
    assert ours.shape == reference.shape == (len(texts), 384)
    assert float(np.abs(ours - reference).max()) < 1e-5


def test_embedder_is_loaded_once_per_process(embedder: WindowedEmbeddings) -> None:
    assert get_embedder("minilm") is embedder


@pytest.mark.parametrize("spec", ["openai:text-embedding-3-small", "bge-m3:", "minilm-l12", ""])
def test_unknown_embedder_spec_says_what_is_allowed(spec: str) -> None:
    with pytest.raises(ConfigError, match="minilm"):
        get_embedder(spec)


@pytest.mark.slow
def test_missing_bge_m3_weights_fail_with_advice_and_no_download(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ConfigError, match="nothing is downloaded"):
        get_embedder("bge-m3:/nonexistent/bge-m3")


def test_the_shared_embedder_is_safe_from_many_threads() -> None:
    """Eight threads count tokens and embed at once, many times: every answer equals the serial one.

    A Hugging Face fast tokenizer raises ``RuntimeError: Already borrowed`` when two threads use it at once;
    evaluation items and graph branches in parallel share one embedder per process.
    """
    import threading

    from storyjudge.core.embeddings import get_embedder

    model = get_embedder("minilm")
    texts = [
        f"Mara repairs lamp number {n} in the lighthouse of Gull Island. " * (1 + n % 7) for n in range(16)
    ]
    counts = [model.count_tokens(text) for text in texts]
    vectors = model.embed_documents(texts[:4])
    errors: list[BaseException] = []
    wrong: list[int] = []
    start = threading.Barrier(8)

    def work(worker: int) -> None:
        try:
            start.wait()
            for round_ in range(30):
                text = (worker + round_) % len(texts)
                if model.count_tokens(texts[text]) != counts[text]:
                    wrong.append(text)
                if round_ % 10 == 0:
                    got = model.embed_documents(texts[:4])
                    if any(
                        abs(a - b) > 1e-5
                        for u, v in zip(got, vectors, strict=True)
                        for a, b in zip(u, v, strict=True)
                    ):
                        wrong.append(-1)
        except BaseException as exc:  # noqa: BLE001 - collected and reported
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)
    assert not errors, errors[:3]
    assert not wrong
