"""Bootstrap intervals of a mean and of a difference: seeded, paired when the units are the same."""

from __future__ import annotations

import pytest

from storyjudge.core.intervals import (
    aligned_difference_interval,
    difference_interval,
    interval_text,
    mean_interval,
    signed_text,
)


def test_mean_interval_holds_the_mean_and_is_reproducible() -> None:
    values = [1.0] * 6 + [0.0] * 4
    first = mean_interval(values)
    assert first["mean"] == pytest.approx(0.6) and first["n"] == 10
    low, high = first["ci95"]
    assert 0.2 < low < 0.6 < high < 1.0
    assert mean_interval(values) == first  # seeded


def test_mean_interval_leaves_out_none_and_needs_two_values() -> None:
    assert mean_interval([1.0, None]) == {"mean": 1.0, "ci95": None, "n": 1}
    assert mean_interval([]) == {"mean": None, "ci95": None, "n": 0}


def test_paired_difference_cancels_what_the_units_share() -> None:
    a = [0.1, 0.5, 0.9, 0.3, 0.7, 0.2]
    b = [x + 0.05 for x in a]  # the same units, each a little better
    paired = difference_interval(a, b, paired=True)
    assert paired["difference"] == pytest.approx(0.05) and paired["n"] == 6
    assert paired["ci95"] == pytest.approx([0.05, 0.05]) and paired["excludes_zero"]
    independent = difference_interval(a, b, paired=False)  # the spread between units hides the gain
    assert independent["ci95"][0] < 0 < independent["ci95"][1] and not independent["excludes_zero"]
    assert independent["n"] == [6, 6]


def test_paired_difference_drops_incomplete_pairs_and_refuses_unequal_lists() -> None:
    out = difference_interval([1.0, None, 0.0], [1.0, 1.0, 1.0], paired=True)
    assert out["n"] == 2 and out["difference"] == pytest.approx(0.5)
    with pytest.raises(ValueError, match="differ in number"):
        difference_interval([1.0], [1.0, 0.0], paired=True)


def test_texts() -> None:
    assert interval_text(0.5, [0.25, 0.75]) == "0.500 [0.250, 0.750]"
    assert interval_text(None, None) == "-"
    assert signed_text(0.05, [-0.1, 0.2]) == "+0.050 [-0.100, +0.200]"


def test_aligned_units_pair_what_both_sides_have() -> None:
    same = [(1.0, 1.0)] * 8 + [(0.0, 1.0)] * 2  # two facts fixed, the rest unchanged
    out = aligned_difference_interval(same)
    assert out["difference"] == pytest.approx(0.2) and out["pairs"] == 10 and out["n"] == 10
    assert out["ci95"][0] >= 0.0 and out["ci95"][1] <= 0.6
    alone = aligned_difference_interval([(1.0, 1.0), (1.0, 1.0), (None, 0.0), (1.0, None), (None, None)])
    assert alone["n"] == 4 and alone["pairs"] == 2  # a unit with no value on either side is dropped
    assert alone["difference"] == pytest.approx(2 / 3 - 1.0)
    assert aligned_difference_interval([(1.0, None)])["difference"] is None
