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
