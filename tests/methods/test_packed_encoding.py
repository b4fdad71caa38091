"""Packed (padding-free) encoding (issue 23, item 4) against the padded path: the same embeddings, masked-LM
logits and gradients for every supported encoder family and for the methods that switch it on, the packed row
really free of padding, and a one-line error where an encoder cannot pack."""

from __future__ import annotations

import pytest
import torch
from conftest import _topic_texts
from transformers import (
    AutoTokenizer,
    BertConfig,
    BertForMaskedLM,
    CamembertConfig,
    CamembertModel,
    ElectraConfig,
    ElectraModel,
    LongformerConfig,
    LongformerModel,
    RobertaConfig,
    RobertaModel,
    XLMRobertaConfig,
    XLMRobertaModel,
)

from lit_docemb.commands import main
from lit_docemb.data.core.document import Document, Section
from lit_docemb.errors import BadArgument
from lit_docemb.models import EncoderSpec, HFEncoder, tokenizer_and_encoder
from lit_docemb.models.packing import PackedLayout, use_varlen_kernel

SIZES = {"vocab_size": 120, "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4,
         "intermediate_size": 64, "max_position_embeddings": 40, "type_vocab_size": 2}
FAMILIES = {"bert": (BertConfig, BertForMaskedLM), "roberta": (RobertaConfig, RobertaModel),
            "xlm-roberta": (XLMRobertaConfig, XLMRobertaModel), "camembert": (CamembertConfig, CamembertModel),
            "electra": (ElectraConfig, ElectraModel)}


def write_encoder(folder, family: str, **changes) -> str:
    config_class, model_class = FAMILIES[family]
    torch.manual_seed(0)
    model_class(config_class(**SIZES | changes)).save_pretrained(folder)
    return str(folder)


def padded_and_packed(folder: str, **encoder_args) -> tuple[HFEncoder, HFEncoder]:
    padded = HFEncoder(folder, **encoder_args).eval()  # eval: no dropout, so that the two can be compared
    packed = HFEncoder(folder, packed=True, **encoder_args).eval()
    packed.load_state_dict(padded.state_dict())
    return padded, packed


def ragged_batch(lengths: list[int], width: int, pad_id: int, seed: int = 0) -> tuple[torch.Tensor, ...]:
    """Token ids, attention mask and token types (B, width) of rows of the given lengths, padded on the right."""
    generator = torch.Generator().manual_seed(seed)
    mask = (torch.arange(width)[None] < torch.tensor(lengths)[:, None]).long()
    ids = torch.randint(5, SIZES["vocab_size"], (len(lengths), width), generator=generator)
    ids = ids.masked_fill(mask == 0, pad_id)
    token_types = torch.randint(0, 2, ids.shape, generator=generator) * mask
    return ids, mask, token_types


def outputs_and_gradients(encoder: HFEncoder, *inputs: torch.Tensor) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    encoder.zero_grad()
    output = encoder(*inputs)
    (output * torch.linspace(-1, 1, output.numel()).view_as(output)).sum().backward()
    return output.detach(), {name: p.grad.clone() for name, p in encoder.named_parameters() if p.grad is not None}


def assert_same(reference: tuple, other: tuple, tolerance: float = 1e-5) -> None:
    assert (reference[0] - other[0]).abs().max().item() <= tolerance
    assert reference[1].keys() == other[1].keys() and reference[1]
    for name, grad in reference[1].items():  # float sums in another order: relative to the gradient's size
        assert (grad - other[1][name]).abs().max().item() <= tolerance * max(grad.abs().max().item(), 1.0), name


