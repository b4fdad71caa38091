"""MaskedLanguageModelling (DECA's BERT-mlm / LF-mlm baselines): the masked-LM loss alone, equal to Hugging Face's own
masked-LM loss on the same masked batch; training masks anew, validation masks the same way every time; a document's
vector is the encoder's [CLS] over its text."""

from __future__ import annotations

import pytest
import torch
from transformers import AutoModelForMaskedLM

from lit_docemb.data.core.batches import MaskedTokenBatch
from lit_docemb.data.core.document import Document, Section
from lit_docemb.errors import BadArgument
from lit_docemb.eval.embedding import embed_documents
from lit_docemb.methods import MaskedLanguageModelling
from lit_docemb.methods.retention import Retention
from lit_docemb.models import EncoderSpec

DOCUMENTS = [Document(id=f"d{i}", title="", sections=[Section("", text)]) for i, text in enumerate([
    "The tide rises twice a day and the moon pulls the water towards the shore.",
    "Sailors watch the charts and the wind before they leave the harbour at dawn.",
    "Gravity of the sun also matters, and spring tides are the largest of the year.",
])]


@pytest.fixture
def method(no_dropout_encoder_dir) -> MaskedLanguageModelling:
    torch.manual_seed(0)
    return MaskedLanguageModelling(EncoderSpec(no_dropout_encoder_dir, max_length=32), mlm_probability=0.3)


def test_the_loss_is_hugging_face_masked_lm_loss(method, no_dropout_encoder_dir):
    torch.manual_seed(3)
    batch = method.collator("fit")(DOCUMENTS)
    assert isinstance(batch, MaskedTokenBatch) and (batch.labels != -100).any()
    terms = method.losses(batch)
    assert set(terms) == {"mlm_loss"}  # masked LM alone: no contrastive term
    reference = AutoModelForMaskedLM.from_pretrained(no_dropout_encoder_dir)
    reference.load_state_dict(method.encoder.model.state_dict(), strict=False)
    expected = reference(input_ids=batch.input_ids, attention_mask=batch.attention_mask, labels=batch.labels).loss
    torch.testing.assert_close(terms["mlm_loss"], expected, atol=1e-5, rtol=1e-5)


def test_training_masks_anew_and_validation_the_same_way(method):
    torch.manual_seed(1)
    first, second = method.collator("fit")(DOCUMENTS), method.collator("fit")(DOCUMENTS)
    assert not torch.equal(first.labels, second.labels)
    validation = [method.collator("validate")(DOCUMENTS) for _ in range(2)]
    assert torch.equal(validation[0].labels, validation[1].labels)
    assert torch.equal(validation[0].input_ids, validation[1].input_ids)
    real = first.attention_mask.bool().sum() - 2 * len(DOCUMENTS)  # [CLS] and [SEP] are never chosen
    assert 0 < int((first.labels != -100).sum()) < int(real)


def test_a_step_moves_the_encoder_and_the_vector_is_the_cls_of_the_text(method):
    text = method.tokenizer(DOCUMENTS[0].text, max_length=32, truncation=True, return_tensors="pt")
    with torch.no_grad():
        before = method.encoder(text["input_ids"], text["attention_mask"])
    torch.testing.assert_close(embed_documents(method, DOCUMENTS[:1]), before, atol=1e-5, rtol=1e-5)
    optimizer = torch.optim.AdamW(method.parameters(), lr=1e-2)
    method.total_loss(method.losses(method.collator("fit")(DOCUMENTS))).backward()
    optimizer.step()
    assert not torch.allclose(embed_documents(method, DOCUMENTS[:1]), before, atol=1e-4)


def test_a_masking_rate_outside_0_1_is_refused(no_dropout_encoder_dir):
    with pytest.raises(BadArgument, match="mlm_probability"):
        MaskedLanguageModelling(EncoderSpec(no_dropout_encoder_dir, max_length=32), mlm_probability=0.0)


def test_the_encoder_block_is_saved_as_plain_data_and_rebuilds_the_method(method):
    saved = method.hparams["encoder"]
    assert saved == {"class_path": "lit_docemb.models.EncoderSpec",
                     "init_args": method.encoder_spec.arguments()}
    again = MaskedLanguageModelling(saved, mlm_probability=0.3)
    assert again.encoder_spec.arguments() == method.encoder_spec.arguments()


def test_an_option_it_does_not_use_is_refused_under_its_key(no_dropout_encoder_dir):
    with pytest.raises(BadArgument, match=r"^encoder\.instruction: MaskedLanguageModelling does not use it"):
        MaskedLanguageModelling(EncoderSpec(no_dropout_encoder_dir, instruction="query: ", max_length=32))


def test_by_default_its_embeddings_are_anchored_to_the_starting_encoder(no_dropout_encoder_dir):
    spec = EncoderSpec(no_dropout_encoder_dir, max_length=32)
    method = MaskedLanguageModelling(spec, mlm_probability=0.3)
    assert method.retention.anchor_weight == 1.0
    method._apply_retention()  # what setup("fit") does
    batch = method.collator("fit")(DOCUMENTS)

    def terms():
        with method.anchor.capture():
            found = method.losses(batch)
        return found | method.anchor.terms()

    assert set(terms()) == {"mlm_loss", "anchor_loss"}
    assert float(terms()["anchor_loss"]) < 1e-6  # the starting weights, no dropout: on the anchor
    optimizer = torch.optim.AdamW(method.parameters(), lr=1e-2)
    method.total_loss(terms()).backward()
    optimizer.step()
    assert float(terms()["anchor_loss"]) > 1e-4  # moved away, the term pulls back

    alone = MaskedLanguageModelling(spec, retention=Retention(anchor_weight=0.0))  # the DECA configs: the paper's loss
    alone._apply_retention()
    assert alone.anchor is None and set(alone.losses(batch)) == {"mlm_loss"}


def test_a_checkpoint_without_a_masked_lm_head_trains_the_fresh_head_first_by_default(tiny_encoder_dir,
                                                                                       headless_encoder_dir):
    fresh = MaskedLanguageModelling(EncoderSpec(headless_encoder_dir, max_length=32))
    assert fresh.encoder.fresh_head
    assert (fresh.retention.anchor_weight, fresh.retention.head_warmup_steps,
            fresh.retention.head_learning_rate_scale) == (5.0, 30, 300.0)
    kept = MaskedLanguageModelling(EncoderSpec(tiny_encoder_dir, max_length=32))  # its checkpoint has the head
    assert not kept.encoder.fresh_head
    assert (kept.retention.anchor_weight, kept.retention.head_warmup_steps,
            kept.retention.head_learning_rate_scale) == (1.0, 0, 1.0)
    chosen = MaskedLanguageModelling(EncoderSpec(headless_encoder_dir, max_length=32),
                                     retention=Retention(anchor_weight=0.0))  # a configured retention is kept
    assert chosen.retention.head_warmup_steps == 0
