"""MaskedDocumentCollator (lit_docemb/views/masked_language_modelling.py): BERT-masked whole documents, the mask
from torch's RNG in training and from the first document's id in validation."""

from __future__ import annotations

import torch

from lit_docemb.data.core.document import Document, Section
from lit_docemb.views.masked_language_modelling import MaskedDocumentCollator

DOCS = [Document(f"d{i}", title="Harbour", sections=[Section("", "The ocean tide moves ships and salt water. " * 3)])
        for i in range(4)]


def collator(tiny_tokenizer, deterministic: bool) -> MaskedDocumentCollator:
    return MaskedDocumentCollator(tiny_tokenizer, 32, with_title=True, mlm_probability=0.3, deterministic=deterministic)


def test_labels_hold_the_original_ids_where_a_token_was_chosen(tiny_tokenizer):
    collate = collator(tiny_tokenizer, deterministic=True)
    batch, tokens = collate(DOCS), collate.tokens(DOCS)
    chosen = batch.labels != -100
    assert 0.1 < chosen.sum() / tokens.attention_mask.sum() < 0.5
    assert torch.equal(batch.labels[chosen], tokens.input_ids[chosen])
    assert torch.equal(batch.input_ids[~chosen], tokens.input_ids[~chosen])  # only chosen positions change
    assert (batch.input_ids[chosen] == tiny_tokenizer.mask_token_id).float().mean() > 0.5  # 80% become [MASK]
    assert torch.equal(batch.attention_mask, tokens.attention_mask)


def test_validation_masks_by_the_first_id_and_training_by_torchs_rng(tiny_tokenizer):
    validation = collator(tiny_tokenizer, deterministic=True)
    torch.manual_seed(0)
    first = validation(DOCS)
    torch.manual_seed(1)
    assert torch.equal(validation(DOCS).labels, first.labels)
    assert not torch.equal(validation(DOCS[1:] + DOCS[:1]).labels, first.labels)  # another first id, another mask
    training = collator(tiny_tokenizer, deterministic=False)
    torch.manual_seed(0)
    drawn = training(DOCS)
    assert not torch.equal(training(DOCS).labels, drawn.labels)  # every pass masks anew
    torch.manual_seed(0)
    assert torch.equal(training(DOCS).labels, drawn.labels)  # as the seeded loader repeats it
