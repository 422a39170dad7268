"""The CKG: alias merging, the over-merge guard, edge selection and its threshold, linearization, lookup."""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from storyjudge.core.charactergraph import (
    aliases,
    build_ckg,
    build_name_graph,
    characters_in,
    edge_line,
    min_count,
    stats,
    subgraph_lines,
    to_json,
)
from storyjudge.core.records import Scene


def lines(ckg: dict[str, Any]) -> list[str]:
    """The CKG's edges as lines (``Macbeth -[murders]-> Duncan``)."""
    return [edge_line(edge) for edge in ckg["edges"]]


SCENES: list[Scene] = [
    {
        "id": "S1",
        "index": 0,
        "title": "",
        "start": 0,
        "end": 0,
        "text": "MACBETH, the Thane of Cawdor, greets LADY MACBETH. Banquo watches. Macbeth's dagger. "
        "Frodo and Frodo Baggins. King Duncan sleeps; Duncan is old.",
    },
    {
        "id": "S2",
        "index": 1,
        "title": "",
        "start": 0,
        "end": 0,
        "text": "Macbeth murders Duncan. Banquo is dead. Lady Macbeth sleepwalks.",
    },
]


def ext(
    scene: str, sample: int, characters: list[Any], triples: list[Any], ok: bool = True
) -> dict[str, Any]:
    chars = [
        {"name": c, "aliases": []} if isinstance(c, str) else {"name": c[0], "aliases": c[1]}
        for c in characters
    ]
    trips = [{"subject": s, "predicate": p, "object": o} for s, p, o in triples]
    return {"scene_id": scene, "sample": sample, "ok": ok, "characters": chars, "triples": trips}


def graph(extractions: list[dict[str, Any]], samples: int = 3, threshold: float = 0.5) -> dict[str, Any]:
    return to_json(build_ckg(extractions, SCENES, samples=samples, threshold=threshold))


def test_aliases_from_the_extractor_merge_variants_into_one_character() -> None:
    data = graph([ext("S1", 0, [("Macbeth", ["Thane of Cawdor"]), "Banquo"], [])])
    assert aliases(data)["Macbeth"] == ["Thane of Cawdor"]
    assert stats(data)["characters"] == 2


def test_a_given_name_joins_the_one_fuller_name_it_starts() -> None:
    data = graph([ext("S1", 0, ["Frodo", "Frodo Baggins", "Frodo"], [])])
    assert aliases(data) == {"Frodo": ["Frodo Baggins"]}


def test_a_given_name_shared_by_two_fuller_names_stays_apart() -> None:
    scenes = [{**SCENES[0], "text": "Frodo met Frodo Baggins and Frodo Gamgee."}]
    graph_ = build_ckg(
        [ext("S1", 0, ["Frodo", "Frodo Baggins", "Frodo Gamgee"], [])], scenes, samples=1, threshold=0
    )
    assert len(to_json(graph_)["nodes"]) == 3


def test_a_title_never_merges_lady_macbeth_into_macbeth() -> None:
    data = graph([ext("S1", 0, ["Macbeth", "Lady Macbeth", "King Duncan", "Duncan"], [])])
    assert set(aliases(data)) == {"Macbeth", "Lady Macbeth", "King Duncan", "Duncan"}


def test_case_articles_and_possessives_are_one_variant_shown_in_its_usual_form() -> None:
    data = graph([ext("S1", 0, ["MACBETH", "Macbeth's", "the Macbeth", "Macbeth"], [])])
    assert aliases(data) == {"Macbeth": []}


def test_over_merge_guard_splits_two_people_joined_by_a_bad_alias() -> None:
    bad = ext("S1", 0, [("Macbeth", ["Duncan", "Thane of Cawdor"])], [])
    murder = [ext("S2", i, ["Macbeth", "Duncan"], [("Macbeth", "murders", "Duncan")]) for i in range(3)]
    names = build_name_graph([bad, *murder], {s["id"]: s["text"] for s in SCENES})
    assert names.resolve("Duncan") != names.resolve("Macbeth")
    assert names.resolve("Thane of Cawdor") == names.resolve("Macbeth")  # the good alias survives
    assert names.guard_cuts >= 1
    data = graph([bad, *murder])
    assert "Macbeth -[murders]-> Duncan" in lines(data)
    assert data["graph"]["guard_cuts"] >= 1


def test_without_a_conflict_the_alias_is_trusted() -> None:
    data = graph([ext("S1", 0, [("Macbeth", ["Thane of Cawdor"])], [])])
    assert stats(data)["characters"] == 1


def test_identity_predicates_are_aliases_not_edges() -> None:
    data = graph(
        [
            ext("S1", i, ["Macbeth", "Thane of Cawdor"], [("Macbeth", "is also called", "Thane of Cawdor")])
            for i in range(3)
        ]
    )
    assert aliases(data) == {"Macbeth": ["Thane of Cawdor"]}
    assert lines(data) == []


