"""Retention options (issue 22): identity-initialised heads, layer-wise learning rates, frozen layers, the anchoring
term, and each option's one-line error."""

from __future__ import annotations

import lightning as L
import pytest
import torch
from conftest import _topic_texts

from lit_docemb.commands import main
from lit_docemb.data import JSONLDataModule, PassageSpec
from lit_docemb.data.core.document import Document, Section
from lit_docemb.errors import ConfigError
from lit_docemb.methods import DECA, CoLDE, DocSplit, GraphRoBERTa, MaskedLanguageModelling
from lit_docemb.methods.retention import Retention, choose_alpha, interpolated_state, parameter_groups
from lit_docemb.models import EncoderSpec


def long_documents(n: int = 4) -> list[Document]:
    texts = [" ".join(t.split()[:40 + 60 * i]) for i, (_, t) in enumerate(_topic_texts()[:n])]
    short = Document("short", title="", sections=[Section("", "a few words of one passage")])
    return [Document(f"d{i}", title="", sections=[Section("", t)]) for i, t in enumerate(texts)] + [short]


def split_means(vectors: torch.Tensor, counts: torch.Tensor) -> torch.Tensor:
    return torch.stack([part.mean(0) for part in torch.split(vectors, counts.tolist())])


# --- identity-initialised heads -----------------------------------------------------------------------------------
@pytest.mark.parametrize("pooling", ["cls", "mean"])
def test_graph_roberta_identity_head_starts_as_the_mean_of_passage_vectors(tiny_encoder_dir, pooling):
    torch.manual_seed(0)
    method = GraphRoBERTa(EncoderSpec(tiny_encoder_dir, pooling=pooling), node_dim=32,
                          passages=PassageSpec(words_per_passage=12, max_passage_tokens=32), cache_passages=False,
                          head_init="identity").eval()
    batch = method.collator("predict")(long_documents())
    graphs = batch.graphs
    assert (graphs.passage_counts > 1).any() and (graphs.passage_counts == 1).any()
    with torch.no_grad():
        passages = method.model.encoder(graphs.passages.input_ids, graphs.passages.attention_mask)  # (P, H)
        documents = method.embed(batch)
    torch.testing.assert_close(documents, split_means(passages, graphs.passage_counts), atol=1e-6, rtol=0)


def test_graph_roberta_random_head_is_the_papers_and_identity_is_trainable(tiny_encoder_dir):
    torch.manual_seed(0)
    random_head = GraphRoBERTa(EncoderSpec(tiny_encoder_dir), node_dim=32,
                               passages=PassageSpec(words_per_passage=12, max_passage_tokens=32),
                               cache_passages=False, head_init="random").eval()
    batch = random_head.collator("predict")(long_documents())
    with torch.no_grad():
        passages = random_head.model.encoder(batch.graphs.passages.input_ids, batch.graphs.passages.attention_mask)
        assert not torch.allclose(random_head.embed(batch), split_means(passages, batch.graphs.passage_counts),
                                  atol=1e-3)
    identity = GraphRoBERTa(EncoderSpec(tiny_encoder_dir), node_dim=32,
                            passages=PassageSpec(words_per_passage=12, max_passage_tokens=32),
                            cache_passages=False, head_init="identity")
    identity.embed(batch).sum().backward()
    assert all(layer.lin.weight.grad.abs().sum() > 0 for layer in identity.model.layers)  # zero, not dead


@pytest.mark.parametrize(("node_dim", "built"), [(None, ("identity", 32)), (64, ("identity", 64)),
                                                  (16, ("random", 16))])
def test_graph_roberta_head_is_the_identity_by_default_where_its_size_allows(tiny_encoder_dir, node_dim, built):
    """``head_init: auto`` (the default): the identity head when the nodes are at least the encoder's size (32 here;
    ``node_dim: null`` is that size), the paper's random head otherwise; hparams keep what was built (export reads
    them)."""
    passages = PassageSpec(words_per_passage=12, max_passage_tokens=32)
    method = GraphRoBERTa(EncoderSpec(tiny_encoder_dir), node_dim=node_dim, passages=passages, cache_passages=False)
    assert (method.model.head_init, method.model.node_dim) == built
    assert (method.hparams.head_init, method.hparams.node_dim) == built
    if built[0] == "identity":
        batch = method.eval().collator("predict")(long_documents())
        with torch.no_grad():
            passage_vectors = method.model.encoder(batch.graphs.passages.input_ids,
                                                   batch.graphs.passages.attention_mask)
            means = split_means(passage_vectors, batch.graphs.passage_counts)  # (B, 32)
            assert torch.allclose(method.embed(batch)[:, :32], means, atol=1e-5)


