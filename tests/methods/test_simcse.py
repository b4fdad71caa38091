"""SimCSE_long's method (DocSplit's baseline, unsupervised SimCSE on whole documents): the two views are the same
tokens, dropout is the only noise, the loss is InfoNCE (cosine / 0.05, in-batch negatives) checked against a plain
reference, the masked-LM term is optional, and a few steps move the encoder."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from corpus_files import labelled_docs

from lit_docemb.methods import SimCSE
from lit_docemb.methods.retention import Retention
from lit_docemb.models import EncoderSpec


def test_both_views_are_the_same_document_and_the_mlm_copy_is_optional(tiny_encoder_dir):
    docs = labelled_docs(4)
    batch = SimCSE(EncoderSpec(tiny_encoder_dir, max_length=32)).collator("fit")(docs)
    assert torch.equal(batch.view_a.input_ids, batch.view_b.input_ids) and batch.mlm is None and len(batch) == 4
    with_mlm = SimCSE(EncoderSpec(tiny_encoder_dir, max_length=32), mlm_weight=0.1)
    masked = with_mlm.collator("validate")(docs)
    assert (masked.mlm.labels != -100).any() and torch.equal(masked.mlm.labels,
                                                             with_mlm.collator("validate")(docs).mlm.labels)


def test_dropout_is_the_only_noise_and_the_loss_is_info_nce_on_the_two_passes(tiny_encoder_dir,
                                                                                no_dropout_encoder_dir):
    docs = labelled_docs(6)
    model = SimCSE(EncoderSpec(tiny_encoder_dir, max_length=32)).train()
    batch = model.collator("fit")(docs)
    torch.manual_seed(0)
    first, second = (model.encoder(batch.view_a.input_ids, batch.view_a.attention_mask) for _ in range(2))
    assert not torch.allclose(first, second)  # dropout on: the two passes of a document differ
    plain = SimCSE(EncoderSpec(no_dropout_encoder_dir, max_length=32)).train()
    loss = plain.losses(batch)["info_nce_loss"]
    embeddings = plain.encoder(batch.view_a.input_ids, batch.view_a.attention_mask)  # (B, D), both views alike
    unit = F.normalize(embeddings.float(), dim=-1)
    reference = F.cross_entropy(unit @ unit.T / 0.05, torch.arange(len(docs)))  # (B, B) logits, positive i
    assert torch.allclose(loss, reference, atol=1e-5)


def test_a_few_steps_move_the_encoder_and_the_mlm_head(tiny_encoder_dir):
    torch.manual_seed(0)
    model = SimCSE(EncoderSpec(tiny_encoder_dir, max_length=32), mlm_weight=0.1).train()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    batch = model.collator("fit")(labelled_docs(8))
    terms = model.losses(batch)
    assert set(terms) >= {"info_nce_loss", "mlm_loss"}
    model.total_loss(terms).backward()
    optimizer.step()
    moved = [k for k, v in model.state_dict().items() if not torch.equal(before[k], v)]
    assert any("mlm" in k or "cls.predictions" in k for k in moved) and len(moved) > len(before) // 2


def test_the_default_anchors_to_the_starting_encoder_and_the_paper_config_trains_simcse_alone(tiny_encoder_dir):
    spec = EncoderSpec(tiny_encoder_dir, max_length=32)
    model = SimCSE(spec).train()
    model._apply_retention()  # what setup("fit") does: the frozen copy of the starting encoder
    batch = model.collator("fit")(labelled_docs(4))
    with model.anchor.capture():
        terms = model.losses(batch)
    terms |= model.anchor.terms()
    assert {"info_nce_loss", "anchor_loss"} <= set(terms) and float(terms["anchor_loss"]) > 0  # dropout: off it
    assert torch.isclose(model.total_loss(terms), terms["info_nce_loss"] + terms["anchor_loss"])
    paper = SimCSE(spec, retention=Retention(anchor_weight=0.0))  # configs/docsplit/simcse_long_wikipedia.yaml
    paper._apply_retention()
    assert paper.anchor is None