def test_names_missing_from_the_scene_and_pronouns_are_dropped() -> None:
    data = graph(
        [
            ext(
                "S2", i, ["Macbeth", "John", "he"], [("John", "helps", "Macbeth"), ("he", "kills", "Macbeth")]
            )
            for i in range(3)
        ]
    )
    assert list(aliases(data)) == ["Macbeth"]
    assert stats(data)["edges"] == 0


def test_single_letters_and_schema_words_are_not_names() -> None:
    scenes = [{**SCENES[0], "text": "A Name for the Characters: Banquo."}]
    data = to_json(
        build_ckg([ext("S1", 0, ["A", "Name", "Characters", "Banquo"], [])], scenes, samples=1, threshold=0)
    )
    assert list(aliases(data)) == ["Banquo"]


def test_a_triple_without_object_is_a_self_loop_state() -> None:
    data = graph([ext("S2", i, ["Banquo"], [("Banquo", "state: dead", None)]) for i in range(2)])
    assert lines(data) == ["Banquo -[state: dead]"]
    assert stats(data)["self_loops"] == 1


def test_objects_that_are_not_characters_are_not_edges() -> None:
    data = graph([ext("S1", i, ["Macbeth"], [("Macbeth", "holds", "dagger")]) for i in range(3)])
    assert lines(data) == []


def test_edges_keep_frequent_predicates_with_their_scenes_and_counts() -> None:
    extractions = [
        ext(
            "S2",
            0,
            ["Macbeth", "Duncan"],
            [("Macbeth", "murders", "Duncan"), ("Macbeth", "serves", "Duncan")],
        ),
        ext("S2", 1, ["Macbeth", "Duncan"], [("Macbeth", "Murders", "Duncan")]),
        ext("S2", 2, ["Macbeth", "Duncan"], [("Macbeth", "murders.", "Duncan")]),
        ext("S1", 0, ["Macbeth", "Duncan"], [("Macbeth", "murders", "Duncan")]),
        ext("S1", 1, [], [], ok=False),
    ]
    data = graph(extractions, samples=3, threshold=0.5)
    edges = data["edges"]
    assert [(e["source"], e["predicate"], e["target"], e["count"], e["scenes"]) for e in edges] == [
        ("Macbeth", "murders", "Duncan", 4, ["S1", "S2"])
    ]
    assert data["graph"]["min_count"] == 2 and data["graph"]["failed_extractions"] == 1
    assert len(graph(extractions, samples=3, threshold=0.0)["edges"]) == 2  # "serves" once is enough at 0


def test_a_repeated_sample_counts_once() -> None:
    one = ext("S2", 0, ["Macbeth", "Duncan"], [("Macbeth", "murders", "Duncan")])
    data = graph([one, one, one], samples=3, threshold=0.5)
    assert data["edges"] == []


def test_min_count() -> None:
    assert [min_count(3, t) for t in (0.0, 0.2, 1 / 3, 0.5, 0.9, 1.0)] == [1, 1, 1, 2, 3, 3]


def test_min_count_as_a_frequency_overrides_the_share_of_samples() -> None:
    assert [min_count(samples, 0.5, 2) for samples in (1, 3, 5)] == [2, 2, 2]
    assert min_count(1, 1.0) == min_count(1, 0.01) == 1  # a share of one sample selects nothing


def test_frequency_threshold_counts_samples_and_scenes_with_one_sample() -> None:
    # one sample per scene: "murders" is stated in two scenes, "serves" in one
    extractions = [
        ext(
            "S1",
            0,
            ["Macbeth", "Duncan"],
            [("Macbeth", "murders", "Duncan"), ("Macbeth", "serves", "Duncan")],
        ),
        ext("S2", 0, ["Macbeth", "Duncan"], [("Macbeth", "murders", "Duncan")]),
    ]
    share = to_json(build_ckg(extractions, SCENES, samples=1, threshold=1.0))
    assert sorted(e["predicate"] for e in share["edges"]) == ["murders", "serves"]  # the share keeps all
    counted = to_json(build_ckg(extractions, SCENES, samples=1, threshold=1.0, min_support=2))
    assert [(e["predicate"], e["count"]) for e in counted["edges"]] == [("murders", 2)]
    assert counted["graph"]["min_count"] == 2
    assert counted["graph"]["threshold_rule"] == "count over samples and scenes"
    assert share["graph"]["threshold_rule"] == "threshold x samples"