def test_identity_graph_head_wider_than_the_encoder_keeps_dot_products(tiny_encoder_dir):
    torch.manual_seed(0)
    method = GraphRoBERTa(EncoderSpec(tiny_encoder_dir), node_dim=64,
                          passages=PassageSpec(words_per_passage=12, max_passage_tokens=32),
                          cache_passages=False, head_init="identity").eval()
    batch = method.collator("predict")(long_documents())
    with torch.no_grad():
        passages = method.model.encoder(batch.graphs.passages.input_ids, batch.graphs.passages.attention_mask)
        documents = method.embed(batch)
    expected = split_means(passages, batch.graphs.passage_counts)
    torch.testing.assert_close(documents[:, :32], expected, atol=1e-6, rtol=0)
    assert documents[:, 32:].abs().max() == 0


@pytest.mark.parametrize("aggregation", ["lstm", "mean"])
def test_colde_identity_aggregator_starts_as_the_mean_of_chunk_vectors(no_dropout_encoder_dir, aggregation):
    torch.manual_seed(0)
    method = CoLDE(EncoderSpec(no_dropout_encoder_dir), chunk_tokens=24, num_heads=2, lstm_output_size=16,
                   projection_size=8, chunk_embeddings=16, aggregation=aggregation, head_init="identity").eval()
    documents = [Document(f"d{i}", "", [Section("", t[:900])]) for i, (_, t) in enumerate(_topic_texts()[:4])]
    batch = method.collator("predict")(documents)
    chunks = batch.whole.sections
    assert (chunks.chunks_per_section > 1).all()
    with torch.no_grad():
        vectors = method.model.encoder(chunks.chunks.input_ids, chunks.chunks.attention_mask)  # the plain encoder
        embedded = method.embed(batch)
    torch.testing.assert_close(embedded, split_means(vectors, chunks.chunks_per_section), atol=1e-6, rtol=0)


def test_bad_head_init_values_are_one_line_errors(tiny_encoder_dir):
    with pytest.raises(ConfigError, match="^head_init: must be 'auto', 'random' or 'identity'"):
        GraphRoBERTa(EncoderSpec(tiny_encoder_dir), head_init="orthogonal")
    with pytest.raises(ConfigError, match="^node_dim: must be >= the encoder's hidden size 32"):
        GraphRoBERTa(EncoderSpec(tiny_encoder_dir), node_dim=16, passages=PassageSpec(max_passage_tokens=32),
                     head_init="identity")
    with pytest.raises(ConfigError, match="^head_init"):
        CoLDE(EncoderSpec(tiny_encoder_dir), head_init="zero")


# --- layer-wise learning rates and frozen layers -------------------------------------------------------------------
def test_layer_wise_learning_rate_decay_groups(tiny_encoder_dir):
    method = DocSplit(EncoderSpec(tiny_encoder_dir, max_length=64), retention=Retention(layer_learning_rate_decay=0.5))
    optimizer = method.configure_optimizers()
    lr = method.default_learning_rate
    rate = {id(p): group["lr"] for group in optimizer.param_groups for p in group["params"]}
    backbone = method.encoder.backbone
    assert rate[id(backbone.embeddings.word_embeddings.weight)] == pytest.approx(lr * 0.5 ** 3)
    assert rate[id(backbone.encoder.layer[0].attention.self.query.weight)] == pytest.approx(lr * 0.5 ** 2)
    assert rate[id(backbone.encoder.layer[1].output.dense.weight)] == pytest.approx(lr * 0.5)
    head = method.encoder.mlm_head.predictions.transform.dense.weight
    assert rate[id(head)] == pytest.approx(lr)
    assert sum(len(g["params"]) for g in optimizer.param_groups) == len(list(method.parameters()))


