"""Property-based tests of the text pipeline under hostile input (issue 11, item 1).

Every function that turns corpus text into a batch — sentence splitting, passage chunking, section splitting,
each method's view builder and collator, DECA's augmentations — gets documents drawn from the same input classes:
arbitrary Unicode, empty and whitespace-only text, one-sentence documents, control and format characters,
bytes decoded the way the corpus readers decode them (``ReadContext.decode``: UTF-8 with ``errors="replace"``),
lone surrogates (what a JSONL corpus's ``"\\ud800"`` escapes decode to: text functions and readers only, see
``with_surrogates``) and a few million-character documents.
The properties: the function never raises; a batch never holds an empty view (a row with no token but
[CLS] / [SEP] / padding, or a word-id row without a word); every input document is either in the batch or
counted in its ``skipped``; no position is beyond its table (token rows within the model's length, CoLDE's
section and chunk ids within its embeddings, the chunks beyond counted as ``truncated_chunks``).

``LIT_DOCEMB_FUZZ_EXAMPLES`` sets the examples per property (default 40: about 30 s of test time on 2 busy
cores; 300 took about 4 minutes there and found the unix-compress case of the JSONL test).
"""

from __future__ import annotations

import json
import os
import random
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from lit_docemb.data.core.document import Document, Section
from lit_docemb.data.caches.passage_cache import PassageCache, TokenizedPassages
from lit_docemb.data.core.passage_spec import PassageSpec
from lit_docemb.data.core.reading import ReadContext
from lit_docemb.data.core.text import chunk_passages, split_sentences
from lit_docemb.data.corpora.wikipedia_formats import split_plain_text_sections
from lit_docemb.data.corpora.wikir import wikir_sections

EXAMPLES = int(os.environ.get("LIT_DOCEMB_FUZZ_EXAMPLES", "40"))
settings.register_profile("fuzz", max_examples=EXAMPLES, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                                 HealthCheck.large_base_example])
FUZZ = settings.get_profile("fuzz")

WORDNET = Path("/usr/share/wordnet")

# --------------------------------------------------------------------------------------------- input classes
_WORDS = ["the", "cat", "sat", "on", "a", "mat", ".", "Dr.", "Smith", "met", "Mr.", "Jones", "!", "e.g.", "U.S.",
          "3.14", "?", "film", "good", "strong", "big", "car", "house", "weak", "movie", "large", "fast", "…",
          "「本」。", "naïve", "café"]
_WHITESPACE = " \t\n\r\x0b\x0c\x1c\x1d\x1e\x85\xa0\u1680\u2000\u2028\u2029\u202f\u3000"

#: UTF-8 bytes with invalid sequences, decoded as every corpus reader decodes them.
decoded_bytes = st.binary(max_size=300).map(lambda data: ReadContext().decode(data))
prose = st.lists(st.sampled_from(_WORDS), max_size=60).map(" ".join)
one_sentence = st.lists(st.sampled_from([w for w in _WORDS if w.isalpha()]), min_size=1, max_size=40).map(
    lambda words: " ".join(words) + ".")
texts = st.one_of(
    st.just(""),
    st.text(alphabet=_WHITESPACE, max_size=40),
    st.text(max_size=200),  # arbitrary Unicode (no surrogates)
    st.text(alphabet=st.characters(categories=["Cc", "Cf", "Co", "Zl", "Zp"]), max_size=60),
    decoded_bytes,
    one_sentence,
    prose,
)
#: What a JSON ``"\ud800"`` escape decodes to. The readers repair such text (``ReadContext.json``) and Arrow cannot
#: hold it, so it reaches the pure-Python text functions and the readers here, never a collator (tokenizers raise).
with_surrogates = st.one_of(texts, st.text(alphabet=st.characters(codec=None, exclude_categories=()), max_size=60))

#: Million-character documents: one word, one word per line, a run of dots, prose without spaces, spaces.
HUGE = ["a" * 1_000_000, "word\n" * 200_000, "." * 1_000_000, "Ab. " * 250_000, " " * 1_000_000]


