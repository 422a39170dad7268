"""The BooookScore answer parser on answers as models really write them."""

from __future__ import annotations

import pytest

from prompts import load
from storyjudge.core.confusion import (
    ERROR_TYPES,
    normalise_types,
    parse_confusion,
    says_no_confusion,
    type_of,
)


@pytest.mark.parametrize(
    "answer",
    [
        "Questions: no confusion\nTypes: no confusion",
        "questions: No confusion.\ntypes: No confusion.",
        "Questions: no confusion Types: no confusion",
        "No confusion",
        "no confusion.",
        "NO CONFUSION",
        '"No confusion"',
        "There is no confusion.",
        "This sentence does not cause any confusion.",
        "The sentence doesn't cause any confusion; it follows from the previous one.",
        "Questions: None\nTypes: None",
        "Question: N/A\nType: N/A",
        "**Questions:** no confusion\n**Types:** no confusion",
        "[Your response]\nQuestions: no confusion\nTypes: no confusion",
        "<think>The sentence is clear.</think>\nQuestions: no confusion\nTypes: no confusion",
        "Response: no confusion",
    ],
)
def test_no_confusion_variants_are_clean(answer: str) -> None:
    parsed = parse_confusion(answer)
    assert parsed.confused is False, parsed
    assert parsed.questions == [] and parsed.types == []


def test_questions_and_multiple_types() -> None:
    parsed = parse_confusion(
        "Questions: How does quitting the ferry relate to teaching a girl to swim? Who is Caeli?\n"
        "Types: discontinuity, causal omission, entity omission"
    )
    assert parsed.confused is True
    assert parsed.questions == [
        "How does quitting the ferry relate to teaching a girl to swim?",
        "Who is Caeli?",
    ]
    # taxonomy order, whatever order the model used
    assert parsed.types == ["entity omission", "causal omission", "discontinuity"]


def test_markdown_bullets_and_odd_casing() -> None:
    parsed = parse_confusion(
        "**Questions:**\n- Who is John?\n- Is he Lia's husband?\n\n"
        "**Types:**\n- Entity-Omission\n- INCONSISTENCY"
    )
    assert parsed.confused is True
    assert parsed.questions == ["Who is John?", "Is he Lia's husband?"]
    assert parsed.types == ["entity omission", "inconsistency"]


def test_types_before_questions_and_paraphrased_types() -> None:
    parsed = parse_confusion(
        "Confusion types: causal; repetition & grammar\nQuestions: Why does she leave? Why say it twice?"
    )
    assert parsed.confused is True
    assert parsed.types == ["causal omission", "duplication", "language"]
    assert len(parsed.questions) == 2


def test_answer_followed_by_an_invented_next_example_is_cut() -> None:
    parsed = parse_confusion(
        "Questions: What is the Reckoning?\nTypes: event omission\n\n[Example sentence]\nShe leaves.\n"
        "[Example response]\nQuestions: Why does she leave?\nTypes: causal omission, salience"
    )
    assert parsed.confused is True
    assert parsed.questions == ["What is the Reckoning?"]
    assert parsed.types == ["event omission"]


def test_type_outside_the_taxonomy_is_kept_apart() -> None:
    parsed = parse_confusion("Questions: What does 'the hollow' mean here?\nTypes: vagueness, language")
    assert parsed.confused is True
    assert parsed.types == ["language"]
    assert parsed.other_types == ["vagueness"]


def test_question_without_question_mark_still_counts() -> None:
    parsed = parse_confusion("Questions: Who publishes the pages\nTypes: language")
    assert parsed.confused is True
    assert parsed.questions == ["Who publishes the pages"]


def test_unlabelled_question_with_type_name() -> None:
    parsed = parse_confusion("Who is Senator Drace? (entity omission)")
    assert parsed.confused is True
    assert parsed.types == ["entity omission"]
    assert parsed.questions == ["Who is Senator Drace?"]


@pytest.mark.parametrize(
    "answer",
    [
        "",
        "   \n",
        "asdf qwerty",
        "Mara finds a map in the attic. The next day, the Guild burns her house.\n</summary>",
        "The sentence introduces the main character.",
        "Questions:\nTypes:",
        "<think>let me see</think>",
    ],
)
def test_garbage_is_unparsed_not_clean(answer: str) -> None:
    parsed = parse_confusion(answer)
    assert parsed.confused is None
    assert parsed.error