def test_layer_rates_scale_a_configured_optimizer_and_reach_graph_heads(tiny_encoder_dir):
    import functools

    method = GraphRoBERTa(EncoderSpec(tiny_encoder_dir), node_dim=32, passages=PassageSpec(max_passage_tokens=32),
                          cache_passages=False,
                          optimizer=functools.partial(torch.optim.SGD, lr=0.1),
                          retention=Retention(layer_learning_rate_decay=0.8))
    optimizer = method.configure_optimizers()
    rate = {id(p): group["lr"] for group in optimizer.param_groups for p in group["params"]}
    assert rate[id(method.model.project.weight)] == pytest.approx(0.1)
    assert rate[id(method.model.encoder.backbone.embeddings.word_embeddings.weight)] == pytest.approx(0.1 * 0.8 ** 3)
    scales = [group["lr_scale"] for group in parameter_groups(method, method.retention)]
    assert scales == sorted(scales) and len(scales) == 4


def fit_few_steps(method, corpus_jsonl: str, steps: int = 2) -> L.Trainer:
    data = JSONLDataModule(paths=[corpus_jsonl], batch_size=4, num_workers=0, val_fraction=0.2)
    trainer = L.Trainer(accelerator="cpu", devices=1, max_steps=steps, logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False, limit_val_batches=0)
    trainer.fit(method, data)
    return trainer


def test_frozen_layers_and_embeddings_do_not_change_and_the_rest_trains(tiny_encoder_dir, corpus_jsonl):
    torch.manual_seed(0)
    method = DocSplit(EncoderSpec(tiny_encoder_dir, max_length=64), mlm_weight=0.0,
                      retention=Retention(freeze_layers=1, freeze_embeddings=True))
    before = {k: v.clone() for k, v in method.encoder.backbone.named_parameters()}
    fit_few_steps(method, corpus_jsonl)
    for key, value in method.encoder.backbone.named_parameters():
        frozen = key.startswith(("embeddings.", "encoder.layer.0."))
        assert torch.equal(value, before[key]) == frozen, key
    optimizer_parameters = {id(p) for group in method.trainer.optimizers[0].param_groups for p in group["params"]}
    assert id(method.encoder.backbone.encoder.layer[0].output.dense.weight) not in optimizer_parameters


# --- heads first -------------------------------------------------------------------------------------------------
def test_head_learning_rate_scale_multiplies_the_rate_beside_the_backbone_alone(tiny_encoder_dir):
    method = DocSplit(EncoderSpec(tiny_encoder_dir, max_length=64), retention=Retention(head_learning_rate_scale=10))
    optimizer = method.configure_optimizers()
    lr = method.default_learning_rate
    rate = {id(p): group["lr"] for group in optimizer.param_groups for p in group["params"]}
    predictions = method.encoder.mlm_head.predictions
    assert rate[id(predictions.transform.dense.weight)] == pytest.approx(10 * lr)
    assert rate[id(predictions.decoder.weight)] == pytest.approx(lr)  # tied to the token embeddings: the backbone's
    assert rate[id(method.encoder.backbone.encoder.layer[1].output.dense.weight)] == pytest.approx(lr)
    assert sum(len(g["params"]) for g in optimizer.param_groups) == len(list(method.parameters()))


@pytest.mark.parametrize("steps, backbone_moves", [(2, False), (3, True)])
def test_head_warmup_keeps_the_backbone_as_it_starts_while_the_head_trains(tiny_encoder_dir, corpus_jsonl, steps,
                                                                           backbone_moves):
    torch.manual_seed(0)
    method = DocSplit(EncoderSpec(tiny_encoder_dir, max_length=64), retention=Retention(head_warmup_steps=2))
    backbone = {k: v.clone() for k, v in method.encoder.backbone.named_parameters()}
    head = method.encoder.mlm_head.predictions.transform.dense.weight.clone()
    fit_few_steps(method, corpus_jsonl, steps=steps)
    moved = [k for k, v in method.encoder.backbone.named_parameters() if not torch.equal(v, backbone[k])]
    assert bool(moved) == backbone_moves, moved
    assert not torch.equal(method.encoder.mlm_head.predictions.transform.dense.weight, head)


