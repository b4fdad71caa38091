"""Installed-text corpus (READMEs in METADATA, pydoc topics, stdlib docstrings) and the held-out evaluation."""

from __future__ import annotations

import re
from collections import Counter

import pytest
import torch

from lit_docemb.data.core.document import Document, Section
from lit_docemb.errors import BadArgument
from lit_docemb.data.corpora.installed_docs import (
    InstalledDocsDataModule,
    document_label,
    NearDuplicateFilter,
    iter_installed_docs,
    markdown_sections,
    package_documents,
    prose_text,
    rst_sections,
    word_count,
)
from lit_docemb.eval.heldout import (
    build_task,
    evaluate_heldout,
    heldout_split,
    target_rank_metrics,
)


@pytest.fixture(scope="module")
def corpus() -> tuple[list[Document], Counter]:
    stats: Counter = Counter()
    return list(iter_installed_docs(stats=stats)), stats


def test_corpus_is_real_sectioned_and_large_enough(corpus):
    docs, stats = corpus
    by_source = Counter(d.metadata["source"] for d in docs)
    assert by_source["packages"] >= 40 and by_source["pydoc"] >= 40 and by_source["stdlib"] >= 100, by_source
    assert all(word_count(d) >= 100 for d in docs)
    assert sum(len(d.sections) >= 2 for d in docs) >= 0.6 * len(docs)
    assert sum(word_count(d) for d in docs) >= 100_000
    assert stats["short_document"] > 0 and stats["skipped_section"] > 0  # the filters ran and were counted
    # the stack this project needs is in the corpus, with its metadata
    torch_doc = next(d for d in docs if d.id == "package:torch")
    assert torch_doc.title == "torch" and "tensor" in torch_doc.metadata["summary"].lower()
    assert any(t.startswith("Topic ::") for t in torch_doc.metadata["topics"])
    assert next(d for d in docs if d.id == "pydoc:assignment").title == "Assignment statements"


def test_corpus_text_is_clean_prose(corpus):
    docs, _ = corpus
    text = "\n".join(s.text for d in docs for s in d.sections)
    for markup in ["```", "](http", "<img", "<div", "<a href", ".. image::", ".. code", ">>> ", "|===", "+---"]:
        assert markup not in text, markup
    assert not re.search(r"https?://", text)
    assert "__init__" in text  # Python's dunder names survive the emphasis stripping
    for doc in docs:
        summary = doc.metadata["summary"]
        if len(summary.split()) >= 4:  # the summary is a held-out query: never verbatim in the body
            assert all(summary.lower() != p.lower() for s in doc.sections for p in s.text.split("\n\n")), doc.id


def test_corpus_is_deterministic_and_deduplicated(corpus):
    docs, stats = corpus
    ids = [d.id for d in docs]
    assert len(ids) == len(set(ids))
    assert len({re.sub(r"\W+", " ", d.text.lower()) for d in docs}) == len(docs)
    for source in ("packages", "pydoc", "stdlib"):
        in_source = [d.id for d in docs if d.metadata["source"] == source]
        assert in_source == sorted(in_source)
    again = list(iter_installed_docs(sources=["pydoc"]))
    assert [d.to_json() for d in again] == [d.to_json() for d in docs if d.metadata["source"] == "pydoc"]


def test_same_distribution_installed_twice_is_read_once(tmp_path):
    for folder in ("a", "b"):
        info = tmp_path / folder / "demo_pkg-1.0.dist-info"
        info.mkdir(parents=True)
        (info / "METADATA").write_text(
            "Metadata-Version: 2.1\nName: demo-pkg\nVersion: 1.0\nSummary: A demo package for tests.\n"
            "Classifier: Topic :: Utilities\nDescription-Content-Type: text/markdown\n\n"
            "# Demo\n\nA demo package for tests.\n\nThe first section explains what the demo does in words.\n\n"
            "## Usage\n\n```python\nimport demo\n```\n\nCall the function and read the result carefully.\n")
    stats: Counter = Counter()
    docs = list(package_documents(stats, path=[str(tmp_path / "a"), str(tmp_path / "b")]))
    assert stats["duplicate_distribution"] == 1 and len(docs) == 1
    doc = docs[0]
    assert doc.id == "package:demo-pkg" and doc.metadata["topics"] == ["Topic :: Utilities"]
    assert [s.heading for s in doc.sections] == ["Demo", "Usage"]
    assert doc.sections[0].text == "The first section explains what the demo does in words."  # summary removed
    assert doc.sections[1].text == "Call the function and read the result carefully."  # code block removed


def test_markdown_cleaning():
    text = ("<p align='center'><img src='logo.png'></p>\n\n[![CI](https://x/badge.svg)](https://x)\n\n"
            "[Docs](https://d) • [Examples](https://e) • [Community](https://c)\n\n"
            "# Title\n\nSome **bold** text with a [link to docs](https://d) and `code` in a sentence.\n\n"
            "| a | b |\n|---|---|\n| 1 | 2 |\n\nSecond\n------\n\n- first item of the list here\n"
            "- second item of the list here\n\n## Changelog\n\n- fixed a bug in the parser module\n")
    sections = [(h, prose_text(lines)) for h, _, lines in markdown_sections(text)]
    assert sections[0] == ("", "")  # logo, badges and the navigation bar are gone
    assert sections[1] == ("Title", "Some bold text with a link to docs and code in a sentence.")
    assert sections[2] == ("Second", "first item of the list here\n\nsecond item of the list here")
    assert sections[3][0] == "Changelog"  # dropped later by build_sections


