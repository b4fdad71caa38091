"""SameDocumentCollator (lit_docemb/views/simcse.py): both views are the document's own tokens; the masked copy
only with mlm_probability > 0."""

from __future__ import annotations

import torch

from lit_docemb.data.core.document import Document, Section, doc_index
from lit_docemb.data.core.tokens import tokenize
from lit_docemb.views.simcse import SameDocumentCollator

DOCS = [Document("a", title="Tides", sections=[Section("", "The ocean tide moves the ships in the harbour.")]),
        Document("b", sections=[Section("", "A compiler reads a loop in a function.")])]


def test_both_views_are_the_document_cut_to_max_length(tiny_tokenizer):
    batch = SameDocumentCollator(tiny_tokenizer, 6, with_title=True, mlm_probability=0.0, deterministic=True)(DOCS)
    expected = tokenize(tiny_tokenizer, ["Tides\n\nThe ocean tide moves the ships in the harbour.",
                                    "A compiler reads a loop in a function."], 6)
    assert torch.equal(batch.view_a.input_ids, expected.input_ids) and batch.view_b is batch.view_a
    assert batch.doc_index.tolist() == [doc_index("a"), doc_index("b")] and batch.mlm is None


def test_the_masked_copy_masks_only_real_tokens_and_repeats_in_validation(tiny_tokenizer):
    collate = SameDocumentCollator(tiny_tokenizer, 16, with_title=True, mlm_probability=0.5, deterministic=True)
    batch, again = collate(DOCS), collate(DOCS)
    chosen = batch.mlm.labels != -100
    assert chosen.any() and torch.equal(batch.mlm.labels[chosen], batch.view_a.input_ids[chosen])
    assert not (chosen & (batch.view_a.attention_mask == 0)).any()  # padding is never chosen
    assert not torch.isin(batch.view_a.input_ids[chosen], torch.tensor(tiny_tokenizer.all_special_ids)).any()
    assert torch.equal(batch.mlm.input_ids, again.mlm.input_ids) and torch.equal(batch.mlm.labels, again.mlm.labels)
