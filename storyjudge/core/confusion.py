"""Reading a BooookScore annotator's answer: "Questions: ... / Types: ..." or "no confusion".

Models vary the form (bold labels, bullets, prose); this accepts those variations and nothing it cannot read:
an answer that neither names a confusion nor says "no confusion" as its answer, says both, or repeats the prompt
is *unparsed* (``confused`` None), counted and left out of the score, so a babbling model never looks coherent.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from storyjudge.core.jsonparse import strip_thinking
from storyjudge.core.narrativefactscore import plain_words
from storyjudge.core.promptcopy import copied_span, words

_TYPE_KEYWORDS: dict[str, tuple[str, ...]] = {
    "entity omission": ("entit", "character"),
    "event omission": ("event",),
    "causal omission": ("causal", "cause", "motivation"),
    "salience": ("salien", "trivial", "irrelevan"),
    "discontinuity": ("discontinu", "transition", "flow"),
    "duplication": ("duplicat", "repeti", "redundan"),
    "inconsistency": ("inconsisten", "contradict"),
    "language": ("language", "grammar", "grammatical", "wording", "phrasing"),
}
"""The eight confusion types of the paper's taxonomy, in its order (appendix M.4), each with the word stems that
identify it when a model paraphrases it ("causal", "repetition", "grammar")."""
ERROR_TYPES = tuple(_TYPE_KEYWORDS)

# A label starts a line (after markdown bullets, quotes or numbering) or follows whitespace mid-line.
_LABEL = r"(?:^[ \t>*#_\-]*(?:\d+[.)]\s*)?|(?<=\s))[*_]*\s*(?<![A-Za-z])"
_QUESTIONS_LABEL = re.compile(
    _LABEL + r"(?:clarifying\s+)?questions?(?:\s*\(s\))?\s*[*_]*\s*[:：]\s*[*_]*",
    re.IGNORECASE | re.MULTILINE,
)
_TYPES_LABEL = re.compile(
    _LABEL + r"(?:(?:confusion|error)\s+)?types?(?:\s*\(s\))?(?:\s+of\s+confusion)?\s*[*_]*\s*[:：]\s*[*_]*",
    re.IGNORECASE | re.MULTILINE,
)
_BRACKET_HEADER = re.compile(r"^\s*\[[^\]\n]{1,40}\]\s*$", re.MULTILINE)
_LEADING_NOISE = re.compile(r"^\s*(?:(?:answer|response|annotation)\s*[:：]\s*)", re.IGNORECASE)
_NO_CONFUSION_PHRASE = re.compile(
    r"\bno\s+confusion\b"
    r"|\b(?:does\s+not|doesn'?t|do\s+not|don'?t|did\s+not|will\s+not|won'?t|cannot|can'?t)\s+"
    r"(?:cause|involve|create|contain|have|raise|introduce)\s+(?:any\s+)?confusion\b"
    r"|\bnot\s+confusing\b|\bis\s+(?:clear|coherent)\s+and\s+(?:does|causes)\s+not\b",
    re.IGNORECASE,
)
# "no confusion" quoted as one of the options, as instructions put it: '<questions>, or "no confusion"'.
_OPTION_PHRASE = re.compile(
    r"""\bor\s*[*_"'`“”‘’(]*\s*no\s+confusion\b|\bsay\s*:?\s*["'`“‘]\s*no\s+confusion\b""", re.IGNORECASE
)
# '<your clarifying questions, ...>', '<the confusion types, ...>': a format line's placeholder, copied
_PLACEHOLDER = re.compile(r"<\s*(?:your|the|list|questions?|types?)\b[^<>\n]{0,200}>", re.IGNORECASE)
MOST_TYPES = 6
"""An answer naming this many of the eight types is the definition list, not an annotation."""
PROSE_WORDS = 100
"""An answer without the labels and longer than this is not a plausible annotation."""
CLEAN_PROSE_WORDS = 40
"""A prose "no confusion" counts only in an answer this short (a statement, not an essay that mentions it)."""
_SENTENCE_END = re.compile(r"(?<=[.!?;])\s+|\n+")
_EMPTY_SECTION = frozenset(
    "no confusion|none|n a|na|no|nothing|no questions|no question|no types|no type|not applicable|"
    "no confusion types|none no confusion".split("|")
)
_BULLET = re.compile(r"^\s*(?:[-*•·]|\d+[.)])\s*")
_TYPE_SEPARATORS = re.compile(r"[,;/&|\n]|\band\b|\bplus\b", re.IGNORECASE)


