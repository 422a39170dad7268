"""Control items planted among the judged ones, so that every score carries its judge's own record.

Coverage says how many verdicts could be read, not whether they were worth reading: a judge that calls every
fact supported gives every summary 1.0 with full coverage. So each scored round plants a few facts whose right
verdict is known by construction, built from the story without a model, and the judge sees them as it sees the
summary's own (same prompt, same evidence path, asked among them):

- invented (easy, false): a relation of the character graph given to a name that occurs nowhere in the story;
- swapped (hard, false): a relation moved to a character whom no scene names together with the relation's
  other character, so nothing in the story can state it;
- verbatim (true): a sentence of the story as it stands.

A relation moved to a character who does share a scene with its partner is only probably false, so it is never
planted. The planted verdicts never enter the score; the share of planted false facts the judge accepted decides
whether the score counts (``max_false_acceptance``), as coverage does. BooookScore gets the same check: sentences
about a character the summary never introduced, which must confuse a reader, each asked about inside the summary.
The construction is seeded by the run's seed alone, so every round of a run plants the same items.
"""

from __future__ import annotations

import random
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from storyjudge.core.charactergraph import edge_line, occurs_in
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
"""Sentences that must confuse a reader of any summary that never introduced their character or objects."""
MAX_CHARACTERS = 30  # the most mentioned characters considered (their presence is looked up scene by scene)
MAX_SCENES_READ = 12  # scenes split into sentences for verbatim facts (a novel's are not all read)
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


def _characters(ckg: Mapping[str, Any]) -> dict[str, list[str]]:
    """The most mentioned characters: canonical name -> every name the story uses for them."""
    nodes = sorted(ckg.get("nodes") or [], key=lambda n: (-int(n.get("mentions", 0)), str(n.get("id"))))
    return {
        str(node["id"]): [str(node["id"]), *(str(a) for a in node.get("aliases") or [])]
        for node in nodes[:MAX_CHARACTERS]
    }


def _proper_nouns(story: str) -> dict[str, list[str]]:
    """Capitalised words used at least twice inside sentences: the names to use when the graph has no character.

    A sentence with one of them replaced by an invented name is still unsupported by construction, whether the
    word named a person or a place.
    """
    counts = Counter(re.findall(r"(?<=[a-z,;] )[A-Z][a-z]{2,}\b", story))
    return {word: [word] for word, n in counts.most_common(MAX_CHARACTERS) if n >= 2}


def _presence(names: Mapping[str, list[str]], scenes: Sequence[Scene]) -> dict[str, set[str]]:
    """Character -> the scenes whose text names them (any of their names, whole words).

    The parts of a scene split to fit a window ("S003.2") count as their whole scene: a relation can be told
    across them.
    """
    return {
        character: {
            s["id"].split(".")[0] for s in scenes if any(occurs_in(name, s["text"]) for name in forms)
        }
        for character, forms in names.items()
    }


