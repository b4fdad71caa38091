"""The fine-tuning wrappers' GradCache and activation checkpointing (lit_docemb/methods/fine_tuning.py):
DenseRetrieval and DocumentClassifier with ``grad_cache_token_budget`` give the plain step's loss and every
parameter's gradient (dropout off: the plain, unsplit step is the reference), replay dropout exactly (dropout on:
the same sub-batches forwarded with their graphs are the reference), keep each row where it belongs, and
``activation_checkpointing`` recomputes the encoder's layers for the same gradients or is refused in one line."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import torch
import yaml
from corpus_files import _write_wikir, labelled_docs, write_labelled_folder
from journeys import with_pieces

from lit_docemb.commands import main
from lit_docemb.data.core.document import Document, Section
from lit_docemb.data.core.tokens import split_rows_by_token_budget
from lit_docemb.data.retrieval.datamodule import RetrievalExample
from lit_docemb.errors import BadArgument, ConfigError
from lit_docemb.data import PassageSpec
from lit_docemb.models import EncoderSpec, HFEncoder
from lit_docemb.methods import CoLDE, DenseRetrieval, DocSplit, DocumentClassifier, GraphRoBERTa
from lit_docemb.methods import grad_cache
from lit_docemb.methods.fine_tuning import checkpoint_activations, document_rows

ROOT = Path(__file__).resolve().parents[2]
TOLERANCE = 1e-9  # float64: the split and plain steps differ by rounding only (about 1e-14 here)


def document(i: int, sentences: int) -> Document:
    return Document(f"d{i}", sections=[Section("", " ".join(
        f"Sentence {j} of document {i} is about topic {i * j % 5}." for j in range(sentences)))])


def retrieval_examples() -> list[RetrievalExample]:
    """4 examples (two of one query), a positive and 2 sampled negatives each, of very different lengths."""
    return [RetrievalExample(f"q{i // 2}", f"what is topic {i} about", document(i, 1 + 2 * i),
                             [document(10 + i, 1 + i % 3), document(20 + i, 6 - i)]) for i in range(4)]


def graph_backbone(encoder: str, **kwargs) -> GraphRoBERTa:
    return GraphRoBERTa(EncoderSpec(encoder), node_dim=16,
                        passages=PassageSpec(words_per_passage=6, max_passage_tokens=24), cache_passages=False,
                        **kwargs)


BACKBONES = {
    "graph-roberta": lambda encoder, dropout: graph_backbone(encoder, attention_dropout=dropout),
    "docsplit": lambda encoder, dropout: DocSplit(EncoderSpec(encoder, max_length=48), mlm_weight=0.0),
}


def retrieval(encoder: str, backbone: str, dropout: float = 0.0, **kwargs) -> DenseRetrieval:
    """In float64, like ``classifier``: in float32 a token-type embedding's gradient, the sum of every token's,
    differs between the plain and the split step by rounding near any fixed bound (0.7 of 1e-5 of its largest
    entry in one draw of the tiny encoder's weights), so only float64 makes an exact check that cannot flake."""
    torch.manual_seed(0)
    return DenseRetrieval(BACKBONES[backbone](encoder, dropout), **kwargs).double()


def classifier(encoder: str, backbone: str, dropout: float = 0.0, **kwargs) -> DocumentClassifier:
    torch.manual_seed(0)
    return DocumentClassifier(BACKBONES[backbone](encoder, dropout), labels=["code", "sea"], dropout=dropout,
                              **kwargs).double()


def fit_batch(model):
    torch.manual_seed(1)
    if isinstance(model, DenseRetrieval):
        return model.collator("fit")(retrieval_examples())
    docs = labelled_docs(6)
    for i, d in enumerate(docs):  # lengths that differ, so sub-batches by token budget differ in row count
        d.sections[0].text = " ".join([d.sections[0].text] * (1 + i % 3))
    return model.collator("fit")(docs)


def plain_step(model, batch) -> tuple[dict, dict]:
    terms = model.losses(batch)
    model.total_loss(terms).backward()
    return {k: v.detach() for k, v in terms.items()}, gradients(model)


def cached_step(model, batch, budget: int):
    model.grad_cache_token_budget = budget
    out = model.grad_cache_forward(batch)
    out.backward_loss.backward()
    return out, gradients(model)


def gradients(model) -> dict[str, torch.Tensor]:
    return {name: p.grad.clone() for name, p in model.named_parameters() if p.grad is not None}


def assert_same(terms: dict, grads: dict, out, cached_grads: dict) -> None:
    for name, value in terms.items():
        assert abs(out.terms[name].item() - value.item()) <= TOLERANCE, name
    assert set(cached_grads) == set(grads) and grads
    for name, g in grads.items():
        assert close(cached_grads[name], g), name


def close(got: torch.Tensor, expected: torch.Tensor) -> bool:
    """Within TOLERANCE of the largest entry (at least 1)."""
    return (got - expected).abs().max().item() <= TOLERANCE * max(1.0, expected.abs().max().item())


# ---------------------------------------------------------------- GradCache equals the plain step (dropout off)


@pytest.mark.parametrize("backbone", BACKBONES)
@pytest.mark.parametrize("make", [retrieval, classifier], ids=["retrieval", "classifier"])
def test_grad_cache_equals_the_plain_step(no_dropout_encoder_dir, make, backbone):
    plain = make(no_dropout_encoder_dir, backbone)
    cached = copy.deepcopy(plain)
    batch = fit_batch(plain)
    if make is retrieval:
        assert len(batch.documents) == 3 * len(batch)  # positives and 2 sampled negatives per query
    terms, grads = plain_step(plain, batch)
    out, cached_grads = cached_step(cached, batch, budget=96)
    assert out.sub_batches > 2  # the budget really split the batch
    assert_same(terms, grads, out, cached_grads)
    assert any(name.startswith("head.") for name in cached_grads) == (make is classifier)  # the loss's own weights


def test_every_row_keeps_its_place(no_dropout_encoder_dir):
    """Queries and documents meet in one sub-batch in length order: each row's cached embedding is the plain
    one of that row, and a take that reorders a sub-batch's rows (or loses them) breaks the loss."""
    model = retrieval(no_dropout_encoder_dir, "graph-roberta")
    batch = fit_batch(model)
    with torch.no_grad():
        queries, documents = model.backbone.embed(batch.queries), model.backbone.embed(batch.documents)
        plain = torch.cat([queries, documents])  # (B + B*(1+k), D)
        reference = model.total_loss(model.losses(batch)).item()
        model.grad_cache_token_budget = 80
        cacheable = model.cacheable(batch)
        rows = split_rows_by_token_budget(cacheable.costs, 80, sort_by_length=True)
        assert any((r < len(batch)).any() and (r >= len(batch)).any() for r in rows)  # a mixed sub-batch
    out = model.grad_cache_forward(batch)
    assert out.sub_batches > 2 and (out.embeddings - plain).abs().max().item() <= TOLERANCE
    assert abs(out.loss.item() - reference) <= TOLERANCE

    def reordered(batch):
        inner = DenseRetrieval.cacheable(model, batch)
        take = inner.take
        inner.take = lambda index: take(index.flip(0))
        return inner

    model.cacheable = reordered
    wrong = model.grad_cache_forward(batch)
    assert (wrong.embeddings - plain).abs().max().item() > 1e-2 and wrong.loss.item() != out.loss.item()


def test_document_rows_cost_and_take_each_backbones_documents(no_dropout_encoder_dir):
    docs = [document(i, 1 + 3 * i) for i in range(3)]
    graph = graph_backbone(no_dropout_encoder_dir)
    batch = graph.document_collator("fit")(docs)
    rows = document_rows(batch)
    counts, lengths = batch.graphs.passage_counts, batch.graphs.passages.attention_mask.sum(1)
    assert rows.costs[2].item() == counts[2].item() * lengths[-counts[2]:].max().item()
    taken = rows.take(torch.tensor([2, 0]))
    assert taken.ids == ["d2", "d0"] and taken.graphs.passage_counts.tolist() == [counts[2], counts[0]]
    colde = CoLDE(EncoderSpec(no_dropout_encoder_dir), chunk_tokens=16, max_chunks_per_section=4, chunk_embeddings=8,
                  predict_similarities=False, lstm_output_size=8, projection_size=8)
    colde_batch = colde.document_collator("fit")(docs)
    taken = document_rows(colde_batch).take(torch.tensor([1]))
    assert taken.ids == ["d1"]
    with torch.no_grad():
        colde.eval()
        assert torch.allclose(colde.embed(taken), colde.embed(colde_batch)[1:2], atol=TOLERANCE)
    kinds = []
    for reading in ({}, {"sentence_pooling": "sum", "embed_with_title": False}):  # DocumentBatch, its sentences
        docsplit = DocSplit(EncoderSpec(no_dropout_encoder_dir, max_length=48), mlm_weight=0.0, **reading).eval()
        whole = docsplit.document_collator("fit")(docs)
        kinds.append(type(whole).__name__)
        rows = document_rows(whole)
        assert rows.costs.tolist()[0] < rows.costs.tolist()[2]
        taken = rows.take(torch.tensor([2, 0]))
        assert taken.ids == ["d2", "d0"]
        with torch.no_grad():
            assert torch.allclose(docsplit.embed(taken), docsplit.embed(whole)[[2, 0]], atol=TOLERANCE)
    assert kinds == ["DocumentBatch", "DocumentSentencesBatch"]
    with pytest.raises(ConfigError, match="^model.init_args.grad_cache_token_budget: the backbone's object cannot"):
        document_rows(object())


# ---------------------------------------------------------------- dropout on: the masks are replayed


@pytest.mark.parametrize("budget", [96, 400], ids=["every-sub-batch-replayed", "last-graph-kept"])
@pytest.mark.parametrize("make", [retrieval, classifier], ids=["retrieval", "classifier"])
def test_dropout_masks_are_replayed(tiny_encoder_dir, make, budget):
    """Reference: the same sub-batches forwarded in order with their graphs kept, from the same random state,
    one backward through the loss (the classifier's head dropout included). Without the replay the
    gradient would differ (tests/methods/test_grad_cache.py shows that for the step itself)."""
    reference_model = make(tiny_encoder_dir, "graph-roberta", dropout=0.1)
    assert next(m for m in reference_model.modules() if isinstance(m, HFEncoder)).model.training  # dropout on
    model = copy.deepcopy(reference_model)
    batch = fit_batch(model)
    reference_model.grad_cache_token_budget = budget
    cacheable = reference_model.cacheable(batch)
    rows = split_rows_by_token_budget(cacheable.costs, budget, sort_by_length=True)
    assert 2 < len(rows) and (len(rows) <= grad_cache.KEEP_LAST_GRAPH_UP_TO) == (budget == 400)
    torch.manual_seed(7)
    embeddings = torch.cat([cacheable.encode(cacheable.take(r)) for r in rows])[torch.argsort(torch.cat(rows))]
    terms = cacheable.loss(embeddings)
    reference_model.total_loss(terms).backward()
    torch.manual_seed(7)
    out, cached_grads = cached_step(model, batch, budget=budget)
    assert_same({k: v.detach() for k, v in terms.items()}, gradients(reference_model), out, cached_grads)


def test_a_frozen_backbone_trains_its_head_through_grad_cache(no_dropout_encoder_dir):
    plain = classifier(no_dropout_encoder_dir, "docsplit", freeze_backbone=True)
    cached = copy.deepcopy(plain)
    batch = fit_batch(plain)
    terms, grads = plain_step(plain, batch)
    out, cached_grads = cached_step(cached, batch, budget=96)
    assert out.sub_batches > 2 and set(grads) == {"head.1.weight", "head.1.bias"}
    assert_same(terms, grads, out, cached_grads)


def test_the_budget_belongs_to_the_wrapper(no_dropout_encoder_dir):
    backbone = graph_backbone(no_dropout_encoder_dir, grad_cache_token_budget=64)
    with pytest.raises(BadArgument, match="set model.init_args.grad_cache_token_budget"):
        DenseRetrieval(backbone)


# ---------------------------------------------------------------- activation checkpointing


def layer_calls(model) -> list[int]:
    """Counts the calls of the first transformer layer of the backbone's encoder (forward and recomputation)."""
    encoder = next(m for m in model.backbone.modules() if isinstance(m, HFEncoder))
    calls = [0]  # the layer's own hooks stay outside transformers' checkpoint; its attention's run again
    encoder.backbone.encoder.layer[0].attention.register_forward_hook(lambda *_: calls.__setitem__(0, calls[0] + 1))
    return calls


@pytest.mark.parametrize("make", [retrieval, classifier], ids=["retrieval", "classifier"])
def test_activation_checkpointing_gives_the_plain_gradients(tiny_encoder_dir, make):
    """Dropout on: the recomputation draws the masks of the first forward (non-reentrant checkpointing keeps the
    random state), so the gradients are the plain ones from the same seed."""
    plain = make(tiny_encoder_dir, "graph-roberta", dropout=0.1)
    checkpointed = make(tiny_encoder_dir, "graph-roberta", dropout=0.1, activation_checkpointing=True)
    checkpointed.load_state_dict(plain.state_dict())
    batch = fit_batch(plain)
    plain_calls, checkpointed_calls = layer_calls(plain), layer_calls(checkpointed)
    torch.manual_seed(3)
    terms, grads = plain_step(plain, batch)
    torch.manual_seed(3)
    checkpointed_terms, checkpointed_grads = plain_step(checkpointed, batch)
    assert checkpointed_calls[0] == 2 * plain_calls[0] > 0  # the layer ran again in the backward pass
    assert abs(checkpointed_terms[next(k for k in terms if k.endswith("_loss"))]
               - terms[next(k for k in terms if k.endswith("_loss"))]).item() <= TOLERANCE
    assert set(checkpointed_grads) == set(grads)
    for name, g in grads.items():
        assert close(checkpointed_grads[name], g), name


def test_grad_cache_with_activation_checkpointing_equals_the_plain_step(no_dropout_encoder_dir):
    plain = retrieval(no_dropout_encoder_dir, "graph-roberta")
    cached = retrieval(no_dropout_encoder_dir, "graph-roberta", activation_checkpointing=True)
    cached.load_state_dict(plain.state_dict())
    batch = fit_batch(plain)
    terms, grads = plain_step(plain, batch)
    out, cached_grads = cached_step(cached, batch, budget=96)
    assert out.sub_batches > 2
    assert_same(terms, grads, out, cached_grads)


def test_an_encoder_without_checkpointing_is_refused(no_dropout_encoder_dir):
    backbone = graph_backbone(no_dropout_encoder_dir)
    backbone.model.encoder.model.supports_gradient_checkpointing = False
    with pytest.raises(BadArgument, match="^activation_checkpointing: encoder .* does not support activation "
                                          "checkpointing in transformers: set it to false$"):
        DenseRetrieval(backbone, activation_checkpointing=True)
    with pytest.raises(BadArgument, match="^activation_checkpointing: Linear has no Hugging Face encoder"):
        checkpoint_activations(torch.nn.Linear(2, 2))


def test_a_frozen_backbone_with_checkpointing_is_refused_in_one_line(no_dropout_encoder_dir, capsys, tmp_path,
                                                                  monkeypatch):
    monkeypatch.chdir(tmp_path)  # the run folder of a config without one: not a checkout's own runs/
    with pytest.raises(SystemExit) as stopped:
        main(["fit", "--model=lit_docemb.methods.DocumentClassifier",
              "--model.backbone=lit_docemb.methods.DocSplit", f"--model.backbone.encoder.name={no_dropout_encoder_dir}",
              "--model.backbone.encoder.max_length=64",
              "--model.labels=[code,sea]", "--model.freeze_backbone=true", "--model.activation_checkpointing=true",
              "--data=lit_docemb.data.LabelledTextDataModule", "--data.source=unused", "--trainer.logger=false"])
    err = capsys.readouterr().err
    assert stopped.value.code == 2 and "Traceback" not in err, err[-2000:]
    assert err.strip().splitlines()[-1] == ("error: model.init_args.activation_checkpointing: must be false with "
                                    "freeze_backbone (a frozen backbone keeps no activations to recompute), got True")


# ---------------------------------------------------------------- through the CLI


def test_a_retrieval_config_trains_with_grad_cache_and_checkpointing(tiny_encoder_dir, tmp_path):
    root = _write_wikir(tmp_path / "wikir")
    cli = main(["fit", "--config", str(ROOT / "configs/graph_roberta/retrieval_wikir.yaml"),
                f"--model.init_args.backbone.init_args.encoder.name={tiny_encoder_dir}",
                "--model.init_args.backbone.init_args.node_dim=16",
                "--model.init_args.backbone.init_args.passages.max_passage_tokens=64",
                "--model.init_args.checkpoint=null",
                "--model.init_args.grad_cache_token_budget=128", "--model.init_args.activation_checkpointing=true",
                "--data.root", str(root), "--data.negatives=run", "--data.negatives_run=null",
                "--data.num_negatives=2", "--data.val_queries_from_train=0", "--data.global_batch_size=3",
                "--data.num_workers=0", f"--data.cache_dir={tmp_path / 'cache'}",
                "--trainer.accelerator=cpu", "--trainer.devices=1", "--trainer.precision=32-true",
                "--trainer.logger=lightning.pytorch.loggers.CSVLogger", f"--trainer.logger.save_dir={tmp_path}",
                "--trainer.fast_dev_run=2", f"--trainer.default_root_dir={tmp_path}"])
    assert cli.trainer.global_step == 2
    assert cli.trainer.callback_metrics["train/grad_cache_sub_batches"].item() > 1
    assert cli.model.hparams.grad_cache_token_budget == 128 and cli.model.hparams.activation_checkpointing


def test_a_classification_config_trains_with_grad_cache(tiny_encoder_dir, tmp_path):
    config = ROOT / "configs/graph_roberta/classify_imdb.yaml"
    settings = with_pieces(yaml.safe_load(config.read_text(encoding="utf-8")), config.parent)
    settings["data"] = {"class_path": "lit_docemb.data.LabelledTextDataModule", "init_args": {
        "source": str(write_labelled_folder(tmp_path / "set")), "label_column": "label", "batch_size": 6,
        "num_workers": 0, "val_fraction": 0.25}}
    written = tmp_path / "configs" / "config.yaml"
    written.parent.mkdir()
    written.write_text(yaml.safe_dump(settings), encoding="utf-8")
    cli = main(["fit", "--config", str(written), f"--model.init_args.backbone.init_args.encoder.name={tiny_encoder_dir}",
                "--model.init_args.backbone.init_args.node_dim=16",
                "--model.init_args.backbone.init_args.passages.max_passage_tokens=32",
                "--model.init_args.checkpoint=null",
                "--model.init_args.labels=[code,sea]", "--model.init_args.grad_cache_token_budget=64",
                "--trainer.accelerator=cpu", "--trainer.devices=1", "--trainer.precision=32-true",
                "--trainer.logger=lightning.pytorch.loggers.CSVLogger", f"--trainer.logger.save_dir={tmp_path}",
                "--trainer.fast_dev_run=2", f"--trainer.default_root_dir={tmp_path}"])
    assert cli.trainer.global_step == 2
    assert cli.trainer.callback_metrics["train/grad_cache_sub_batches"].item() > 1
    assert "val/macro_f1" in cli.trainer.callback_metrics