@dataclass(frozen=True)
class ConfusionAnswer:
    """One parsed annotation (``confused`` None: the answer could not be read, and ``error`` says why)."""

    confused: bool | None  # False: "no confusion"; None: empty, garbage or contradicting itself
    questions: list[str] = field(default_factory=list)  # the clarifying questions the model asked
    types: list[str] = field(default_factory=list)  # among the eight, in taxonomy order, without repeats
    other_types: list[str] = field(default_factory=list)  # labels outside the eight, kept for inspection
    error: str | None = None

    @property
    def parsed(self) -> bool:
        """Whether the answer could be read."""
        return self.confused is not None


def says_no_confusion(text: str) -> bool:
    """Whether a whole answer field says there is nothing to report ("no confusion", "None", "N/A")."""
    normal = plain_words(text)
    return normal in _EMPTY_SECTION or bool(
        re.fullmatch(r"(?:there is |there s )?no confusion(?: here)?", normal)
    )


def type_of(label: str) -> str | None:
    """The taxonomy type a label names ("Entity-Omission", "causal", "repetition"), or None."""
    normal = plain_words(label)
    if not normal:
        return None
    for name in ERROR_TYPES:  # the name itself, spaced or not, then a stem
        if name in normal or normal == name.replace(" ", ""):
            return name
    return next((name for name, stems in _TYPE_KEYWORDS.items() for stem in stems if stem in normal), None)


def normalise_types(labels: Iterable[str]) -> tuple[list[str], list[str]]:
    """Split free-form type labels into (taxonomy types in taxonomy order, labels outside the taxonomy)."""
    known: set[str] = set()
    other: list[str] = []
    for label in labels:
        if says_no_confusion(label):
            continue
        for piece in _TYPE_SEPARATORS.split(label):
            piece = _BULLET.sub("", piece).strip().strip("*_.'\"`").strip()
            if not piece or says_no_confusion(piece):
                continue
            found = type_of(piece)
            if found:
                known.add(found)
            elif plain_words(piece) not in (plain_words(o) for o in other):
                other.append(piece)
    return [name for name in ERROR_TYPES if name in known], other


def _split_questions(text: str) -> list[str]:
    """Questions in a section: each '?'-terminated span, else each non-empty line."""
    questions = [
        q for q in (_BULLET.sub("", q).strip() for q in re.findall(r"[^?\n]*\?", text)) if len(q) > 1
    ]
    if questions:
        return questions
    lines = [_BULLET.sub("", line).strip() for line in text.splitlines()]
    return [line for line in lines if line and not says_no_confusion(line)]


def _answer_body(text: str) -> str:
    """The first answer in the text: no thinking, no leading headers, nothing from the next header on."""
    body = strip_thinking(text).lstrip()
    while header := _BRACKET_HEADER.match(body):
        body = body[header.end() :].lstrip()
    body = _LEADING_NOISE.sub("", body)
    nxt = _BRACKET_HEADER.search(body)
    if nxt:
        body = body[: nxt.start()]
    return body.strip()


def _sections(body: str) -> tuple[str | None, str | None]:
    """The Questions and Types sections' text (None when the label is absent)."""
    questions, types = _QUESTIONS_LABEL.search(body), _TYPES_LABEL.search(body)
    return _section(body, questions, types), _section(body, types, questions)