@st.composite
def documents(draw, max_sections: int = 4) -> Document:
    sections = draw(st.lists(st.builds(Section, heading=texts, text=texts), max_size=max_sections))
    return Document(id=draw(st.one_of(st.text(max_size=8), texts)), title=draw(texts), sections=sections)


def batches(max_size: int = 6):
    """Lists of documents with distinct ids (a corpus never holds one id twice)."""
    return st.lists(documents(), max_size=max_size).map(_distinct_ids)


def _distinct_ids(docs: list[Document]) -> list[Document]:
    for i, doc in enumerate(docs):
        doc.id = f"{i}:{doc.id}"
    return docs


def huge_batch(text: str) -> list[Document]:
    return [Document("huge", "", [Section("", text)]), Document("small", "t", [Section("", "One. Two words.")])]


# ----------------------------------------------------------------------------------------------------- helpers
def non_whitespace(text: str) -> str:
    return "".join(text.split())


def content_rows(tokens, tokenizer) -> torch.Tensor:
    """(N,) whether each row holds a token other than [CLS], [SEP] and padding ([UNK] stands for content)."""
    special = torch.tensor([tokenizer.cls_token_id, tokenizer.sep_token_id, tokenizer.pad_token_id])
    real = tokens.attention_mask.bool() & ~torch.isin(tokens.input_ids, special)
    return real.any(dim=1)


def assert_no_empty_view(tokens, tokenizer) -> None:
    rows = content_rows(tokens, tokenizer)
    assert rows.all(), f"rows {torch.nonzero(~rows).flatten().tolist()} have no content token"


@pytest.fixture(scope="module")
def tokenizer(tiny_encoder_dir):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tiny_encoder_dir)


# ---------------------------------------------------------------------------------------- text: sentences
@FUZZ
@given(with_surrogates)
@example("\x00\x01. \u200b. \ufeff")
def test_split_sentences_never_raises_and_keeps_every_character(text: str) -> None:
    sentences = split_sentences(text)
    assert all(s and s == s.strip() for s in sentences)
    assert non_whitespace("".join(sentences)) == non_whitespace(text)


@pytest.mark.parametrize("text", HUGE[:3], ids=["one-word", "lines", "dots"])
def test_split_sentences_of_a_million_characters(text: str) -> None:
    assert non_whitespace("".join(split_sentences(text))) == non_whitespace(text)


# ----------------------------------------------------------------------------------------- text: passages
@FUZZ
@given(documents(), st.integers(1, 30), st.one_of(st.none(), st.integers(1, 5)))
def test_chunk_passages_uses_every_word_once_and_no_passage_is_empty(doc: Document, budget: int,
                                                                     max_passages: int | None) -> None:
    passages = chunk_passages(doc, budget, max_passages)
    assert all(p.text.split() for p in passages)
    assert all(len(p.text.split()) <= 2 * budget for p in passages)
    words = [w for s in doc.sections for w in " ".join(split_sentences(s.text)).split()]
    got = [w for p in passages for w in p.text.split()]
    assert got == words[:len(got)]
    if max_passages is None or len(passages) < max_passages:
        assert got == words  # nothing left out unless cut at max_passages
    assert [p.section_index for p in passages] == sorted(p.section_index for p in passages)


# ----------------------------------------------------------------------------------------- text: sections
@FUZZ
@given(with_surrogates)
@example("Heading\n\nbody text.\n\nAnother Heading\n\n\n")
def test_plain_text_sections_keep_every_character_in_order(text: str) -> None:
    sections = split_plain_text_sections(text)
    assert sections and sections[0].heading == ""
    flat = "".join(s.heading + s.text for s in sections)
    assert non_whitespace(flat) == non_whitespace(text)
    assert all(s.heading for s in sections[1:])


@FUZZ
@given(with_surrogates)
@example("")
def test_wikir_sections_are_never_empty(text: str) -> None:
    sections = wikir_sections(text)
    assert all(s.text.strip() for s in sections)
    assert non_whitespace("".join(s.heading + s.text for s in sections)) == non_whitespace(text)


