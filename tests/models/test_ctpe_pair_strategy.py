"""CTPE's deep-LM pair strategies (§4.3: the two parts "trained separately or together"): ``together`` encodes each
pair as one sequence and cuts the states back, checked against each pair run alone; causal and bidirectional tiny
models built from config (no hub access), and CTPE trained and embedded with both strategies."""

from __future__ import annotations

import pytest
import torch
from transformers import AutoTokenizer, GPT2Config, GPT2Model

from lit_docemb.data.core.document import Document, Section
from lit_docemb.errors import BadArgument
from lit_docemb.methods import CTPE, TransformerTokens
from lit_docemb.models.ctpe import FrozenTransformerStates


@pytest.fixture(scope="module")
def tiny_gpt2_dir(tiny_encoder_dir, tmp_path_factory) -> str:
    """A 2-layer, 32-dim GPT-2 (random weights, 64 positions) with the tiny encoder's tokenizer."""
    folder = tmp_path_factory.mktemp("tiny_gpt2")
    torch.manual_seed(0)
    GPT2Model(GPT2Config(vocab_size=1000, n_positions=64, n_embd=32, n_layer=2, n_head=2)).save_pretrained(folder)
    AutoTokenizer.from_pretrained(tiny_encoder_dir).save_pretrained(folder)
    return str(folder)


def padded_pairs(lengths: list[tuple[int, int]], seed: int = 0):
    """Right-padded former and latter ids (B, Tf), (B, Tl) with the given lengths, and their masks."""
    generator = torch.Generator().manual_seed(seed)
    t_f, t_l = max(f for f, _ in lengths), max(b for _, b in lengths)
    former, latter = torch.zeros(len(lengths), t_f, dtype=torch.long), torch.zeros(len(lengths), t_l, dtype=torch.long)
    for row, (f, b) in enumerate(lengths):
        former[row, :f] = torch.randint(5, 1000, (f,), generator=generator)
        latter[row, :b] = torch.randint(5, 1000, (b,), generator=generator)
    return former, (former > 0).long(), latter, (latter > 0).long()


def alone(states: FrozenTransformerStates, ids: torch.Tensor) -> torch.Tensor:
    """The states (T, E) of one unpadded sequence, run by itself."""
    return states(ids.unsqueeze(0), torch.ones(1, len(ids), dtype=torch.long))[0]


@pytest.mark.parametrize("model", ["bert", "gpt2"])
def test_together_is_each_pair_run_as_one_sequence(model, tiny_encoder_dir, tiny_gpt2_dir):
    states = FrozenTransformerStates(tiny_encoder_dir if model == "bert" else tiny_gpt2_dir, "together")
    former, former_mask, latter, latter_mask = padded_pairs([(3, 5), (6, 2), (1, 7)])
    former_states, latter_states = states.pair_states(former, former_mask, latter, latter_mask)
    assert former_states.shape == (3, 6, 32) and latter_states.shape == (3, 7, 32)
    for row in range(3):
        f, b = int(former_mask[row].sum()), int(latter_mask[row].sum())
        reference = alone(states, torch.cat([former[row, :f], latter[row, :b]]))  # (f + b, E)
        torch.testing.assert_close(former_states[row, :f], reference[:f], atol=1e-5, rtol=1e-4)
        torch.testing.assert_close(latter_states[row, :b], reference[f:], atol=1e-5, rtol=1e-4)
        separate_former, separate_latter = alone(states, former[row, :f]), alone(states, latter[row, :b])
        assert not torch.allclose(latter_states[row, :b], separate_latter, atol=1e-4)  # it sees the former part
        if model == "gpt2":  # left to right: the former part never sees the latter one
            torch.testing.assert_close(former_states[row, :f], separate_former, atol=1e-5, rtol=1e-4)
        else:
            assert not torch.allclose(former_states[row, :f], separate_former, atol=1e-4)


def documents() -> list[Document]:
    words = "ocean tide wave salt harbour ship bread flour oven yeast butter dough".split()
    return [Document(f"d{i}", title=f"{words[i]} {words[(i + 3) % 12]}",
                     sections=[Section("Abstract", " ".join(words[(i + j) % 12] for j in range(9)))])
            for i in range(8)]