def _section(body: str, label: re.Match[str] | None, other: re.Match[str] | None) -> str | None:
    """The text after ``label``, up to the ``other`` label when that one follows it."""
    if label is None:
        return None
    stop = other.start() if other and other.start() > label.start() else len(body)
    return body[label.end() : stop].strip()


def _named_types(text: str) -> list[str]:
    """The taxonomy types a text names in full ("entity omission", "Event-omission"), in taxonomy order."""
    return [
        name for name in ERROR_TYPES if re.search(rf"\b{name.replace(' ', '[ -]')}\b", text, re.IGNORECASE)
    ]


def _not_an_answer(body: str, prompt: Iterable[str], data: Iterable[str]) -> str | None:
    """Why a body repeats the prompt instead of answering it, or None."""
    copied = copied_span(body, prompt, data)
    if copied:
        return f"the answer copies the prompt ({copied!r}...)"
    if _OPTION_PHRASE.search(body):
        return "'no confusion' appears only as a quoted option, as in the instructions"
    if _PLACEHOLDER.search(body):
        return "the answer holds a '<...>' placeholder of the answer format"
    if len(_named_types(body)) >= MOST_TYPES:
        return f"the answer lists {len(_named_types(body))} of the 8 confusion types, as the definitions do"
    return None


def parse_confusion(text: str, *, prompt: Iterable[str] = (), data: Iterable[str] = ()) -> ConfusionAnswer:
    """Read one per-sentence answer; an answer copying the fixed ``prompt`` texts (not ``data``) is unparsed."""
    body = _answer_body(text or "")
    if not body:
        return ConfusionAnswer(None, error="empty answer")
    echo = _not_an_answer(body, prompt, data)
    if echo:
        return ConfusionAnswer(None, error=echo)
    questions_text, types_text = _sections(body)
    if questions_text is None and types_text is None:
        return _parse_unlabelled(body)
    says_clean_questions = questions_text is not None and says_no_confusion(questions_text)
    says_clean_types = types_text is not None and says_no_confusion(types_text)
    questions = [] if questions_text is None or says_clean_questions else _split_questions(questions_text)
    types, other = ([], []) if types_text is None else normalise_types([types_text])
    if (questions and says_clean_types) or ((types or other) and says_clean_questions):
        return ConfusionAnswer(
            None, questions, types, other, error="contradictory: questions or types given, and 'no confusion'"
        )
    if questions or types or other:
        return ConfusionAnswer(True, questions, types, other)
    if says_clean_questions or says_clean_types:
        return ConfusionAnswer(False)
    return ConfusionAnswer(None, error="labels present but no questions, types or 'no confusion'")


def _parse_unlabelled(body: str) -> ConfusionAnswer:
    """An answer without the labels: a short prose "no confusion", or questions with type names."""
    if len(words(body)) > PROSE_WORDS:
        return ConfusionAnswer(
            None,
            error=f"no 'Questions:'/'Types:' lines and longer than {PROSE_WORDS} words: not an annotation",
        )
    first = _SENTENCE_END.split(body.strip(), maxsplit=1)[0]
    mentions_clean = bool(_NO_CONFUSION_PHRASE.search(body))
    says_clean = bool(_NO_CONFUSION_PHRASE.search(first)) and len(words(body)) <= CLEAN_PROSE_WORDS
    questions = [q for q in (q.strip() for q in re.findall(r"[^?\n.!]*\?", body)) if len(q) > 1]
    named = _named_types(body)
    if mentions_clean and not (questions or named) and not says_clean:
        return ConfusionAnswer(None, error="'no confusion' only in passing, not as the answer")
    if mentions_clean and not (questions or named):  # said first, in a short answer
        return ConfusionAnswer(False)
    if mentions_clean:
        return ConfusionAnswer(
            None, questions, named, error="contradictory: 'no confusion' alongside questions or types"
        )
    if questions or named:
        return ConfusionAnswer(True, [_BULLET.sub("", q).strip() for q in questions], named)
    return ConfusionAnswer(None, error="no 'Questions:'/'Types:' lines and no 'no confusion'")