@FUZZ
@given(with_surrogates)
@example("Title\n=====\n\n.. image:: x\n   :alt: y\n\nBody::\n\n   code\n\n# Not md\n")
def test_markdown_and_rst_sections_never_raise(text: str) -> None:
    from lit_docemb.data.corpora.installed_docs import (
        build_sections,
        markdown_sections,
        rst_sections,
    )

    for raw in (markdown_sections(text), rst_sections(text)):
        sections = build_sections(raw)
        assert all(s.text.strip() for s in sections)


# ------------------------------------------------------------------------------------------------ DocSplit
@FUZZ
@given(batches(), st.booleans())
@example(huge_batch(HUGE[0]), False).via("million characters, one word")
@example(huge_batch(HUGE[3]), True).via("million characters of short sentences")
@example([Document("ctl", "", [Section("", "\x01\x02 \x03\x04")])], True).via("words the tokenizer removes")
def test_docsplit_views(tokenizer, docs: list[Document], deterministic: bool) -> None:
    from lit_docemb.data.caches.sentence_cache import SentenceCache
    from lit_docemb.views.docsplit import SentenceSplitCollator, WholeDocumentCollator

    cache = SentenceCache(tokenizer, 32)
    batch = SentenceSplitCollator(cache, 0.15, deterministic)(docs)
    assert len(batch) + batch.skipped == len(docs)
    assert len(batch.view_a) == len(batch.view_b) == len(batch.doc_index) == len(batch.mlm.input_ids)
    assert batch.view_a.input_ids.shape[1] <= 32
    assert_no_empty_view(batch.view_a, tokenizer)
    assert_no_empty_view(batch.view_b, tokenizer)
    embedded = WholeDocumentCollator(cache)(docs)
    assert embedded.ids == [d.id for d in docs]  # predict embeds every document, empty or not


# ------------------------------------------------------------------------------------------- Graph-RoBERTa
def cached_rows(cache: PassageCache, docs: list[Document]) -> list[TokenizedPassages]:
    """The passage cache's rows of ``docs`` as the DataModule hands them to the collator (without Arrow)."""
    return [TokenizedPassages(row["id"], np.asarray(row["input_ids"], dtype=np.int32),
                              np.asarray(row["passage_offsets"], dtype=np.int32),
                              np.asarray(row["section_index"], dtype=np.int32), row["headings"])
            for row in cache.rows(docs, 0, len(docs))]


def check_graphs(graphs, tokenizer, training: bool = True) -> None:
    """Every graph has a node per passage and edges among them; in training no passage is empty (a document
    to embed keeps its node even when it has no text: predict returns one embedding per document)."""
    assert (graphs.passage_counts >= 1).all()
    assert int(graphs.passage_counts.sum()) == len(graphs.passages)
    if training:
        assert_no_empty_view(graphs.passages, tokenizer)
    for count, edges in zip(graphs.passage_counts.tolist(), graphs.edges):
        assert edges.numel() == 0 or (0 <= int(edges.min()) and int(edges.max()) <= count)


@FUZZ
@given(batches(), st.sampled_from(["full", "section"]), st.sampled_from(["halves", "one_passage"]),
       st.booleans(), st.integers(1, 12))
@example(huge_batch(HUGE[1]), "section", "halves", False, 5).via("million characters, one word a line")
@example([Document("ctl", "", [Section("", "\x01 \x02"), Section("h", "alpha beta. gamma delta.")])], "section",
         "halves", True, 1).via("a passage of words the tokenizer removes")