def test_a_head_warmup_as_long_as_the_run_is_said_in_one_warning(tiny_encoder_dir, corpus_jsonl):
    method = DocSplit(EncoderSpec(tiny_encoder_dir, max_length=64), retention=Retention(head_warmup_steps=2))
    with pytest.warns(UserWarning, match="head_warmup_steps 2 covers the whole run .2 optimizer steps"):
        fit_few_steps(method, corpus_jsonl, steps=2)


def test_the_default_head_warmup_of_a_run_as_short_as_it_is_cut_to_half_the_run(headless_encoder_dir, corpus_jsonl,
                                                                                 recwarn):
    torch.manual_seed(0)
    method = MaskedLanguageModelling(EncoderSpec(headless_encoder_dir, max_length=64))  # its default: 30 steps
    backbone = {k: v.clone() for k, v in method.encoder.backbone.named_parameters()}
    fit_few_steps(method, corpus_jsonl, steps=4)
    assert method.retention.head_warmup_steps == 2
    assert any(not torch.equal(v, backbone[k]) for k, v in method.encoder.backbone.named_parameters())
    assert not [w for w in recwarn if "head_warmup_steps" in str(w.message)]


def test_head_warmup_is_refused_under_deepspeed_before_training(tiny_encoder_dir):
    from lightning.pytorch.strategies import DeepSpeedStrategy

    method = DocSplit(EncoderSpec(tiny_encoder_dir, max_length=64), retention=Retention(head_warmup_steps=1))
    method.trainer = L.Trainer(accelerator="cpu", devices=1, logger=False, strategy=DeepSpeedStrategy(stage=2))
    with pytest.raises(ConfigError, match="^model.init_args.retention.init_args.head_warmup_steps is not supported "
                                          "with DeepSpeed"):
        method.setup("fit")


# --- anchoring -------------------------------------------------------------------------------------------------
def test_anchor_term_is_logged_trained_against_a_frozen_unsaved_copy(tiny_encoder_dir, corpus_jsonl):
    torch.manual_seed(0)
    method = DocSplit(EncoderSpec(tiny_encoder_dir, max_length=64),
                      retention=Retention(anchor_weight=2.0, anchor_distance="mse"))
    start = {k: v.clone() for k, v in method.encoder.backbone.state_dict().items()}
    trainer = fit_few_steps(method, corpus_jsonl, steps=3)
    assert trainer.callback_metrics["train/anchor_loss"] > 0  # dropout on one side and three steps of training
    frozen = method.anchor.frozen
    assert not frozen.training and not any(p.requires_grad for p in frozen.parameters())
    assert all(torch.equal(v, start[k]) for k, v in frozen.state_dict().items())
    assert not any("anchor" in key or "frozen" in key for key in method.state_dict())
    assert not torch.equal(method.encoder.backbone.state_dict()["encoder.layer.1.output.dense.weight"],
                           start["encoder.layer.1.output.dense.weight"])


def test_anchor_term_is_zero_at_the_start_and_pulls_moved_weights_back(no_dropout_encoder_dir):
    torch.manual_seed(0)
    method = DocSplit(EncoderSpec(no_dropout_encoder_dir, max_length=64), mlm_weight=0.0,
                      retention=Retention(anchor_weight=1.0))
    method._apply_retention()
    batch = method.collator("validate")(long_documents())
    with method.anchor.capture():
        method.losses(batch)
    assert method.anchor.terms()["anchor_loss"].abs() < 1e-6
    with torch.no_grad():
        weight = method.encoder.backbone.encoder.layer[1].output.dense.weight
        weight.add_(torch.randn_like(weight))
    with method.anchor.capture():
        method.losses(batch)
    anchor = method.anchor.terms()["anchor_loss"]
    anchor.backward()
    assert anchor > 1e-3 and method.encoder.backbone.encoder.layer[1].output.dense.weight.grad.abs().sum() > 0
    total = method.total_loss({"info_nce_loss": torch.tensor(1.0), "anchor_loss": torch.tensor(0.5)})
    assert total == pytest.approx(1.5)