def test_frequency_threshold_with_three_samples_counts_across_scenes() -> None:
    # three samples: "murders" twice in S2, "serves" once in S1 and once in S2, "fears" once
    extractions = [
        ext(
            "S2",
            0,
            ["Macbeth", "Duncan"],
            [("Macbeth", "murders", "Duncan"), ("Macbeth", "serves", "Duncan")],
        ),
        ext("S2", 1, ["Macbeth", "Duncan"], [("Macbeth", "murders", "Duncan")]),
        ext("S2", 2, ["Macbeth", "Duncan"], [("Macbeth", "fears", "Duncan")]),
        ext("S1", 0, ["Macbeth", "Duncan"], [("Macbeth", "serves", "Duncan")]),
    ]
    kept = to_json(build_ckg(extractions, SCENES, samples=3, threshold=0.0, min_support=2))
    assert sorted((e["predicate"], e["count"]) for e in kept["edges"]) == [("murders", 2), ("serves", 2)]
    strict = to_json(build_ckg(extractions, SCENES, samples=3, threshold=0.0, min_support=3))
    assert strict["edges"] == []


names_pool = st.sampled_from(
    ["Macbeth", "Duncan", "Banquo", "Lady Macbeth", "Thane of Cawdor", "dagger", None]
)
triples_strategy = st.lists(
    st.tuples(
        names_pool.filter(lambda n: n is not None), st.sampled_from(["kills", "loves", "dead"]), names_pool
    ),
    max_size=6,
)
extraction_strategy = st.lists(
    st.tuples(st.sampled_from(["S1", "S2"]), st.integers(0, 2), triples_strategy), min_size=1, max_size=8
)


@settings(max_examples=60, deadline=None)
@given(extraction_strategy)
def test_a_higher_threshold_gives_a_subgraph(raw: list[tuple[str, int, list[Any]]]) -> None:
    extractions = [
        ext(
            scene,
            sample,
            ["Macbeth", "Duncan", "Banquo", ("Lady Macbeth", []), ("Macbeth", ["Thane of Cawdor"])],
            t,
        )
        for scene, sample, t in raw
    ]
    previous: set[tuple[str, str, str]] | None = None
    for threshold in (0.0, 0.2, 0.34, 0.5, 0.67, 0.9, 1.0):
        data = graph(extractions, samples=3, threshold=threshold)
        edges = {(e["source"], e["predicate"], e["target"]) for e in data["edges"]}
        if previous is not None:
            assert edges <= previous
        previous = edges


def sample_ckg() -> dict[str, Any]:
    extractions = [
        ext(
            "S2",
            i,
            [("Macbeth", ["Thane of Cawdor"]), "Duncan", "Banquo", "Lady Macbeth"],
            [
                ("Macbeth", "murders", "Duncan"),
                ("Banquo", "dead", None),
                ("Lady Macbeth", "sleepwalks", None),
            ]
            + ([("Macbeth", "fears", "Banquo")] if i < 2 else []),
        )
        for i in range(3)
    ]
    extractions.append(ext("S1", 0, [("Macbeth", ["Thane of Cawdor"])], []))
    return graph(extractions, samples=3, threshold=0.5)


def test_characters_in_finds_names_through_aliases_whole_word_any_case() -> None:
    ckg = sample_ckg()
    assert characters_in(ckg, "The THANE OF CAWDOR kills the old king Duncan.") == ["Macbeth", "Duncan"]
    assert characters_in(ckg, "Lady Macbeth walks at night.") == ["Lady Macbeth"]  # not also Macbeth
    assert characters_in(ckg, "Banquos and Duncanson are no one here.") == []


def test_characters_in_reads_the_names_of_the_graph_it_is_given_each_time() -> None:
    """The name lookup is built once per set of names: a graph whose names changed is matched by its new ones."""
    ckg = sample_ckg()
    assert characters_in(ckg, "The Tyrant falls.") == []
    renamed = copy.deepcopy(ckg)
    for node in renamed["nodes"]:
        if node["id"] == "Macbeth":
            node["aliases"] = [*node.get("aliases", []), "the Tyrant"]
    assert characters_in(renamed, "The Tyrant falls.") == ["Macbeth"]
    assert characters_in(ckg, "The Tyrant falls.") == []  # the first graph keeps its own names
    assert characters_in({"nodes": [], "edges": []}, "Macbeth falls.") == []


def test_subgraph_lines_touch_the_mentioned_characters_ordered_by_count() -> None:
    ckg = sample_ckg()
    assert subgraph_lines(ckg, "The Thane of Cawdor grows afraid.") == [
        "Macbeth -[murders]-> Duncan",
        "Macbeth -[fears]-> Banquo",
    ]
    assert subgraph_lines(ckg, "Banquo dies.") == ["Banquo -[state: dead]", "Macbeth -[fears]-> Banquo"]
    assert subgraph_lines(ckg, "Banquo dies.", limit=1) == ["Banquo -[state: dead]"]
    assert subgraph_lines(ckg, "Nobody we know.") == []