def test_graph_roberta_views_from_documents_and_from_the_cache(tokenizer, docs, graph, objective, deterministic,
                                                               words_per_passage) -> None:
    from lit_docemb.views.graph_roberta import (
        GraphDocumentCollator,
        PassageGraphBuilder,
        SubDocumentCollator,
    )

    spec = PassageSpec(words_per_passage, max_passage_tokens=16, max_passages=6, max_passages_inference=8,
                       graph=graph)
    builder = PassageGraphBuilder(tokenizer, spec)
    collate = SubDocumentCollator(builder, spec.max_passages, objective, deterministic)
    seed = random.randrange(2**31)
    torch.manual_seed(seed)
    batch = collate(docs)
    assert len(batch) + batch.skipped == len(docs)
    check_graphs(batch.view_a, tokenizer)
    check_graphs(batch.view_b, tokenizer)
    embedded = GraphDocumentCollator(builder, spec.max_passages_inference)(docs)
    assert embedded.ids == [d.id for d in docs]
    check_graphs(embedded.graphs, tokenizer, training=False)

    rows = cached_rows(PassageCache(tokenizer, spec), docs)
    torch.manual_seed(seed)
    from_cache = collate(rows)
    assert torch.equal(from_cache.view_a.passages.input_ids, batch.view_a.passages.input_ids)
    assert torch.equal(from_cache.view_b.passage_counts, batch.view_b.passage_counts)
    assert from_cache.skipped == batch.skipped


# ---------------------------------------------------------------------------------------------------- DECA
VOCABULARY_TEXTS = [
    "The strong man bought a big car and a large automobile. The weak child liked the film.",
    "A strong movie is a good film. The big house is large and the small dog is weak.",
    "People buy cars. The car is fast and the automobile is quick. Impotent rage is not strong.",
    "They decrease the price and increase the sales. Strong coffee, weak tea, large cup, naïve café.",
]


@pytest.fixture(scope="module")
def augmenters():
    if not (WORDNET / "data.noun").is_file():
        pytest.skip("WordNet database missing: apt-get install -y wordnet-base")
    from lit_docemb.augment import DocumentAugmenter, Vocabulary

    vocabulary = Vocabulary.from_texts(VOCABULARY_TEXTS)
    return vocabulary, {name: DocumentAugmenter(name, vocabulary, min_count=1, wordnet_dir=str(WORDNET),
                                                probability=0.5 if name == "uninformative" else 1.0)
                        for name in ("wordnet", "antonym", "uninformative")}


@FUZZ
@given(with_surrogates, st.one_of(st.integers(), texts), st.sampled_from(["wordnet", "antonym", "uninformative"]))
@example("a" * 1_000_000, 0, "wordnet").via("million characters")
@example("strong " * 140_000, "s", "antonym").via("million characters of replaceable words")
def test_deca_augmentations_are_pure_and_keep_every_word(augmenters, text, seed, name) -> None:
    from lit_docemb.augment import words_of

    augment = augmenters[1][name]
    words = augment(text, seed)
    assert words == augment(text, seed)  # same seed, same augmentation
    assert all(w and not any(c.isspace() for c in w) for w in words)
    original = words_of(text)
    assert len(words) >= len(original) if name != "uninformative" else len(words) == len(original)
    assert bool(words) == bool(original)


@FUZZ
@given(batches(), st.booleans(), st.sampled_from(["wordnet", "antonym", "uninformative"]))
@example(huge_batch("strong car " * 100_000), False, "wordnet").via("million characters")
def test_deca_doc2vecc_batches(augmenters, docs, deterministic, name) -> None:
    from lit_docemb.views.deca import (
        AppendedAugmentationCollator,
        Doc2VecCPairCollator,
        WordDocumentCollator,
        word_index,
    )

    vocabulary, augment = augmenters[0], augmenters[1][name]
    index = word_index(vocabulary, 1, 1000)
    pair = Doc2VecCPairCollator(index, augment, 50, deterministic)(docs)
    assert len(pair) + pair.skipped == len(docs)
    assert (pair.words.lengths >= 2).all() and (pair.augmented.lengths >= 1).all()
    assert len(pair.augmented.lengths) == len(pair.doc_index) == len(pair)
    appended = AppendedAugmentationCollator(index, augment, 50, deterministic)(docs)
    assert len(appended) + appended.skipped == len(docs)
    assert (appended.words.lengths >= 3).all()
    embedded = WordDocumentCollator(index, 50)(docs)
    assert embedded.ids == [d.id for d in docs]