def test_rst_cleaning():
    text = ("=====\nTitle\n=====\n\n.. image:: https://x/badge.svg\n   :target: https://x\n\n"
            "Intro with ``literal`` and a `link <https://x>`_ and :class:`Thing` in it.\n\n"
            "Usage\n-----\n\nRun it like this::\n\n    thing = Thing()\n    thing.run()\n\n"
            "After the example comes more prose about the behaviour.\n")
    sections = [(h, prose_text(lines)) for h, _, lines in rst_sections(text)]
    assert sections[1] == ("Title", "Intro with literal and a link and Thing in it.")
    assert sections[2] == ("Usage", "Run it like this:\n\nAfter the example comes more prose about the behaviour.")


def test_near_duplicate_filter():
    base = " ".join(f"word{i} is followed by another word" for i in range(60))
    near = NearDuplicateFilter(threshold=0.7)
    assert not near.is_duplicate(base)
    assert near.is_duplicate(base.replace("word7 ", "term7 "))  # one word changed
    assert not near.is_duplicate(" ".join(f"token{i} precedes some other token" for i in range(60)))


# ------------------------------------------------------------------------------------------------ evaluation
TOPICS = ["astronomy telescope planet orbit", "cooking recipe oven flour", "football goal match referee",
          "guitar chord melody concert", "volcano lava eruption magma", "chess opening bishop checkmate",
          "sailing boat wind harbour", "bees honey hive pollen", "trains railway station locomotive",
          "medicine doctor patient vaccine", "poetry verse rhyme stanza", "mountains summit climber rope"]


def _crafted_documents() -> list[Document]:
    docs = []
    for i, topic in enumerate(TOPICS):
        a, b, c, d = topic.split()
        sections = [Section("", f"The {a} and the {b}. More about {a} here."),
                    Section("Part", f"A {c} meets a {d}. The {c} again and the {d} again with more words."),
                    Section("End", f"Finally {a} {c}.")]
        docs.append(Document(id=f"doc{i}", title=f"Doc {i}", sections=sections, metadata={"summary": f"{b} {d}"}))
    return docs


VOCAB = sorted({w for t in TOPICS for w in t.split()})


def bag_of_words(texts: list[str]) -> torch.Tensor:
    """A perfect embedder for the crafted documents: counts of the topic words."""
    out = torch.zeros(len(texts), len(VOCAB))
    for i, text in enumerate(texts):
        for word in re.findall(r"[a-z]+", text.lower()):
            if word in VOCAB:
                out[i, VOCAB.index(word)] += 1
    return out


def test_perfect_embedder_scores_one_and_random_scores_low():
    docs = _crafted_documents()
    task = build_task(docs, min_section_words=5)
    assert task.kinds.count("summary") == len(docs) and task.kinds.count("section") == len(docs)
    assert all("again" not in c for c in task.candidates)  # the probe section is cut out of its candidate
    perfect = evaluate_heldout(bag_of_words, docs, min_section_words=5)
    assert perfect["summary/mrr@10"] == 1.0 and perfect["section/mrr@10"] == 1.0 and perfect["mrr@10"] == 1.0
    generator = torch.Generator().manual_seed(0)
    random = evaluate_heldout(lambda texts: torch.randn(len(texts), 16, generator=generator), docs, min_section_words=5)
    assert random["mrr@10"] < 0.6
    constant = evaluate_heldout(lambda texts: torch.ones(len(texts), 4), docs, k=10, min_section_words=5)
    assert constant["mrr@10"] == 0.0  # ties count against the target


def test_target_rank_metrics_by_hand():
    candidates = torch.eye(3)
    queries = torch.tensor([[1.0, 0.0, 0.0], [1.0, 0.9, 0.0], [0.0, 0.0, 1.0]])
    result = target_rank_metrics(queries, candidates, torch.tensor([0, 1, 0]), k=2)
    assert result["mrr@2"] == pytest.approx((1 + 0.5 + 0) / 3)
    assert result["recall@1"] == pytest.approx(1 / 3) and result["recall@2"] == pytest.approx(2 / 3)


def test_heldout_split_is_stable_and_disjoint(corpus):
    docs, _ = corpus
    train, heldout = heldout_split(docs, 0.2)
    assert {d.id for d in train}.isdisjoint(d.id for d in heldout) and len(train) + len(heldout) == len(docs)
    assert 0.1 < len(heldout) / len(docs) < 0.3
    _, heldout_reversed = heldout_split(list(reversed(docs)), 0.2)
    assert sorted(d.id for d in heldout_reversed) == sorted(d.id for d in heldout)


def test_labels_are_the_documentation_source_or_the_trove_topic():
    topics = ["Topic :: Software Development :: Libraries", "Topic :: Scientific/Engineering"]
    package = Document("package:x", "x", [Section("", "text")], metadata={"source": "packages", "topics": topics})
    reference = Document("pydoc:assert", "assert", [Section("", "text")], metadata={"source": "pydoc", "summary": ""})
    assert [document_label(package, "source"), document_label(reference, "source")] == ["packages", "pydoc"]
    assert document_label(package, "topic") == "Scientific/Engineering"  # the first top-level topic, alphabetically
    assert document_label(reference, "topic") is None and document_label(package, "none") is None
    data = InstalledDocsDataModule(sources=["pydoc", "stdlib"], max_documents=80, val_fraction=0.2, num_workers=0)
    data.setup("fit")
    assert {data.train_set[i].label for i in range(len(data.train_set))} == {"pydoc", "stdlib"}
    with pytest.raises(BadArgument, match="label: must be source, topic or none"):
        InstalledDocsDataModule(label="package")
