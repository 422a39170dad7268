"""The answer schemas of the prompts: what each structured LLM call must return.

The rationale comes before the verdict, so a model reasons before it commits; content fields are required, so
a fragment or a wrong key is no answer, never one filled in with defaults.
"""

from __future__ import annotations

from pydantic import BaseModel, Field


class CharacterMention(BaseModel):
    """A character as a scene names it."""

    name: str = Field(description="The character's fullest name used in the scene.")
    aliases: list[str] = Field(
        default_factory=list,
        description="Other names, titles or nicknames the scene uses for this character.",
    )


class Triple(BaseModel):
    """A relation or state: subject -[predicate]-> object, or a state when object is null."""

    subject: str = Field(description="Character name.")
    predicate: str = Field(description="Short verb phrase, e.g. 'murders', 'is married to', 'state: dead'.")
    object: str | None = Field(
        default=None, description="Character name, or null for a state of the subject."
    )


class SceneTriples(BaseModel):
    """Extractor answer for one scene (both lists required: an answer without them was not given)."""

    characters: list[CharacterMention]
    triples: list[Triple]


class AtomicFacts(BaseModel):
    """Decomposer answer for one summary sentence (``facts`` required; an empty list is an answer)."""

    facts: list[str] = Field(
        description="Self-contained atomic claims; names instead of pronouns; one claim each."
    )


class Verdict(BaseModel):
    """Judge answer for one atomic fact; the rationale comes first."""

    rationale: str = Field(description="Reasoning over the evidence, written before deciding.")
    supported: bool = Field(description="True only if the evidence supports the fact.")
    feedback: str = Field(default="", description="If unsupported: what is wrong and how to correct it.")
    evidence: list[str] = Field(default_factory=list, description="Ids of the scenes or CKG lines used.")


class SentenceConfusion(BaseModel):
    """Batched coherence answer for one sentence (not the paper's setting); ``index`` is required."""

    index: int
    questions: list[str] = Field(default_factory=list)
    types: list[str] = Field(default_factory=list)


class BatchedConfusions(BaseModel):
    """Batched coherence answer: confusions for the sentences that have any (``sentences`` required)."""

    sentences: list[SentenceConfusion]