@pytest.mark.parametrize("family", list(FAMILIES))
@pytest.mark.parametrize("pooling", ["mean", "cls"])
def test_packed_encoding_gives_the_padded_embeddings_and_gradients(tmp_path, family, pooling):
    folder = write_encoder(tmp_path, family, **({"embedding_size": 16} if family == "electra" else {}))
    padded, packed = padded_and_packed(folder, pooling=pooling)
    pad_id = padded.backbone.config.pad_token_id
    inputs = ragged_batch([5, 17, 1, 9, 17], width=17, pad_id=pad_id)
    reference, result = outputs_and_gradients(padded, *inputs), outputs_and_gradients(packed, *inputs)
    assert_same(reference, result)
    wrong = packed.position_offset  # positions are the padded path's: shifted by one they change the embeddings
    packed.position_offset = wrong + 1
    assert (outputs_and_gradients(packed, *inputs)[0] - reference[0]).abs().max().item() > 1e-3
    packed.position_offset = wrong
    other_types = (inputs[0], inputs[1], 1 - inputs[2])  # token types reach the packed row as well
    assert (outputs_and_gradients(packed, *other_types)[0] - reference[0]).abs().max().item() > 1e-3


def test_the_backbone_sees_one_row_of_real_tokens_only(tmp_path):
    padded, packed = padded_and_packed(write_encoder(tmp_path, "bert"))
    seen = []
    packed.backbone.embeddings.register_forward_hook(lambda module, args, kwargs_output: seen.append(
        kwargs_output.shape))
    ids, mask, _ = ragged_batch([3, 11, 6], width=11, pad_id=0)
    packed(ids, mask)
    assert seen == [torch.Size([1, 3 + 11 + 6, SIZES["hidden_size"]])]


def test_packed_masked_lm_logits_equal_the_padded_ones(tmp_path):
    padded, packed = padded_and_packed(write_encoder(tmp_path, "bert"), with_mlm_head=True)
    ids, mask, _ = ragged_batch([7, 12, 4], width=12, pad_id=0)
    positions = (torch.rand(ids.shape, generator=torch.Generator().manual_seed(1)) < 0.4) & mask.bool()
    assert positions.any()
    for encoder_positions in (positions, None):
        expected = padded.mlm_logits(ids, mask, encoder_positions)
        got = packed.mlm_logits(ids, mask, encoder_positions)
        if encoder_positions is None:  # all positions: compare the real tokens (padded ones are not encoded)
            expected, got = expected[mask.bool()], got[mask.bool()]
        assert (expected - got).abs().max().item() <= 1e-5


def test_layout_packs_and_unpacks_and_refuses_empty_rows():
    mask = torch.tensor([[1, 1, 0, 0], [1, 1, 1, 1], [1, 0, 0, 0]])
    layout = PackedLayout.from_mask(mask)
    assert layout.cu_seq_lens.tolist() == [0, 2, 6, 7] and layout.max_length == 4
    assert layout.columns.tolist() == [0, 1, 0, 1, 2, 3, 0]
    values = torch.arange(12.0).view(3, 4)
    assert layout.pack(values).tolist() == [0, 1, 4, 5, 6, 7, 8]
    assert torch.equal(layout.unpack(layout.pack(values)), values * mask)
    with pytest.raises(ValueError, match="at least one token"):
        PackedLayout.from_mask(torch.tensor([[1, 1], [0, 0]]))


def test_an_encoder_that_cannot_pack_is_refused_in_one_line(tmp_path, no_dropout_encoder_dir):
    longformer = tmp_path / "longformer"
    LongformerModel(LongformerConfig(**SIZES | {"attention_window": 4})).save_pretrained(longformer)
    with pytest.raises(BadArgument, match=r"^packed: .*longformer.*BERT-family encoders only.*set it to false$"):
        HFEncoder(str(longformer), packed=True)
    with pytest.raises(BadArgument, match=r"^packed: .*not 'eager'"):
        HFEncoder(no_dropout_encoder_dir, packed=True, attn_implementation="eager")
    with pytest.raises(BadArgument, match=r"^packed_encoding: "):  # a method's key is named as the method's
        tokenizer_and_encoder(no_dropout_encoder_dir, packed=True, attn_implementation="eager",
                              packed_argument="packed_encoding")


