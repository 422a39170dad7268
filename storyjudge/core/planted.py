"""Control facts with known verdicts planted among the judged ones, so every score carries its judge's record.

Invented (a relation given to an unused name) and swapped (a relation moved to a character who never meets its
partner) facts are false, verbatim story sentences true; the share of false ones accepted decides if a score counts.
Their verdicts never enter a score. A relation moved to one who shares a scene with its partner is only probably
false: never planted. Seeded by the run's seed alone, so every round of a run plants the same items.
"""

from __future__ import annotations

import functools
import random
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from storyjudge.core.charactergraph import edge_line, edges, occurs_in
from storyjudge.core.records import JudgeCheck, PlantedFact, PlantedTally, PlantedVerdict, Scene
from storyjudge.core.textsplit import sentences

_GIVEN = (
    *("Tobren", "Ysolde", "Quennar", "Marivet", "Dalquist", "Oswyth", "Brannoch", "Feyrin", "Corvane"),
    *("Idrelle", "Halvek", "Anselka", "Tamsine", "Orwald", "Beritha", "Casimon", "Elowen", "Jorvath"),
)
_FAMILY = (
    *("Vask", "Thornwick", "Quillon", "Marrowby", "Hadleigh", "Orsk", "Fennimore", "Drabek", "Pendry"),
    *("Carrowe", "Ashgrove", "Lindqvist", "Morrant", "Velloway", "Stroud", "Kestrell"),
)
CONFUSING = (
    "{name} finally handed back the brass key, just as the two of them had agreed at the ferry.",
    "Because of the second letter, {name} refused to sign and left for the northern mill that night.",
    "Only then did {name} admit to having hidden the ledger behind the chapel organ.",
    "{name}'s warning about the flooded cellar was ignored once again.",
    "After the quarrel over the dowry, {name} never spoke to the twins again.",
)
MAX_CHARACTERS = 30
MAX_SCENES_READ = 12  # scenes split into sentences for verbatim facts
_MARKUP = re.compile(r"^\s*\*\*[^*\n]+\*\*\s*$|[*_#>`]+", re.MULTILINE)  # speaker labels, emphasis, headings
_EPSILON = 1e-9


def invented_name(text: str, rng: random.Random, taken: set[str]) -> str:
    """A two-word name neither of whose words occurs in ``text`` ("" when none is left)."""
    pairs = [(given, family) for given in _GIVEN for family in _FAMILY]
    rng.shuffle(pairs)
    for given, family in pairs:
        name = f"{given} {family}"
        if name not in taken and not occurs_in(given, text) and not occurs_in(family, text):
            taken.add(name)
            return name
    return ""


