"""Longformer's [CLS] global attention (``first_token_global_attention``) on a tiny Longformer built from config."""

from __future__ import annotations

import pytest
import torch
from transformers import AutoTokenizer, LongformerConfig, LongformerForMaskedLM

from lit_docemb.errors import BadArgument
from lit_docemb.methods import DocSplit
from lit_docemb.models import HFEncoder
from lit_docemb.models import EncoderSpec


@pytest.fixture(scope="module")
def tiny_longformer_dir(tiny_encoder_dir, tmp_path_factory) -> str:
    tokenizer = AutoTokenizer.from_pretrained(tiny_encoder_dir)
    config = LongformerConfig(vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                              intermediate_size=64, attention_window=4, max_position_embeddings=70,
                              pad_token_id=tokenizer.pad_token_id, hidden_dropout_prob=0.0,
                              attention_probs_dropout_prob=0.0)
    path = tmp_path_factory.mktemp("tiny_longformer")
    torch.manual_seed(0)
    LongformerForMaskedLM(config).save_pretrained(path)
    tokenizer.save_pretrained(path)
    return str(path)


def test_the_first_token_attends_globally_only_when_asked(tiny_longformer_dir):
    local = HFEncoder(tiny_longformer_dir, pooling="cls", attn_implementation=None).eval()
    global_ = HFEncoder(tiny_longformer_dir, pooling="cls", attn_implementation=None,
                        first_token_global_attention=True).eval()
    global_.load_state_dict(local.state_dict())
    ids = torch.randint(5, 1000, (2, 24))
    ids[:, 0] = 2  # [CLS]
    mask = torch.ones_like(ids)
    with torch.no_grad():
        far = ids.clone()
        far[:, -1] = (far[:, -1] + 1) % 995 + 5  # a token outside [CLS]'s local window
        local_cls, local_far = local(ids, mask), local(far, mask)
        global_cls, global_far = global_(ids, mask), global_(far, mask)
    # with global attention [CLS] sees the last token; in its local window it does not, through 2 layers of 4
    assert not torch.allclose(global_cls, global_far)
    assert torch.allclose(local_cls, local_far)


def test_an_encoder_without_global_attention_refuses_it(tiny_encoder_dir, tiny_longformer_dir):
    with pytest.raises(BadArgument, match="first_token_global_attention.*has no global attention"):
        DocSplit(EncoderSpec(tiny_encoder_dir, first_token_global_attention=True, max_length=32))
    model = DocSplit(EncoderSpec(tiny_longformer_dir, first_token_global_attention=True, max_length=32))
    assert model.encoder.first_token_global_attention