@FUZZ
@given(batches(), st.booleans())
@example([Document("ctl", "", [Section("", "strong \x01")])], True).via("a document the tokenizer empties")
@example(huge_batch("strong car " * 100_000), False).via("million characters")
def test_deca_encoder_batches(augmenters, tokenizer, docs, deterministic) -> None:
    from lit_docemb.views.deca import AugmentedTextCollator

    batch = AugmentedTextCollator(tokenizer, augmenters[1]["wordnet"], 32, deterministic)(docs)
    assert len(batch) + batch.skipped == len(docs)
    assert batch.view_a.input_ids.shape[1] <= 32 and batch.view_b.input_ids.shape[1] <= 32  # within the positions
    assert_no_empty_view(batch.view_a, tokenizer)
    assert_no_empty_view(batch.view_b, tokenizer)


# --------------------------------------------------------------------------------------------------- CoLDE
def check_section_chunks(batch, tokenizer, num_sections: int, chunk_tokens: int, chunk_positions: int | None) -> None:
    """Every kept document has its n sections, every section at least one chunk, every chunk content, and no
    section or chunk id beyond the model's tables."""
    sections = batch.sections
    assert batch.sections_per_document == num_sections and len(sections.chunks_per_section) == len(batch) * num_sections
    assert (sections.chunks_per_section >= 1).all() and int(sections.chunks_per_section.sum()) == len(sections.chunk_ids)
    assert sections.chunks.input_ids.shape[1] <= chunk_tokens
    if len(sections.chunk_ids):
        assert_no_empty_view(sections.chunks, tokenizer)
        assert int(sections.section_ids.max()) < num_sections
        assert chunk_positions is None or int(sections.chunk_ids.max()) < chunk_positions


@FUZZ
@given(batches(), st.integers(1, 3), st.sampled_from([None, 1, 3]), st.sampled_from([None, 4]))
@example(huge_batch(HUGE[1]), 2, None, 4).via("million characters, one word a line")
@example(huge_batch(HUGE[0]), 1, None, 4).via("million characters, one word")
@example(huge_batch(HUGE[3]), 3, 1, 4).via("million characters of short sentences, capped")
@example([Document("ctl", "", [Section("", "\x01\x02 \x03"), Section("h", "one two three")])], 2, None, 4)
def test_colde_section_chunks(tokenizer, docs, num_sections, max_chunks, chunk_positions) -> None:
    from lit_docemb.views.colde import PredictCollator, SectionChunkCollator

    chunk_tokens = 8
    collate = SectionChunkCollator(tokenizer, num_sections, chunk_tokens, max_chunks, chunk_positions)
    for doc in docs:
        doc.label = doc.title or None
    batch = collate(docs)
    assert len(batch) + batch.skipped == len(docs) and len(batch.labels) == len(batch.doc_index) == len(batch)
    check_section_chunks(batch, tokenizer, num_sections, chunk_tokens, chunk_positions)
    assert batch.truncated_chunks >= 0
    whole = SectionChunkCollator(tokenizer, 1, chunk_tokens, max_chunks, chunk_positions)
    predicted = PredictCollator(whole, collate)(docs)
    assert len(predicted.whole) + predicted.whole.skipped == len(docs)
    order = {d.id: i for i, d in enumerate(docs)}
    assert sorted(predicted.whole.ids, key=order.__getitem__) == predicted.whole.ids  # a subset, in input order
    check_section_chunks(predicted.whole, tokenizer, 1, chunk_tokens, chunk_positions)
    assert predicted.split.ids == batch.ids


def test_colde_a_million_characters_keep_the_chunks_its_table_embeds(tokenizer) -> None:
    from lit_docemb.data.core.text import token_windows
    from lit_docemb.views.colde import SectionChunkCollator, split_sections

    docs = huge_batch(HUGE[1])
    batch = SectionChunkCollator(tokenizer, 2, 8, None, 4)(docs)
    ids = tokenizer(HUGE[1], add_special_tokens=False)["input_ids"]
    windows = [len(token_windows(s, 6)) for s in split_sections(np.asarray(ids), [len(ids)], 2)]  # 6: 8 - 2
    assert batch.ids == ["huge", "small"] and batch.sections.chunks_per_section[:2].tolist() == [4, 4]
    assert batch.truncated_chunks == sum(windows) - 8 > 10_000