def _relations(ckg: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    between = [e for e in edges(ckg) if e.get("source") != e.get("target")]
    return sorted(between, key=lambda e: (-int(e.get("count", 0)), edge_line(e)))


def _story_sentences(
    scenes: Sequence[Scene], forms: Sequence[str], rng: random.Random
) -> list[tuple[str, str]]:
    order = list(scenes)
    rng.shuffle(order)
    found: list[tuple[str, str]] = []
    for scene in order[:MAX_SCENES_READ]:
        for raw in sentences(_MARKUP.sub(" ", scene["text"])):
            text = " ".join(raw.split())
            plain = 6 <= len(text.split()) <= 30 and text.endswith(".") and not re.search(r"[\"“”?!]", text)
            if plain and (not forms or any(occurs_in(name, text) for name in forms)):
                found.append((scene["id"], text))
    return found


def _invented(
    ckg: Mapping[str, Any],
    story: str,
    lines: list[tuple[str, str]],
    names: Mapping[str, list[str]],
    rng: random.Random,
) -> list[tuple[str, str, str]]:
    """(text, how it was built, kind) of easy false facts: relations, then story sentences, given a new name."""
    taken: set[str] = set()
    made: list[tuple[str, str, str]] = []
    for edge in _relations(ckg):
        name = invented_name(story, rng, taken)
        if not name:
            break
        text = f"{name} {edge.get('predicate') or edge.get('key')} {edge['target']}."
        built = f'the relation "{edge_line(edge)}" given to "{name}" instead of {edge["source"]}'
        made.append((text, f"{built}; no word of that name occurs in the story", "invented"))
    for scene_id, text in lines:
        form = next((n for forms in names.values() for n in forms if occurs_in(n, text)), None)
        if form is None:
            continue
        name = invented_name(story, rng, taken)
        if not name:
            break
        swapped = re.sub(r"(?<!\w)" + re.escape(form) + r"(?!\w)", name, text, flags=re.IGNORECASE)
        built = f'a sentence of scene {scene_id} with "{form}" replaced by "{name}"'
        made.append((swapped, f"{built}; no word of that name occurs in the story", "invented"))
    rng.shuffle(made)
    return made


def _swapped(
    ckg: Mapping[str, Any], presence: Mapping[str, set[str]], rng: random.Random
) -> list[tuple[str, str, str]]:
    """(text, how it was built, kind) of hard false facts: a relation moved to one who never meets its partner."""
    made: list[tuple[str, str, str]] = []
    for edge in _relations(ckg):
        source, target = str(edge["source"]), str(edge["target"])
        predicate = str(edge.get("predicate") or edge.get("key"))
        line = edge_line(edge)
        for other in sorted(presence):
            if other in (source, target) or not presence[other]:
                continue
            for kept, moved, text in (
                (target, source, f"{other} {predicate} {target}."),
                (source, target, f"{source} {predicate} {other}."),
            ):
                if presence.get(kept) and presence[other].isdisjoint(presence[kept]):
                    why = f"no scene names both {other} and {kept}, so the story cannot state it"
                    made.append(
                        (text, f'the relation "{line}" moved from {moved} to {other}; {why}', "swapped")
                    )
    rng.shuffle(made)
    return made


def build_pool(
    scenes: Sequence[Scene], ckg: Mapping[str, Any], *, false: int, true: int, seed: int, iteration: int
) -> tuple[list[PlantedFact], list[PlantedFact], str]:
    """Up to ``false`` false (half swapped where possible) and ``true`` true facts, and why fewer ("" if none)."""
    if false <= 0 and true <= 0:
        return [], [], ""
    rng = random.Random(f"planted-facts:{seed}")
    story = "\n".join(scene["text"] for scene in scenes)
    nodes = sorted(ckg.get("nodes") or [], key=lambda n: (-int(n.get("mentions", 0)), str(n.get("id"))))
    names = {str(n["id"]): [str(n["id"]), *map(str, n.get("aliases") or [])] for n in nodes[:MAX_CHARACTERS]}
    if not names:  # capitalised words used at least twice inside sentences
        counts = Counter(re.findall(r"(?<=[a-z,;] )[A-Z][a-z]{2,}\b", story))
        names = {word: [word] for word, n in counts.most_common(MAX_CHARACTERS) if n >= 2}
    lines = _story_sentences(scenes, [form for forms in names.values() for form in forms], rng)
    # character -> the scenes naming them; a scene's parts ("S003.2") count as the whole scene
    presence = {
        character: {
            s["id"].split(".")[0] for s in scenes if any(occurs_in(name, s["text"]) for name in forms)
        }
        for character, forms in names.items()
    }
    hard = _swapped(ckg, presence, rng)[: false // 2]
    easy = _invented(ckg, story, lines, names, rng)[: false - len(hard)]
    mixed = easy + hard
    rng.shuffle(mixed)
    made_false = [
        PlantedFact(id=f"i{iteration}-p{n}", text=text, kind=kind, expected="unsupported", built=built)  # type: ignore[typeddict-item]
        for n, (text, built, kind) in enumerate(mixed)
    ]
    verbatim = [(text, f"sentence of scene {scene_id}, verbatim") for scene_id, text in lines[:true]]
    made_true = [
        PlantedFact(id=f"i{iteration}-t{n}", text=text, kind="verbatim", expected="supported", built=built)
        for n, (text, built) in enumerate(verbatim)
    ]
    why: list[str] = []
    if len(made_false) < false:
        why.append(
            f"{len(_relations(ckg))} relation(s) between characters in the graph and {len(lines)} plain story "
            f"sentence(s) naming a character to give an invented name, and {len(hard)} relation(s) movable to a "
            "character who never meets its partner"
        )
    if len(made_true) < true:
        why.append(
            f"{len(lines)} plain story sentence(s) of 6 to 30 words naming a character to plant as true"
        )
    return made_false, made_true, "; ".join(why)


def _tally(verdicts: Sequence[PlantedVerdict], kinds: tuple[str, ...]) -> PlantedTally:
    mine = [v for v in verdicts if v["planted"]["kind"] in kinds]
    return PlantedTally(
        planted=len(mine),
        judged=sum(v["status"] != "unjudged" for v in mine),
        accepted=sum(v["status"] == "supported" for v in mine),
    )


def _rate(tally: PlantedTally) -> float | None:
    return round(tally["accepted"] / tally["judged"], 6) if tally["judged"] else None


GOOD_JUDGE = 0.10  # a judge accepting this share of false facts is flagged in at most LEVEL of runs
BAD_JUDGE = 0.40  # a judge accepting this share passes in at most LEVEL of runs
LEVEL = 0.05
# group-sequential looks (judged, failed from this many accepted, passed up to this many), by exact binomial sums
LOOKS = ((8, 4, 0), (16, 5, 1), (24, 6, 5))
MAX_FALSE = LOOKS[-1][0]
TRUE_SHARE = 0.5  # true facts planted per false one (the corrected NFS needs the true acceptance)


@functools.lru_cache(maxsize=64)
def rule(max_false: int = MAX_FALSE) -> tuple[tuple[int, int, int], ...]:
    """The looks for ``max_false`` false facts, the last also deciding by exact binomial tests at ``LEVEL``."""
    from scipy.stats import binom

    if max_false <= 0:
        return ()
    n = min(max_false, MAX_FALSE)
    earlier = tuple(look for look in LOOKS if look[0] < n)
    spent_fail = _outcomes(earlier, GOOD_JUDGE)[0]
    spent_pass = _outcomes(earlier, BAD_JUDGE)[1]
    fail_exact = next(
        (x for x in range(n + 1) if binom.sf(x - 1, n, GOOD_JUDGE) <= LEVEL - spent_fail), n + 1
    )
    pass_exact = max(
        (x for x in range(n + 1) if binom.cdf(x, n, BAD_JUDGE) <= LEVEL - spent_pass), default=-1
    )
    design = {look: (fail, keep) for look, fail, keep in LOOKS}
    fail, keep = design.get(n, (n + 1, -1))
    return (*earlier, (n, min(fail, fail_exact), max(keep, pass_exact)))


def _outcomes(looks: Sequence[tuple[int, int, int]], p: float) -> tuple[float, float, float]:
    """(chance failed, chance passed, expected false facts judged) of ``looks`` for a judge accepting ``p``."""
    import numpy as np
    from scipy.stats import binom

    dist = np.zeros((looks[-1][0] if looks else 0) + 1)
    dist[0] = 1.0
    counts = np.arange(dist.size)
    failed = passed = items = 0.0
    before = 0
    for n, fail, keep in looks:
        step = n - before
        dist = np.convolve(dist, binom.pmf(np.arange(step + 1), step, p))[: dist.size]
        items += float(dist.sum()) * step
        failed += float(dist[counts >= fail].sum())
        passed += float(dist[counts <= keep].sum())
        dist[(counts >= fail) | (counts <= keep)] = 0.0
        before = n
    return failed, passed, items


def decide(outcomes: Sequence[bool], max_false: int = MAX_FALSE, *, final: bool = False) -> str | None:
    """The decision ("failed", "passed", "undecided") from false facts' verdicts (True: accepted); None: plant more."""
    for n, fail, keep in rule(min(len(outcomes), max_false) if final else max_false):
        accepted = sum(outcomes[:n])
        if n > len(outcomes):  # the look is ahead; what it will say may already be certain
            certain = accepted >= fail or accepted + n - len(outcomes) <= keep
            return ("failed" if accepted >= fail else "passed") if certain else None
        if accepted >= fail:
            return "failed"
        if accepted <= keep:
            return "passed"
    return "undecided"


@functools.lru_cache(maxsize=64)
def error_rates(max_false: int = MAX_FALSE) -> dict[str, float]:
    """Exact chances of the rule's outcomes, and the false facts each judge needs on average."""
    out: dict[str, float] = {}
    for name, p in (("good", GOOD_JUDGE), ("bad", BAD_JUDGE)):
        failed, passed, items = _outcomes(rule(max_false), p)
        out[f"{name}_flagged"] = round(1.0 - passed, 6)  # failed or undecided: the score does not count
        out[f"{name}_failed"] = round(failed, 6)
        out[f"{name}_passed"] = round(passed, 6)
        out[f"{name}_expected_items"] = round(items, 3)
    return out


def rule_record(max_false: int = MAX_FALSE) -> dict[str, Any]:
    """The rule a check used, as result.json records it."""
    rates = error_rates(max_false)
    return {
        "name": "group-sequential binomial test",
        "looks": [
            {"judged": n, "failed_from": fail, "passed_up_to": keep} for n, fail, keep in rule(max_false)
        ],
        "good_judge": GOOD_JUDGE,
        "bad_judge": BAD_JUDGE,
        "chance_good_judge_flagged": rates["good_flagged"],
        "chance_bad_judge_passed": rates["bad_passed"],
        "text": (
            f"planted false facts judged in batches up to {min(max_false, MAX_FALSE)}, stopping once the decision "
            f"is clear; a judge accepting {GOOD_JUDGE:.0%} of false facts is flagged in "
            f"{rates['good_flagged']:.1%} of runs, one accepting {BAD_JUDGE:.0%} passes in "
            f"{rates['bad_passed']:.1%}"
        ),
    }


def proportion_ci(accepted: int, judged: int) -> list[float] | None:
    """Clopper–Pearson 95% interval of an acceptance rate (None when nothing was judged)."""
    if judged <= 0:
        return None
    from scipy.stats import binomtest

    ci = binomtest(accepted, judged).proportion_ci(confidence_level=1 - LEVEL, method="exact")
    return [round(float(ci.low), 6), round(float(ci.high), 6)]


def false_outcomes(verdicts: Sequence[PlantedVerdict]) -> list[bool]:
    """Judged planted false facts in planting order: True where the judge accepted one."""
    return [
        v["status"] == "supported"
        for v in verdicts
        if v["planted"]["expected"] == "unsupported" and v["status"] != "unjudged"
    ]


def judge_check(
    verdicts: Sequence[PlantedVerdict],
    decision: str,
    *,
    max_false: int = MAX_FALSE,
    built: int | None = None,
    why: str = "",
    usage: Mapping[str, Any] | None = None,
) -> JudgeCheck:
    """The judge's record on one round's planted facts (unreadable verdicts counted, not rated)."""
    easy, hard, true = (_tally(verdicts, (kind,)) for kind in ("invented", "swapped", "verbatim"))
    usage = usage or {}
    false = _tally(verdicts, ("invented", "swapped"))
    record = (
        f"the judge accepted {false['accepted']} of {false['judged']} planted false facts (invented names "
        f"{easy['accepted']}/{easy['judged']}, swapped roles {hard['accepted']}/{hard['judged']}) and "
        f"{true['accepted']} of {true['judged']} planted true ones"
    )
    note = f"{record}: {decision}"
    if decision == "undecided":
        limit = (
            f"only {built} false facts could be built from this story ({why})"
            if built is not None and built < max_false
            else f"only {false['judged']} of {false['planted']} planted false facts got a readable verdict"
            if false["judged"] < false["planted"]
            else f"at most {max_false} false facts may be planted (planted_facts)"
        )
        note = f"judge not checked: {limit}; {record}, which decides neither way"
    return JudgeCheck(
        planted=len(verdicts),
        easy=easy,
        hard=hard,
        true=true,
        false_acceptance=_rate(false),
        true_acceptance=_rate(true),
        false_acceptance_ci95=proportion_ci(false["accepted"], false["judged"]),
        true_acceptance_ci95=proportion_ci(true["accepted"], true["judged"]),
        decision=decision,  # type: ignore[typeddict-item]
        rule=rule_record(max_false),
        passed=decision == "passed",
        note=note,
        calls=int(usage.get("calls", 0)),
        cache_hits=int(usage.get("cache_hits", 0)),
        input_tokens=int(usage.get("input_tokens", 0)),
        output_tokens=int(usage.get("output_tokens", 0)),
        verdicts=list(verdicts),
    )


def plant_sentences(
    summary_sentences: Sequence[str], *, count: int, seed: int, summary_id: str
) -> list[dict[str, Any]]:
    """Sentences about a character the summary never introduced, each inserted in its own copy of the summary."""
    if count <= 0 or not summary_sentences:
        return []
    rng = random.Random(f"planted-sentences:{seed}:{summary_id}")
    text = " ".join(summary_sentences)
    taken: set[str] = set()
    templates = list(CONFUSING)
    rng.shuffle(templates)
    planted: list[dict[str, Any]] = []
    for n in range(count):
        name = invented_name(text, rng, taken)
        if not name:
            break
        sentence = templates[n % len(templates)].format(name=name)
        position = rng.randint(1, len(summary_sentences))
        summary = " ".join([*summary_sentences[:position], sentence, *summary_sentences[position:]])
        built = f'about "{name}", whom the summary never introduces (no word of the name occurs in it)'
        planted.append({"position": position, "sentence": sentence, "summary": summary, "built": built})
    return planted


def annotator_check(
    planted: Sequence[Mapping[str, Any]],
    annotations: Sequence[Mapping[str, Any]],
    max_false_acceptance: float,
) -> dict[str, Any]:
    """The coherence annotator's record on one summary's planted sentences; unreadable ones are counted."""
    by_sentence = {str(a.get("sentence")): a for a in annotations}
    judged = flagged = 0
    rows: list[dict[str, Any]] = []
    for item in planted:
        answer = by_sentence.get(str(item["sentence"])) or {}
        confused = answer.get("confused")
        judged += confused is not None
        flagged += confused is True
        row = {key: item[key] for key in ("position", "sentence", "built")} | {"confused": confused}
        rows.append(row | {key: list(answer.get(key) or []) for key in ("types", "questions")})
    missed = (judged - flagged) / judged if judged else None
    passed = missed is None or missed <= max_false_acceptance + _EPSILON
    note = (
        f"the annotator flagged {flagged} of {judged} planted confusing sentences"
        if judged
        else f"the annotator was not checked: {len(planted)} planted sentence(s), none readable"
    )
    return {
        "planted": len(planted),
        "judged": judged,
        "flagged": flagged,
        "missed_share": None if missed is None else round(missed, 6),
        "max_false_acceptance": max_false_acceptance,
        "passed": passed,
        "note": note,
        "sentences": rows,
    }
