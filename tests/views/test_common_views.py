"""DocumentCollator (lit_docemb/views/common.py): whole documents, title and body, tokenized and cut for embedding."""

from __future__ import annotations

import torch

from lit_docemb.data.core.document import Document, Section
from lit_docemb.data.core.tokens import tokenize
from lit_docemb.views.common import DocumentCollator

DOCS = [Document("a", title="Tides", sections=[Section("", "The ocean tide moves."), Section("S", "Ships wait.")]),
        Document("b", sections=[Section("", "A loop in a function.")])]


def test_the_batch_is_the_title_then_the_sections_and_keeps_the_ids(tiny_tokenizer):
    batch = DocumentCollator(tiny_tokenizer, max_length=64, with_title=True)(DOCS)
    expected = tokenize(tiny_tokenizer, ["Tides\n\nThe ocean tide moves.\n\nShips wait.", "A loop in a function."], 64)
    assert batch.ids == ["a", "b"]
    assert torch.equal(batch.tokens.input_ids, expected.input_ids)
    assert torch.equal(batch.tokens.attention_mask, expected.attention_mask)
    untitled = DocumentCollator(tiny_tokenizer, max_length=64, with_title=False)(DOCS[:1])
    body = tokenize(tiny_tokenizer, ["The ocean tide moves.\n\nShips wait."], 64)
    assert torch.equal(untitled.tokens.input_ids, body.input_ids)  # without the title


def test_documents_are_cut_to_max_length_with_their_end_token(tiny_tokenizer):
    long = Document("long", sections=[Section("", " ".join(["ocean tide"] * 50))])
    batch = DocumentCollator(tiny_tokenizer, max_length=8, with_title=True)([long, DOCS[1]])
    assert batch.tokens.input_ids.shape == (2, 8)
    assert batch.tokens.input_ids[0, -1] == tiny_tokenizer.sep_token_id and batch.tokens.attention_mask[0].all()