# ---------------------------------------------------------------------------------------------------- CTPE
headings = st.one_of(texts, st.sampled_from(["Abstract", "Claims", "claims ", "Title", "title"]))


@st.composite
def ctpe_documents(draw) -> list[Document]:
    docs = draw(st.lists(st.builds(Document, id=st.text(max_size=4), title=texts,
                                   sections=st.lists(st.builds(Section, heading=headings, text=texts), max_size=3)),
                         max_size=6))
    return _distinct_ids(docs)


@FUZZ
@given(ctpe_documents(), st.sampled_from(["title", "before:Claims", 0.2, 0.5, 0.8]), st.booleans(),
       st.booleans())
@example([Document("a", "T", [Section("Abstract", "x " * 500_000)]), Document("b", "U", [Section("", "y z")])],
         "title", False, False).via("million characters")
def test_ctpe_pairs(tiny_encoder_dir, docs, pos, deterministic, transformer) -> None:
    from lit_docemb.models.ctpe_tokenizers import HFTokenIds, WordTokenizer
    from lit_docemb.views.ctpe import CoupledDocumentCollator, CoupledPairCollator, PairSplitter, PartnerSampler

    if transformer:
        tokenizer = HFTokenIds(tiny_encoder_dir)
    else:
        tokenizer = WordTokenizer.from_texts(VOCABULARY_TEXTS)
    splitter = PairSplitter(tokenizer, pos, 16)
    sampler = PartnerSampler(docs, [d.id for d in docs])
    batch = CoupledPairCollator(splitter, sampler, tokenizer.pad_id, deterministic)(docs)
    assert len(batch) + batch.skipped == len(docs)
    for part in (batch.former, batch.latter, batch.negative_former, batch.negative_latter):
        assert len(part) == len(batch) and part.attention_mask.any(dim=1).all()
    represented = CoupledDocumentCollator(splitter, tokenizer.pad_id)(docs)
    assert len(represented.ids) + represented.skipped == len(docs)
    assert represented.former.attention_mask.any(dim=1).all() and represented.latter.attention_mask.any(1).all()


# ------------------------------------------------------------------------------- classifier, dense retrieval
@FUZZ
@given(batches(), st.lists(st.one_of(st.none(), st.sampled_from(["pos", "neg", "POS", ""]), texts), min_size=6,
                           max_size=6))
@example(huge_batch(HUGE[1]), ["pos", "neg", None, None, None, None]).via("million characters")
def test_classifier_batches(tokenizer, docs, labels) -> None:
    from lit_docemb.views.classifier import LabelledCollator
    from lit_docemb.views.common import DocumentCollator

    for doc, label in zip(docs, labels):
        doc.label = label
    batch = LabelledCollator(DocumentCollator(tokenizer, 32, True), ["pos", "neg"])(docs)
    assert len(batch) + batch.skipped == len(docs) and len(batch.inputs) == len(batch)
    assert batch.inputs.tokens.input_ids.shape[1] <= 32
    assert batch.targets.tolist() == [["pos", "neg"].index(d.label) for d in docs if d.label in ("pos", "neg")]


@FUZZ
@given(st.lists(st.tuples(st.text(max_size=6), texts), min_size=1, max_size=6), batches(max_size=3),
       st.integers(0, 2))