@pytest.mark.parametrize(
    "answer",
    [
        "Questions: Who is X?\nTypes: no confusion",
        "Questions: no confusion\nTypes: entity omission",
        "No confusion. Who is Bob? (entity omission)",
    ],
)
def test_contradictory_answers_are_unparsed(answer: str) -> None:
    parsed = parse_confusion(answer)
    assert parsed.confused is None
    assert "contradict" in (parsed.error or "")


def test_type_of_every_canonical_name_and_spelling() -> None:
    for name in ERROR_TYPES:
        assert type_of(name) == name
        assert type_of(name.upper().replace(" ", "-")) == name
        assert type_of(name.title().replace(" ", "")) == name
    assert type_of("omission") is None
    assert type_of("") is None


def test_normalise_types_splits_and_dedups() -> None:
    known, other = normalise_types(["Salience and salience", "1. discontinuity\n2. plot hole"])
    assert known == ["salience", "discontinuity"]
    assert other == ["plot hole"]
    assert normalise_types(["no confusion"]) == ([], [])


def test_says_no_confusion() -> None:
    assert says_no_confusion("No confusion.")
    assert says_no_confusion("none")
    assert not says_no_confusion("Who is Bob?")


# --- an answer that repeats the prompt is no verdict --------------------------------------------------------

COHERENCE = load("coherence").text
DEFINITIONS = "\n".join(line for line in COHERENCE.splitlines() if line.startswith("- ") and ":" in line)
LOREM = (
    "Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor incididunt ut labore et "
    "dolore magna aliqua. "
) * 8


@pytest.mark.parametrize(
    "answer",
    [
        'Questions: <your clarifying questions, or "no confusion">\n'
        'Types: <the confusion types, separated by commas, or "no confusion">',
        "Answer with your questions and types, or no confusion.",
        'If the given sentence doesn\'t involve any confusion, simply say "no confusion".',
        "Questions: ask clarifying questions, or 'no confusion'\nTypes: the types, or no confusion",
        DEFINITIONS,
        "Types: entity omission, event omission, causal omission, salience, discontinuity, duplication",
        "This is an interesting summary. The story is told in a clear way and the reader can follow it, so "
        "there is no confusion in general, although some readers may want more detail.",
        LOREM,
        "The sentence is about a journey. " * 30,
    ],
)
def test_an_answer_echoing_instructions_or_definitions_is_unparsed(answer: str) -> None:
    parsed = parse_confusion(answer)
    assert parsed.confused is None, parsed
    assert parsed.error


@pytest.mark.parametrize(
    "start", [0, COHERENCE.find("For something to qualify"), COHERENCE.find("[Example summary 2]")]
)
def test_an_answer_copying_the_prompt_is_unparsed(start: int) -> None:
    answer = COHERENCE[start : start + 300]
    parsed = parse_confusion(answer, prompt=(COHERENCE,))
    assert parsed.confused is None and "copies the prompt" in (parsed.error or ""), parsed


@pytest.mark.parametrize(
    "answer",
    [
        "Questions: no confusion\nTypes: no confusion",
        "No confusion.",
        "This sentence does not cause any confusion.",
        "Questions: Who is Oren, and why does he help?\nTypes: entity omission",
    ],
)
def test_real_answers_still_read_when_the_prompt_is_given(answer: str) -> None:
    assert parse_confusion(answer, prompt=(COHERENCE,), data=("Mara meets Oren.",)).parsed


def test_quoting_the_data_is_no_copy_even_when_it_matches_the_prompt() -> None:
    sentence = "Meanwhile, in the capital, Senator Drace argues with his daughter about the price of grain."
    summary = COHERENCE.split("[Example summary 1]\n", 1)[1].split("\n", 1)[0]  # the example, scored as data
    answer = f'Questions: Why does "{sentence}" come here?\nTypes: discontinuity'
    parsed = parse_confusion(answer, prompt=(COHERENCE,), data=(summary, sentence))
    assert parsed.confused is True and parsed.types == ["discontinuity"]
