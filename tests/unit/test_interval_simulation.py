"""The statistics' promises, measured by simulation: judges with known acceptance rates, many runs, no model.

A run is a summary of sentences holding a few facts each, facts of one sentence sharing how likely they are
to be true (so they are not independent), judged by a judge that accepts a true fact with its true acceptance
and a false one with its false acceptance; its planted facts are judged by the same judge (planted errors as
hard to catch as real ones), planted as the node plants them (``planted.rule``'s looks, half as many true ones).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from storyjudge.core.intervals import corrected_interval, ratio_interval, rogan_gladen
from storyjudge.core.narrativefactscore import MIN_SEPARATION
from storyjudge.core.planted import MAX_FALSE, TRUE_SHARE, decide, rule

JUDGES = ((0.0, 0.9), (0.1, 0.9), (0.25, 0.85), (0.4, 0.8), (0.5, 0.9), (1.0, 1.0))
"""(false acceptance, true acceptance) of the simulated judges."""
RUNS = 200
SENTENCES = 15
SUPPORTED = 0.7  # the share of a summary's facts that are true, on average


def plant(rng: np.random.Generator, far: float, tar: float) -> tuple[str, list[bool], list[bool]]:
    """One run's judge check: its decision and the planted false and true facts' verdicts (True: accepted)."""
    false = list(rng.random(MAX_FALSE) < far)
    true = list(rng.random(math.ceil(MAX_FALSE * TRUE_SHARE)) < tar)
    for look, _, _ in rule():
        decision = decide(false[:look])
        if decision is not None:
            return decision, false[:look], true[: math.ceil(look * TRUE_SHARE)]
    raise AssertionError("the full design always decides by its last look")


def summary(rng: np.random.Generator, far: float, tar: float) -> tuple[np.ndarray, np.ndarray, float, float]:
    """Supported and judged facts per sentence, the share truly supported and the expected observed share."""
    facts = rng.integers(1, 5, size=SENTENCES)
    truth = rng.beta(SUPPORTED * 4, (1 - SUPPORTED) * 4, size=SENTENCES)  # sentences differ: facts cluster
    true_facts = rng.binomial(facts, truth)
    accepted = rng.binomial(true_facts, tar) + rng.binomial(facts - true_facts, far)
    return accepted.astype(float), facts.astype(float), SUPPORTED, tar * SUPPORTED + far * (1 - SUPPORTED)


def test_the_judge_check_flags_as_promised() -> None:
    rng = np.random.default_rng(46)
    flagged = {}
    for far, tar in JUDGES:
        runs = [plant(rng, far, tar) for _ in range(1000)]
        flagged[far] = sum(decision != "passed" for decision, _, _ in runs) / len(runs)
        used = np.mean([len(false) for _, false, _ in runs])
        assert used <= MAX_FALSE
    print("flag rates by false acceptance:", flagged)
    assert flagged[0.0] == 0.0 and flagged[0.1] <= 0.05, "a judge accepting <= 10% of false facts"
    assert flagged[0.4] >= 0.95 and flagged[0.5] >= 0.95 and flagged[1.0] == 1.0, "one accepting >= 40%"
    assert 0.05 < flagged[0.25] < 0.95, "in between, the check is a coin that leans with the rate"


@pytest.mark.parametrize(("far", "tar"), JUDGES)
def test_intervals_cover_the_truth(far: float, tar: float) -> None:
    rng = np.random.default_rng(int(far * 100) + 7)
    nfs_hits = corrected_hits = corrected_runs = 0
    for run in range(RUNS):
        _, false, true = plant(rng, far, tar)
        accepted, judged, supported, expected = summary(rng, far, tar)
        ci = ratio_interval(accepted.tolist(), judged.tolist(), seed=run)
        assert ci is not None
        nfs_hits += ci[0] <= expected <= ci[1]
        far_hat, tar_hat = float(np.mean(false)), float(np.mean(true))
        if tar_hat - far_hat < MIN_SEPARATION:
            continue  # the card has no correction, only the reason
        corrected_runs += 1
        point = rogan_gladen(float(accepted.sum() / judged.sum()), far_hat, tar_hat)
        band = corrected_interval(accepted.tolist(), judged.tolist(), false, true, seed=run)
        assert band is not None and band[0] <= point + 1e-9 and point - 1e-9 <= band[1]
        corrected_hits += band[0] <= supported <= band[1]
    print(f"judge {far}/{tar}: NFS covered {nfs_hits / RUNS:.3f}", end="")
    assert nfs_hits / RUNS >= 0.9
    if tar - far >= MIN_SEPARATION:
        print(f", corrected covered {corrected_hits / corrected_runs:.3f} of {corrected_runs}")
        # a run whose few planted items show a gap under the floor gets no correction, only its reason
        assert corrected_runs >= RUNS * 0.5 and corrected_hits / corrected_runs >= 0.9
    else:
        assert corrected_runs <= RUNS * 0.1, "a judge that cannot tell true from false gets no correction"
