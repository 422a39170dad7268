"""An experiment's missing score says why: never a blank, never the hint to add a metric that is there."""

from __future__ import annotations

from pathlib import Path

from eval.plots import nfs_vs_coherence_plot
from storyjudge.apps.cli.evaluate import _missing_scores


def test_a_cell_without_a_coherence_score_gets_a_note_with_its_coverage() -> None:
    line = {"cell": "squality-x", "ok": 2, "nfs": 0.5, "coherence": None, "coherence_coverage": 0.0}
    line["coherence_unreliable"] = 2
    (note,) = _missing_scores([line], ["factscore", "coherence"])
    assert "cell 1 (squality-x): no coherence score" in note and "2 of 2" in note and "coverage 0%" in note
    assert _missing_scores([line], ["factscore"]) == []  # not asked for: nothing to explain
    assert _missing_scores([{**line, "coherence": 0.8}], ["factscore", "coherence"]) == []


def test_the_plot_note_says_the_scores_were_unreliable_when_coherence_was_asked(tmp_path: Path) -> None:
    asked = [{"status": "ok", "cell": "c", "factscore": {"score": 0.5}, "coherence": {"score": None}}]
    note = nfs_vs_coherence_plot(asked, tmp_path / "p.png")
    assert note is not None and "add 'coherence'" not in note and "no BooookScore counted" in note
    not_asked = [{"status": "ok", "cell": "c", "factscore": {"score": 0.5}}]
    assert "add 'coherence' to metrics" in (nfs_vs_coherence_plot(not_asked, tmp_path / "p.png") or "")