def _relations(ckg: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """Edges between two different characters, most supported first."""
    edges = [e for e in ckg.get("edges", ckg.get("links", [])) or [] if e.get("source") != e.get("target")]
    return sorted(edges, key=lambda e: (-int(e.get("count", 0)), edge_line(e)))


def _relation_text(subject: str, predicate: str, obj: str) -> str:
    return f"{subject} {predicate} {obj}."


def _story_sentences(
    scenes: Sequence[Scene], names: Iterable[str], rng: random.Random
) -> list[tuple[str, str]]:
    """(scene id, sentence) of plain declarative story sentences of 6 to 30 words naming a character."""
    forms = list(names)
    order = list(scenes)
    rng.shuffle(order)
    found: list[tuple[str, str]] = []
    for scene in order[:MAX_SCENES_READ]:
        for raw in sentences(_MARKUP.sub(" ", scene["text"])):
            text = " ".join(raw.split())
            if not 6 <= len(text.split()) <= 30 or not text.endswith(".") or re.search(r"[\"“”?!]", text):
                continue
            if forms and not any(occurs_in(name, text) for name in forms):
                continue
            found.append((scene["id"], text))
    return found


def _invented(
    ckg: Mapping[str, Any],
    story: str,
    lines: list[tuple[str, str]],
    names: Mapping[str, list[str]],
    rng: random.Random,
) -> list[tuple[str, str]]:
    """(text, how it was built) of easy false facts: relations first, then story sentences, with a new name."""
    taken: set[str] = set()
    made: list[tuple[str, str]] = []
    for edge in _relations(ckg):
        name = invented_name(story, rng, taken)
        if not name:
            break
        line = edge_line(edge)
        made.append(
            (
                _relation_text(name, str(edge.get("predicate") or edge.get("key")), str(edge["target"])),
                f'the relation "{line}" given to "{name}" instead of {edge["source"]}; no word of that name '
                "occurs in the story",
            )
        )
    for scene_id, text in lines:
        character = next((c for c, forms in names.items() if any(occurs_in(n, text) for n in forms)), None)
        if character is None:
            continue
        name = invented_name(story, rng, taken)
        form = next(n for n in names[character] if occurs_in(n, text))
        if not name:
            break
        swapped = re.sub(r"(?<!\w)" + re.escape(form) + r"(?!\w)", name, text, flags=re.IGNORECASE)
        made.append(
            (
                swapped,
                f'a sentence of scene {scene_id} with "{form}" replaced by "{name}"; no word of that name '
                "occurs in the story",
            )
        )
    rng.shuffle(made)
    return made


def _swapped(
    ckg: Mapping[str, Any], presence: Mapping[str, set[str]], rng: random.Random
) -> list[tuple[str, str]]:
    """(text, how it was built) of hard false facts: a relation moved to a character who never meets its partner."""
    made: list[tuple[str, str]] = []
    for edge in _relations(ckg):
        source, target = str(edge["source"]), str(edge["target"])
        predicate = str(edge.get("predicate") or edge.get("key"))
        line = edge_line(edge)
        for other in sorted(presence):
            if other in (source, target) or not presence[other]:
                continue
            for kept, moved, text in (
                (target, source, _relation_text(other, predicate, target)),
                (source, target, _relation_text(source, predicate, other)),
            ):
                if presence.get(kept) and presence[other].isdisjoint(presence[kept]):
                    made.append(
                        (
                            text,
                            f'the relation "{line}" moved from {moved} to {other}; no scene names both {other} '
                            f"and {kept}, so the story cannot state it",
                        )
                    )
    rng.shuffle(made)
    return made


def plant_facts(
    scenes: Sequence[Scene], ckg: Mapping[str, Any], *, count: int, seed: int, iteration: int
) -> list[PlantedFact]:
    """``count`` control facts for one round: a third true (rounded down), the rest false, half of those hard.

    Fewer when the story does not allow them (no character who never meets another: no hard ones, which easy
    ones replace); each records how it was built. The same seed gives the same facts in every round.
    """
    if count <= 0:
        return []
    rng = random.Random(f"planted-facts:{seed}")
    story = "\n".join(scene["text"] for scene in scenes)
    names = _characters(ckg) or _proper_nouns(story)
    lines = _story_sentences(scenes, [form for forms in names.values() for form in forms], rng)
    n_true = count // 3
    n_false = count - n_true
    hard = _swapped(ckg, _presence(names, scenes), rng)[: n_false // 2]
    easy = _invented(ckg, story, lines, names, rng)[: n_false - len(hard)]
    true = [(text, f"sentence of scene {scene_id}, verbatim") for scene_id, text in lines[:n_true]]
    chosen: list[tuple[str, str, str, str]] = [
        *((text, built, "invented", "unsupported") for text, built in easy),
        *((text, built, "swapped", "unsupported") for text, built in hard),
        *((text, built, "verbatim", "supported") for text, built in true),
    ]
    rng.shuffle(chosen)
    return [
        PlantedFact(id=f"i{iteration}-p{n}", text=text, kind=kind, expected=expected, built=built)  # type: ignore[typeddict-item]
        for n, (text, built, kind, expected) in enumerate(chosen)
    ]


def _tally(verdicts: Sequence[PlantedVerdict], kinds: tuple[str, ...]) -> PlantedTally:
    mine = [v for v in verdicts if v["planted"]["kind"] in kinds]
    return PlantedTally(
        planted=len(mine),
        judged=sum(v["status"] != "unjudged" for v in mine),
        accepted=sum(v["status"] == "supported" for v in mine),
    )


def _rate(tally: PlantedTally) -> float | None:
    return tally["accepted"] / tally["judged"] if tally["judged"] else None


def judge_check(
    verdicts: Sequence[PlantedVerdict], max_false_acceptance: float, usage: Mapping[str, Any] | None = None
) -> JudgeCheck:
    """The judge's record on one round's planted facts, and whether its score may count.

    Unreadable verdicts are counted (planted minus judged) and left out of the rates; a round where no planted
    false fact was built or judged is not checked, which the note says, and does not fail.
    """
    easy, hard, true = (
        _tally(verdicts, ("invented",)),
        _tally(verdicts, ("swapped",)),
        _tally(verdicts, ("verbatim",)),
    )
    false = PlantedTally(
        planted=easy["planted"] + hard["planted"],
        judged=easy["judged"] + hard["judged"],
        accepted=easy["accepted"] + hard["accepted"],
    )
    rate = _rate(false)
    passed = rate is None or rate <= max_false_acceptance + _EPSILON
    if false["judged"]:
        note = (
            f"the judge accepted {false['accepted']} of {false['judged']} planted false facts (invented names "
            f"{easy['accepted']}/{easy['judged']}, swapped roles {hard['accepted']}/{hard['judged']}) and "
            f"{true['accepted']} of {true['judged']} planted true ones"
        )
    else:
        note = f"the judge was not checked: {false['planted']} planted false fact(s), none judged"
    return JudgeCheck(
        planted=len(verdicts),
        easy=easy,
        hard=hard,
        true=true,
        false_acceptance=None if rate is None else round(rate, 6),
        true_acceptance=None if _rate(true) is None else round(_rate(true) or 0.0, 6),
        max_false_acceptance=max_false_acceptance,
        passed=passed,
        note=note,
        calls=int((usage or {}).get("calls", 0)),
        cache_hits=int((usage or {}).get("cache_hits", 0)),
        input_tokens=int((usage or {}).get("input_tokens", 0)),
        output_tokens=int((usage or {}).get("output_tokens", 0)),
        verdicts=list(verdicts),
    )


def plant_sentences(
    summary_sentences: Sequence[str], *, count: int, seed: int, summary_id: str
) -> list[dict[str, Any]]:
    """Confusing sentences to ask about, each inserted at its own place in the summary (a copy per sentence).

    Each is about an invented character the summary never introduced, with objects it never mentioned, so any
    reader of that summary must ask who this is. Returns ``{position, sentence, summary, built}`` items:
    ``summary`` is the summary with that one sentence inserted at ``position``.
    """
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
        with_it = [*summary_sentences[:position], sentence, *summary_sentences[position:]]
        planted.append(
            {
                "position": position,
                "sentence": sentence,
                "summary": " ".join(with_it),
                "built": f'about "{name}", whom the summary never introduces (no word of the name occurs in it)',
            }
        )
    return planted


def annotator_check(
    planted: Sequence[Mapping[str, Any]],
    annotations: Sequence[Mapping[str, Any]],
    max_false_acceptance: float,
) -> dict[str, Any]:
    """The coherence annotator's record on one summary's planted sentences (``records.AnnotatorCheck``).

    ``annotations`` are the planted sentences' annotations (``index`` is the planted position); an unreadable
    one is counted, not scored. A sentence marked "no confusion" is a planted confusion accepted as clear.
    """
    by_sentence = {str(a.get("sentence")): a for a in annotations}
    judged = flagged = 0
    rows: list[dict[str, Any]] = []
    for item in planted:
        answer = by_sentence.get(str(item["sentence"])) or {}
        confused = answer.get("confused")
        judged += confused is not None
        flagged += confused is True
        rows.append(
            {
                "position": item["position"],
                "sentence": item["sentence"],
                "built": item["built"],
                "confused": confused,
                "types": list(answer.get("types") or []),
                "questions": list(answer.get("questions") or []),
            }
        )
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