@example([("q", "\x01\x02 \u200b")], [Document("d", "", [Section("", "text")])], 0).via("control-character query")
@example([("q", "\ufffd\u0301")], [Document("d", "", [Section("", "text")])], 0).via("query the normaliser empties")
@example([("q", "strong car")], huge_batch(HUGE[3]), 1).via("million-character positive")
def test_dense_retrieval_batches_from_the_queries_file(tmp_path_factory, tokenizer, lines, docs, k) -> None:
    """Query lines as a TSV file through the reader, then (query, positive, negatives) through the collator."""
    from lit_docemb.data.retrieval.datamodule import RetrievalExample
    from lit_docemb.data.retrieval.trec import read_queries
    from lit_docemb.views.common import DocumentCollator
    from lit_docemb.views.dense_retrieval import QueryDocumentCollator

    path = tmp_path_factory.mktemp("queries") / "queries.tsv"
    path.write_bytes(b"".join(f"{qid}\t{text}".encode("utf-8", "surrogatepass").replace(b"\n", b" ") + b"\n"
                              for qid, text in lines))
    queries = read_queries(path)
    corpus = [d for d in docs if not d.is_empty()] or [Document("d", "", [Section("", "text")])]
    examples = [RetrievalExample(q.id, q.text, corpus[0], corpus[1:1 + k]) for q in queries.values()]
    batch = QueryDocumentCollator(DocumentCollator(tokenizer, 32, True))(examples)
    assert len(batch) == len(examples) and len(batch.documents) == len(examples) + sum(map(len, (e.negatives
                                                                                             for e in examples)))
    assert_no_empty_view(batch.queries.tokens, tokenizer)
    assert batch.documents.tokens.input_ids.shape[1] <= 32


# ------------------------------------------------------------------------------------------- corpus reader
json_values = st.recursive(st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=True),
                                     with_surrogates),
                           lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                   st.dictionaries(st.sampled_from(["heading", "text", "x"]), inner,
                                                                   max_size=3)),
                           max_leaves=8)
records = st.one_of(
    st.fixed_dictionaries({"id": st.one_of(st.text(max_size=5), st.integers())},
                          optional={"title": json_values, "text": json_values, "sections": json_values,
                                    "label": json_values, "metadata": json_values}),
    json_values,
)


@FUZZ
@given(st.lists(st.one_of(records.map(json.dumps), st.binary(max_size=40)), max_size=8))
@example([json.dumps({"id": 1, "text": None}), json.dumps({"id": "2", "sections": [{"heading": None, "text": 5}]}),
          json.dumps({"id": "3", "title": ["x"], "text": "ok"}), '{"id": "4", "text": "\\ud800 lone"}'])
@example([b"\x1f\x9d"]).via("a file that starts with the unix-compress magic")
@example([b"\x1f\x8b\x08 not gzip"]).via("a file that starts with the gzip magic")
def test_jsonl_reader_keeps_or_counts_every_line(tmp_path_factory, tokenizer, lines) -> None:
    """Any line of a JSONL corpus is a document whose fields are strings, or a counted malformed record; the
    documents then go through a DocSplit batch."""
    from lit_docemb.data.corpora.jsonl import read_jsonl
    from lit_docemb.views.docsplit import SentenceSplitCollator

    path = tmp_path_factory.mktemp("jsonl") / "docs.jsonl"
    path.write_bytes(b"".join((line.encode() if isinstance(line, str) else line.replace(b"\n", b" ")) + b"\n"
                              for line in lines))
    data = path.read_bytes()
    if data.startswith(b"\x1f\x9d"):  # unix-compress magic: the reader refuses the file, naming the fix
        with pytest.raises(ValueError, match="unix-compress"):
            read_jsonl(path, ReadContext())
        return
    context = ReadContext()
    docs = read_jsonl(path, context)
    if data.startswith((b"\x1f\x8b", b"BZh", b"\xfd7zXZ\x00")):  # read as a compressed file: corrupt, counted
        assert context.stats["corrupt_file"] == 1
    else:
        non_blank = sum(1 for line in data.split(b"\n") if ReadContext().decode(line).strip())
        assert len(docs) + context.stats["malformed_record"] == non_blank
    for doc in docs:
        assert isinstance(doc.id, str) and isinstance(doc.title, str)
        assert all(isinstance(s.heading, str) and isinstance(s.text, str) for s in doc.sections)
        assert doc.label is None or isinstance(doc.label, str)
        assert isinstance(doc.metadata, dict)
        doc.text.encode("utf-8")  # no lone surrogate from a "\ud800" escape reaches the pipeline
    from lit_docemb.data.caches.sentence_cache import SentenceCache

    batch = SentenceSplitCollator(SentenceCache(tokenizer, 32), 0.0, True)(_distinct_ids(docs))
    assert len(batch) + batch.skipped == len(docs)