# --- errors and selection helpers ----------------------------------------------------------------------------------
@pytest.mark.parametrize("arguments, key", [
    ({"anchor_weight": -1.0}, "anchor_weight"),
    ({"anchor_distance": "l1"}, "anchor_distance"),
    ({"layer_learning_rate_decay": 0.0}, "layer_learning_rate_decay"),
    ({"layer_learning_rate_decay": 1.5}, "layer_learning_rate_decay"),
    ({"freeze_layers": -1}, "freeze_layers"),
    ({"head_warmup_steps": -1}, "head_warmup_steps"),
    ({"head_learning_rate_scale": 0.0}, "head_learning_rate_scale"),
])
def test_bad_retention_values_are_one_line_errors(arguments, key):
    with pytest.raises(ConfigError, match=f"^retention.init_args.{key}: must be"):
        DocSplit(EncoderSpec("unused: the retention options are checked first"), retention=Retention(**arguments))


def test_retention_needs_a_pretrained_encoder_and_fits_its_layers(tiny_encoder_dir):
    method = DocSplit(EncoderSpec(tiny_encoder_dir, max_length=64), retention=Retention(freeze_layers=3))
    with pytest.raises(ConfigError, match="freeze_layers: 3 exceeds the encoder's 2 layers"):
        method._apply_retention()
    method = DocSplit(EncoderSpec(tiny_encoder_dir, max_length=64), grad_cache_token_budget=256,
                      retention=Retention(anchor_weight=1.0))
    with pytest.raises(ConfigError, match="anchor_weight with grad_cache_token_budget"):
        method._apply_retention()
    deca = DECA(retention=Retention(freeze_embeddings=True))  # the Doc2VecC backbone: vectors learnt from scratch
    with pytest.raises(ConfigError, match="DECA has no pretrained Hugging Face encoder"):
        deca._apply_retention()


def test_interpolated_state_ends_exact_and_refuses_unmatched_weights():
    start, trained = {"w": torch.randn(3, 2), "n": torch.tensor(4)}, {"w": torch.randn(3, 2), "n": torch.tensor(7)}
    assert torch.equal(interpolated_state(trained, start, 0.0)["w"], start["w"])
    assert torch.equal(interpolated_state(trained, start, 1.0)["w"], trained["w"])
    torch.testing.assert_close(interpolated_state(trained, start, 0.25)["w"], 0.75 * start["w"] + 0.25 * trained["w"])
    assert interpolated_state(trained, start, 0.5)["n"] == 7
    with pytest.raises(ConfigError, match="weight w of the checkpoint has no counterpart of shape"):
        interpolated_state(trained, {"w": torch.zeros(2, 2)}, 0.5)
    with pytest.raises(ConfigError, match=r"--interpolate_alpha: must be in \[0, 1\]"):
        interpolated_state(trained, start, 1.5)


def test_choose_alpha_takes_the_best_and_the_smallest_among_ties():
    best, scores = choose_alpha(lambda alpha: -(alpha - 0.3) ** 2)
    assert best == pytest.approx(0.3) and len(scores) == 11
    assert choose_alpha(lambda alpha: 1.0, [0.5, 0.2, 1.0])[0] == 0.2


def test_retention_options_parse_from_the_command_line(tiny_encoder_dir, corpus_jsonl, tmp_path, capsys):
    from runs import tiny_args

    args = tiny_args(tiny_encoder_dir, corpus_jsonl, tmp_path / "run")
    main(["fit", *args, "--model.retention=lit_docemb.methods.retention.Retention",
          "--model.retention.init_args.freeze_layers=1", "--model.retention.init_args.anchor_weight=0.5",
          "--trainer.max_steps=1", "--trainer.limit_val_batches=0"])
    with pytest.raises(SystemExit) as exit_info:
        main(["fit", *tiny_args(tiny_encoder_dir, corpus_jsonl, tmp_path / "bad"), "--model.retention=lit_docemb.methods.retention.Retention",
              "--model.retention.init_args.layer_learning_rate_decay=2", "--trainer.max_steps=1"])
    assert exit_info.value.code == 2
    error = capsys.readouterr().err.strip().splitlines()
    assert error[-1].startswith("error: model.init_args.retention.init_args.layer_learning_rate_decay: must be in (0, 1]")
