"""The fast paths of issue 12 against their plain references: the guards' finiteness check, length-bucketed
passage encoding, SDPA attention by default, and ``torch.compile`` of the encoder."""

from __future__ import annotations

import pytest
import torch

from lit_docemb.data.core.batches import TokenBatch
from lit_docemb.methods.guards import all_finite, finite_by_max_norm, finite_on_device
from lit_docemb.data import PassageSpec
from lit_docemb.models import EncoderSpec


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64])
def test_all_finite_agrees_with_an_elementwise_check(dtype):
    big = torch.finfo(dtype).max
    cases = [
        [torch.randn(5, 3), torch.randn(7)],
        [torch.randn(5, 3), torch.tensor([1.0, float("nan")])],
        [torch.tensor([float("inf"), -float("inf")])],  # the sum is NaN
        [torch.tensor([-float("inf")]), torch.randn(4)],
        [torch.full((4,), big, dtype=dtype)],  # finite elements whose sum overflows: still finite
        [torch.zeros(0), torch.ones(2)],
        [],
    ]
    for tensors in cases:
        tensors = [t.to(dtype) for t in tensors]
        expected = all(bool(torch.isfinite(t).all()) for t in tensors)
        assert all_finite(tensors) is expected, tensors
        flag = finite_on_device(tensors)
        assert flag.dtype == torch.bool and flag.dim() == 0 and bool(flag) is expected, tensors
        if tensors:  # the accelerator's check (fused there), run on the CPU
            assert bool(finite_by_max_norm(tensors)) is expected, tensors


def test_length_bucketed_passages_give_the_same_document_embeddings_and_gradients(no_dropout_encoder_dir):
    from lit_docemb.data.core.document import Document, Section
    from lit_docemb.methods import GraphRoBERTa

    torch.manual_seed(0)
    # sections of 1-9 sentences: full passages and short section tails, passage lengths from 5 to 30 tokens
    docs = [Document(f"d{i}", "T", [Section(f"S{s}", " ".join(f"Sentence {j} of {s} has words." for j in range(
        1 + (3 * i + s) % 9))) for s in range(1 + i % 4)]) for i in range(8)]
    embeddings, gradients = [], []
    for bucket in (False, True):
        torch.manual_seed(0)
        model = GraphRoBERTa(EncoderSpec(no_dropout_encoder_dir), node_dim=16,
                             passages=PassageSpec(words_per_passage=12, max_passage_tokens=32), attention_dropout=0.0,
                             passage_token_budget=96,
                             bucket_passages=bucket)
        batch = model.collator("predict")(docs)
        lengths = batch.graphs.passages.attention_mask.sum(1)
        assert lengths.min() < lengths.max()  # section tails are shorter: bucketing changes the sub-batches
        out = model.embed(batch)  # (G, 16)
        out.square().sum().backward()
        embeddings.append(out.detach())
        gradients.append({n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None})
    assert (embeddings[0] - embeddings[1]).abs().max().item() <= 1e-5
    assert gradients[0].keys() == gradients[1].keys() and gradients[0]
    for name, grad in gradients[0].items():  # float sums in another order: relative to the gradient's size
        scale = max(grad.abs().max().item(), 1.0)
        assert (grad - gradients[1][name]).abs().max().item() <= 1e-5 * scale, name


def test_bucketed_sub_batches_pad_less():
    from lit_docemb.data.core.tokens import split_token_batch

    mask = torch.zeros(12, 40, dtype=torch.long)
    for row, length in enumerate([40, 3, 5, 38, 4, 6, 39, 2, 5, 37, 4, 3]):
        mask[row, :length] = 1
    tokens = TokenBatch(mask.clone(), mask)
    padding = {sort: sum(int((p.attention_mask == 0).sum()) for p in split_token_batch(tokens, 120, sort)[0])
               for sort in (False, True)}
    assert padding == {False: 462 - 186, True: 261 - 186}  # 4 sub-batches of 3 rows; 2 of 3 and 1 of 6 rows


def test_encoders_use_sdpa_attention_by_default_and_fall_back_cleanly(tiny_encoder_dir, caplog):
    from lit_docemb.models import HFEncoder

    assert HFEncoder(tiny_encoder_dir).model.config._attn_implementation == "sdpa"
    fallback = HFEncoder(tiny_encoder_dir, attn_implementation="no_such_kernel")  # an unsupported kernel
    assert fallback.model.config._attn_implementation != "no_such_kernel"
    assert "falling back to the default attention implementation" in caplog.text


def test_compile_flag_compiles_the_transformer_and_keeps_its_weights(tiny_encoder_dir):
    from lit_docemb.methods import DocSplit

    eager = DocSplit(EncoderSpec(tiny_encoder_dir, max_length=32))
    compiled = DocSplit(EncoderSpec(tiny_encoder_dir, compile=True, max_length=32))
    assert compiled.encoder.backbone._compiled_call_impl is not None
    assert eager.encoder.backbone._compiled_call_impl is None
    assert eager.state_dict().keys() == compiled.state_dict().keys()  # checkpoints interchange


@pytest.mark.slow
def test_compiled_encoder_gives_the_same_embeddings(no_dropout_encoder_dir):
    from lit_docemb.models import HFEncoder

    torch.manual_seed(0)
    eager = HFEncoder(no_dropout_encoder_dir, pooling="mean").eval()
    compiled = HFEncoder(no_dropout_encoder_dir, pooling="mean", compile=True).eval()
    compiled.load_state_dict(eager.state_dict())
    input_ids = torch.randint(5, 1000, (3, 12))
    attention_mask = torch.ones_like(input_ids)
    attention_mask[1, 7:] = 0
    with torch.no_grad():
        expected = eager(input_ids, attention_mask)
        assert (compiled(input_ids, attention_mask) - expected).abs().max().item() <= 1e-5
