"""DocSplit: sentence views, collation into typed batches, and a training step on a tiny BERT."""

from __future__ import annotations

import random

import pytest
import torch

from lit_docemb.data.core.batches import DocumentBatch, ViewPairBatch
from lit_docemb.data.core.document import Document, Section, doc_index
from lit_docemb.data.caches.sentence_cache import SentenceCache
from lit_docemb.data.core.text import split_sentences
from lit_docemb.methods.docsplit import DocSplit
from lit_docemb.views.docsplit import draw_views
from lit_docemb.models import EncoderSpec

DOC = Document(
    id="d1",
    title="Tides",
    sections=[
        Section("", "The tide rises twice a day. The moon pulls the water. Sailors watch the charts."),
        Section("Causes", "Gravity of the sun also matters. Spring tides are the largest. Neap tides are small."),
    ],
)


@pytest.fixture(scope="module")
def docsplit(tiny_encoder_dir) -> DocSplit:
    torch.manual_seed(0)
    return DocSplit(EncoderSpec(tiny_encoder_dir, max_length=64))


def _views(tokenizer, document: Document, seed: int) -> list[list[int]] | None:
    row = SentenceCache(tokenizer, max_length=10_000).tokenize([document])[0]
    return draw_views(row, random.Random(seed), max_tokens=10_000)


def test_every_sentence_lands_in_exactly_one_view(docsplit):
    sentences = [s for sec in DOC.sections for s in split_sentences(sec.text)]
    for seed in range(20):
        view_a, view_b = _views(docsplit.tokenizer, DOC, seed)
        assert view_a and view_b
        assert sorted(view_a + view_b) == list(range(len(sentences)))


def test_same_seed_same_split_and_splits_vary(docsplit):
    first = _views(docsplit.tokenizer, DOC, 7)
    assert _views(docsplit.tokenizer, DOC, 7) == first
    assert len({str(_views(docsplit.tokenizer, DOC, s)) for s in range(30)}) > 5


def test_short_documents_are_split_or_counted(docsplit):
    text = "Only one sentence here without an end"
    row = SentenceCache(docsplit.tokenizer, max_length=64).tokenize([Document("s", sections=[Section("", text)])])[0]
    assert row.halves and draw_views(row, random.Random(0), 62) == [[0], [1]]
    halves = [docsplit.tokenizer.decode(row.view([index], 62)) for index in range(2)]
    assert " ".join(halves).split() == text.lower().split()
    for text in ["word", "", "   \n "]:
        assert _views(docsplit.tokenizer, Document("x", sections=[Section("", text)]), 0) is None


def test_training_collator_builds_view_pairs(docsplit):
    docs = [DOC, Document("d2", sections=[Section("", "Bees make honey. They live in hives. Hives hold wax.")]),
            Document("bad", sections=[Section("", "x")])]
    torch.manual_seed(3)
    batch = docsplit.collator("fit")(docs)
    assert isinstance(batch, ViewPairBatch)
    assert len(batch) == 2 and batch.skipped == 1
    assert batch.doc_index.tolist() == [doc_index("d1"), doc_index("d2")]
    assert batch.view_a.input_ids.shape == batch.view_b.input_ids.shape
    mlm = batch.mlm
    masked = mlm.labels != -100
    assert masked.any()
    assert torch.equal(mlm.labels[masked], batch.view_a.input_ids[masked])  # labels = the original ids
    assert torch.equal(mlm.input_ids[~masked], batch.view_a.input_ids[~masked])  # the rest untouched
    torch.manual_seed(3)
    again = docsplit.collator("fit")(docs)
    assert torch.equal(again.view_a.input_ids, batch.view_a.input_ids)  # deterministic under the seed


def test_validation_views_do_not_depend_on_the_global_rng(docsplit):
    collate = docsplit.collator("validate")
    torch.manual_seed(1)
    first = collate([DOC])
    torch.manual_seed(2)
    assert torch.equal(collate([DOC]).view_a.input_ids, first.view_a.input_ids)


def test_training_step_updates_encoder_and_mlm_head(docsplit, tiny_encoder_dir):
    docs = [Document(f"d{i}", sections=[Section("", f"Topic {i} begins here. It continues with detail {i}. "
                                                   f"Then it ends on point {i}.")]) for i in range(4)]
    model = DocSplit(EncoderSpec(tiny_encoder_dir, max_length=64))
    batch = model.collator("fit")(docs)
    terms = model.losses(batch)
    assert set(terms) == {"info_nce_loss", "negatives_per_anchor", "mlm_loss", "skipped_documents"}
    total = model.total_loss(terms)
    assert torch.isclose(total, terms["info_nce_loss"] + 0.1 * terms["mlm_loss"])
    total.backward()
    word_embeddings = model.encoder.backbone.embeddings.word_embeddings.weight
    assert word_embeddings.grad is not None and word_embeddings.grad.abs().sum() > 0
    head = model.encoder.model.cls.predictions.transform.dense.weight
    assert head.grad is not None and head.grad.abs().sum() > 0
    assert model.encoder.model.training  # dropout on: from_pretrained returns eval mode, we undo it


def test_predict_returns_document_embeddings(docsplit):
    batch = docsplit.collator("predict")([DOC, Document("d2", title="Bees", sections=[Section("", "Bees.")])])
    assert isinstance(batch, DocumentBatch) and batch.ids == ["d1", "d2"]
    out = docsplit.predict_step(batch, 0)
    assert out["embeddings"].shape == (2, 32) and out["ids"] == ["d1", "d2"]


def test_no_mlm_head_when_weight_is_zero(tiny_encoder_dir):
    model = DocSplit(EncoderSpec(tiny_encoder_dir, max_length=64), mlm_weight=0.0)
    batch = model.collator("fit")([DOC, DOC])
    assert batch.mlm is None
    assert "mlm_loss" not in model.losses(batch)


def test_max_length_beyond_positions_is_rejected(tiny_encoder_dir):
    with pytest.raises(ValueError, match="^encoder.max_length: 512 exceeds the 128 positions"):
        DocSplit(EncoderSpec(tiny_encoder_dir, max_length=512))


def test_a_batch_that_lost_every_document_still_uses_every_weight(tiny_encoder_dir):
    """Under DDP a device whose documents were all unusable must still run the encoder and MLM head."""
    model = DocSplit(EncoderSpec(tiny_encoder_dir, max_length=64))
    batch = model.collator("fit")([Document("a", sections=[Section("", "x")])])
    assert len(batch) == 0 and batch.skipped == 1 and batch.mlm is not None
    terms = model.losses(batch)
    total = model.total_loss(terms)
    assert total.item() == 0.0
    total.backward()
    assert all(p.grad is not None for p in model.parameters() if p.requires_grad)


def test_mlm_on_masked_positions_equals_the_full_head(tiny_encoder_dir):
    torch.manual_seed(0)
    model = DocSplit(EncoderSpec(tiny_encoder_dir, max_length=64)).eval()
    mlm = model.collator("fit")([DOC, DOC]).mlm
    masked = mlm.labels != -100
    full = model.encoder.mlm_logits(mlm.input_ids, mlm.attention_mask)  # (B, T, V)
    selected = model.encoder.mlm_logits(mlm.input_ids, mlm.attention_mask, masked)  # (K, V)
    assert torch.allclose(full[masked], selected, atol=1e-5)
    assert torch.allclose(model.mlm(full, mlm.labels)["mlm_loss"], model.mlm(selected, mlm.labels[masked])["mlm_loss"])