@pytest.mark.parametrize("model", ["bert", "gpt2"])
def test_ctpe_trains_and_embeds_with_both_strategies(model, tiny_encoder_dir, tiny_gpt2_dir):
    encoder = tiny_encoder_dir if model == "bert" else tiny_gpt2_dir
    docs, pairs = documents(), {}
    for strategy in ("separately", "together"):
        torch.manual_seed(0)  # the same CNN weights for both strategies
        method = CTPE(TransformerTokens(encoder, strategy), n_filters=4, max_length=16)
        method.prepare(docs)
        loss = method.total_loss(method.losses(method.collator("fit")(docs)))
        loss.backward()
        assert torch.isfinite(loss) and all(p.grad is not None for p in method.encoder.latter.parameters())
        assert all(p.grad is None for p in method.encoder.token_vectors.parameters())
        method.eval()
        with torch.no_grad():
            pairs[strategy] = method.embed(method.collator("predict")(docs))  # (B, 2, D)
    assert pairs["separately"].shape == pairs["together"].shape == (8, 2, 16)
    assert not torch.allclose(pairs["separately"][:, 1], pairs["together"][:, 1])  # latter parts see the former
    if model == "gpt2":
        torch.testing.assert_close(pairs["separately"][:, 0], pairs["together"][:, 0], atol=1e-5, rtol=1e-4)


def test_together_needs_room_for_both_parts_and_a_known_strategy(tiny_gpt2_dir):
    CTPE(TransformerTokens(tiny_gpt2_dir, "together"), n_filters=4, max_length=32)  # 2 x 32 = the 64 positions
    with pytest.raises(BadArgument, match=r"max_length: 33 x 2 \(pair_strategy together\) exceeds the 64 positions"):
        CTPE(TransformerTokens(tiny_gpt2_dir, "together"), n_filters=4, max_length=33)
    CTPE(TransformerTokens(tiny_gpt2_dir, "separately"), n_filters=4, max_length=64)
    with pytest.raises(BadArgument, match="embeddings.init_args.pair_strategy: must be 'separately' or 'together'"):
        TransformerTokens(tiny_gpt2_dir, "jointly")


def test_a_model_without_attention_mask_runs_on_right_padded_batches(tiny_gpt2_dir, tmp_path):
    """Transformer-XL's forward takes no attention_mask (transformers 4.x): a left-to-right stand-in registered with
    AutoModel, whose forward has no mask either, loads through the same path and gives each row's states as that row
    run alone, both strategies (right padding comes after every real token)."""
    from transformers import AutoConfig, AutoModel, PretrainedConfig, PreTrainedModel

    class NoMaskConfig(PretrainedConfig):
        model_type = "lit-docemb-test-no-mask"

        def __init__(self, gpt2: dict | None = None, **kwargs):
            super().__init__(**kwargs)
            self.gpt2 = gpt2 or {}
            self.hidden_size = self.gpt2.get("n_embd", 32)

    class NoMaskModel(PreTrainedModel):
        config_class = NoMaskConfig

        def __init__(self, config):
            super().__init__(config)
            self.inner = GPT2Model(GPT2Config(**config.gpt2))
            self.post_init()

        def forward(self, input_ids=None, output_hidden_states=None, return_dict=None):
            return self.inner(input_ids=input_ids)

    AutoConfig.register(NoMaskConfig.model_type, NoMaskConfig, exist_ok=True)
    AutoModel.register(NoMaskConfig, NoMaskModel, exist_ok=True)
    gpt2 = GPT2Model.from_pretrained(tiny_gpt2_dir)
    wrapped = NoMaskModel(NoMaskConfig(gpt2=gpt2.config.to_dict()))
    wrapped.inner.load_state_dict(gpt2.state_dict())
    wrapped.save_pretrained(tmp_path / "no_mask")
    for strategy in ("separately", "together"):
        states = FrozenTransformerStates(str(tmp_path / "no_mask"), strategy)
        assert not states.takes_attention_mask
        former, former_mask, latter, latter_mask = padded_pairs([(3, 5), (6, 2)])
        former_states = states.pair_states(former, former_mask, latter, latter_mask)[0] if strategy == "together" \
            else states(former, former_mask)
        reference = FrozenTransformerStates(tiny_gpt2_dir)
        assert reference.takes_attention_mask
        for row in range(2):
            f = int(former_mask[row].sum())
            torch.testing.assert_close(former_states[row, :f], alone(reference, former[row, :f]), atol=1e-5,
                                       rtol=1e-4)