def test_the_cli_names_the_method_key_when_the_encoder_cannot_pack(tiny_encoder_dir, corpus_jsonl, tmp_path, capsys):
    tokenizer = AutoTokenizer.from_pretrained(tiny_encoder_dir)
    LongformerModel(LongformerConfig(**SIZES | {"vocab_size": len(tokenizer), "attention_window": 4})).save_pretrained(
        tmp_path / "longformer")
    tokenizer.save_pretrained(tmp_path / "longformer")
    with pytest.raises(SystemExit) as stopped:
        main(["fit", "--model=lit_docemb.methods.DocSplit", f"--model.encoder.name={tmp_path / 'longformer'}",
              "--model.encoder.max_length=32", "--model.encoder.packed=true", "--data=lit_docemb.data.JSONLDataModule",
              f"--data.paths=[{corpus_jsonl}]", "--trainer.accelerator=cpu", "--trainer.max_steps=1",
              f"--trainer.default_root_dir={tmp_path}"])
    assert stopped.value.code == 2
    errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error")]
    assert errors == [f"error: model.init_args.encoder.packed: encoder {str(tmp_path / 'longformer')!r} (longformer) "
                      f"cannot encode packed sequences (BERT-family encoders only: bert, roberta, xlm-roberta, "
                      f"camembert, electra): set it to false"]


def documents(count: int) -> list[Document]:
    texts = [text for _, text in _topic_texts()]
    return [Document(f"d{i}", f"Title {i}", [Section("", texts[i][:150 + 90 * i]), Section("b", texts[i + 1][:300])])
            for i in range(count)]


def method_losses_and_gradients(model) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    torch.manual_seed(0)
    batch = model.collator("fit")(documents(4))
    model.zero_grad()
    total = sum(value for name, value in model.losses(batch).items() if name.endswith("_loss"))
    total.backward()
    return total.detach(), {name: p.grad.clone() for name, p in model.named_parameters() if p.grad is not None}


@pytest.mark.parametrize("method", ["GraphRoBERTa", "DocSplit", "CoLDE"])
def test_methods_train_the_same_with_packed_encoding(no_dropout_encoder_dir, method):
    from lit_docemb import methods

    arguments = {"GraphRoBERTa": {"node_dim": 16, "passages": {"words_per_passage": 12, "max_passage_tokens": 32},
                                  "attention_dropout": 0.0, "cache_passages": False},
                 "DocSplit": {"mlm_probability": 0.3},
                 "CoLDE": {"chunk_tokens": 24, "num_heads": 2, "lstm_output_size": 16, "projection_size": 8,
                           "chunk_embeddings": 16}}[method]
    length = {"max_length": 48} if method == "DocSplit" else {}  # the others cut passages and chunks themselves
    torch.manual_seed(0)
    padded = getattr(methods, method)(EncoderSpec(no_dropout_encoder_dir, **length), **arguments).eval()
    packed = getattr(methods, method)(EncoderSpec(no_dropout_encoder_dir, packed=True, **length), **arguments).eval()
    packed.load_state_dict(padded.state_dict())
    assert_same(method_losses_and_gradients(padded), method_losses_and_gradients(packed))


@pytest.mark.cuda  # deselected with one summary line where torch sees no GPU (tests/conftest.py)
def test_varlen_kernel_on_cuda_matches_the_padded_path_in_bf16(tmp_path):
    padded, packed = (encoder.cuda() for encoder in padded_and_packed(write_encoder(tmp_path, "bert")))
    inputs = tuple(x.cuda() for x in ragged_batch([5, 17, 1, 9, 17], width=17, pad_id=0))
    assert use_varlen_kernel(torch.zeros(1, device="cuda", dtype=torch.bfloat16))
    results = []
    for encoder in (padded, packed):
        with torch.autocast("cuda", dtype=torch.bfloat16):
            output = encoder(*inputs).float()  # (B, D)
        output.square().sum().backward()
        results.append((output.detach(), torch.cat([p.grad.flatten() for p in encoder.parameters()
                                                    if p.grad is not None])))
    (reference, reference_gradient), (result, gradient) = results
    assert (reference - result).abs().max().item() <= 3e-2 * reference.abs().max().item()  # bf16 rounding
    assert torch.nn.functional.cosine_similarity(reference_gradient, gradient, dim=0).item() > 0.99
