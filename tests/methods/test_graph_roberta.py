"""Graph-RoBERTa: graph edges, one-passage documents and single-node queries, pretraining splits, GradCache, and
every config via the CLI."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import torch
from corpus_files import sectioned_document

from lit_docemb.commands import main
from lit_docemb.eval.figures import attention_heatmap
from lit_docemb.data.core.document import Document, Section, query_document
from lit_docemb.data.caches.passage_cache import TokenizedPassages
from lit_docemb.data.core.passage_graph import fully_connected_edges, section_edges
from lit_docemb.data.core.text import chunk_passages
from lit_docemb.methods import GraphRoBERTa, LinearWarmupDecay
from lit_docemb.models.graph_document import GraphDocumentEncoder
from lit_docemb.views.graph_roberta import GraphDocumentCollator, PassageGraphBuilder
from lit_docemb.data import PassageSpec
from lit_docemb.errors import BadArgument
from lit_docemb.models import EncoderSpec

ROOT = Path(__file__).resolve().parents[2]
CONFIGS = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "configs" / "graph_roberta").glob("pretrain_*.yaml"))


def edge_set(edges: torch.Tensor) -> set[tuple[int, int]]:
    return {tuple(e) for e in edges.T.tolist()}


@pytest.fixture(scope="module")
def model(tiny_encoder_dir) -> GraphRoBERTa:
    torch.manual_seed(0)
    return GraphRoBERTa(EncoderSpec(tiny_encoder_dir), node_dim=16,
                        passages=PassageSpec(words_per_passage=8, max_passage_tokens=32))


def test_the_passages_block_is_checked_once_and_saved_as_plain_data(tiny_encoder_dir):
    method = GraphRoBERTa(EncoderSpec(tiny_encoder_dir), node_dim=16, passages={"max_passage_tokens": 32},
                          cache_passages=False)
    assert method.passage_spec == PassageSpec(max_passage_tokens=32)
    assert method.graph_builder.spec is method.passage_spec
    assert method.hparams["passages"] == {"class_path": "lit_docemb.data.PassageSpec", "init_args": {
        "words_per_passage": 100, "max_passage_tokens": 32, "max_passages": 50, "max_passages_inference": 100,
        "title_passage": True, "graph": "full"}}  # the whole block used is in the checkpoint
    given = PassageSpec(words_per_passage=7, graph="section")
    assert PassageSpec.of(given.hyperparameters()) == PassageSpec.of(given.arguments()) == given
    for bad, message in [({"words_per_passage": 0}, "words_per_passage: must be >= 1, got 0"),
                         ({"max_passage_tokens": 0}, "max_passage_tokens: must be >= 1, got 0"),
                         ({"max_passages": 1}, "max_passages: must be >= 2 to split documents in two, got 1"),
                         ({"max_passages_inference": 0}, "max_passages_inference: must be >= 1, got 0"),
                         ({"graph": "sections"}, "graph: must be 'full' or 'section', got 'sections'")]:
        with pytest.raises(BadArgument) as refused:
            PassageSpec(**bad)
        assert str(refused.value) == f"passages.{message}"
    with pytest.raises(BadArgument, match=r"^passages: expected a block of words_per_passage, max_passage_tokens"):
        PassageSpec.of(100)


def test_fully_connected_graph_links_every_pair_of_nodes():
    assert edge_set(fully_connected_edges(3)) == {(i, j) for i in range(4) for j in range(4) if i != j}
    assert edge_set(fully_connected_edges(1)) == {(0, 1), (1, 0)}  # a one-passage document is 2 nodes


def test_section_graph_edges():
    # passages 1, 2 in section 0; 3 in section 1; 4, 5, 6 in section 2 (node 0 is the document)
    edges = edge_set(section_edges([0, 0, 1, 2, 2, 2]))
    within = {(1, 2), (2, 1), (4, 5), (5, 4), (4, 6), (6, 4), (5, 6), (6, 5)}
    to_document = {(0, 1), (1, 0), (0, 3), (3, 0), (0, 4), (4, 0)}  # the first passage of each section
    assert edges == within | to_document


@pytest.mark.parametrize("graph", ["full", "section"])
def test_a_query_is_the_encoder_and_projection_a_one_passage_document_goes_through_the_graph(model, graph):
    text = "A single short passage."
    doc, query = Document("one", sections=[Section("", text)]), query_document("q", text)
    builder = PassageGraphBuilder(model.tokenizer, PassageSpec(8, 32, graph=graph))
    batch = GraphDocumentCollator(builder, 100)([doc, query])
    assert batch.graphs.passage_counts.tolist() == [1, 1] and batch.graphs.is_query.tolist() == [False, True]
    assert edge_set(batch.graphs.edges[0]) == {(0, 1), (1, 0)} and batch.graphs.edges[1].shape == (2, 0)
    model.eval()
    try:
        with torch.no_grad():
            got = model.embed(batch)
            tokens = batch.graphs.passages
            cls = model.model.encoder.backbone(input_ids=tokens.input_ids,
                                               attention_mask=tokens.attention_mask).last_hidden_state[:, 0]
            expected = torch.tanh(cls @ model.model.project.weight.T + model.model.project.bias)  # eq. 1
    finally:
        model.train()
    assert torch.allclose(got[1], expected[1], atol=1e-6)  # the query: its initial node (§3.3)
    assert torch.allclose(expected[0], expected[1], atol=1e-6)  # the same text, the same passage node...
    assert not torch.allclose(got[0], expected[0], atol=1e-4)  # ...but the document went through the layers


def test_graph_layers_change_multi_passage_documents(model):
    model.eval()
    try:
        with torch.no_grad():
            batch = model.collator("predict")([sectioned_document()])
            out = model.model(batch.graphs)
            nodes = model.model.passage_nodes(batch.graphs.passages)
    finally:
        model.train()
    assert not torch.allclose(out[0], nodes.mean(0), atol=1e-4)  # not just eq. 2: the layers ran


def test_pretraining_batch_keeps_at_most_max_passages_and_counts_short_documents(tiny_encoder_dir):
    model = GraphRoBERTa(EncoderSpec(tiny_encoder_dir), node_dim=16,
                         passages=PassageSpec(words_per_passage=8, max_passage_tokens=32, max_passages=5))
    long_doc = sectioned_document(n_sections=4, sentences=6)
    batch = model.collator("fit")([long_doc, Document("short", sections=[Section("", "Too short.")])])
    assert len(batch) == 1 and batch.skipped == 1
    assert int(batch.view_a.passage_counts[0] + batch.view_b.passage_counts[0]) == 5
    assert batch.view_a.passages.input_ids.shape[0] == int(batch.view_a.passage_counts.sum())


@pytest.mark.parametrize("objective", ["halves", "one_passage"])
def test_one_passage_sub_documents_are_documents_and_only_the_pseudo_query_is_a_query(tiny_encoder_dir, objective):
    model = GraphRoBERTa(EncoderSpec(tiny_encoder_dir), node_dim=16,
                         passages=PassageSpec(words_per_passage=8, max_passage_tokens=32),
                         objective=objective)
    two = Document("two", sections=[Section("", "One two three four five six seven eight. Nine ten eleven.")])
    batch = model.collator("fit")([two, sectioned_document()])
    assert batch.view_a.passage_counts[0] == 1  # halves of two passages: one each
    pseudo_query = objective == "one_passage"  # §3.3, ICT-like: the one passage plays the query
    assert batch.view_a.is_query.tolist() == [pseudo_query] * 2 and not batch.view_b.is_query.any()
    assert edge_set(batch.view_a.edges[0]) == (set() if pseudo_query else {(0, 1), (1, 0)})
    model.eval()
    try:
        with torch.no_grad():
            embedded = model.model(batch.view_a)
            nodes = model.model.passage_nodes(batch.view_a.passages)
    finally:
        model.train()
    first = torch.cumsum(batch.view_a.passage_counts, 0) - batch.view_a.passage_counts
    assert torch.allclose(embedded, nodes[first], atol=1e-5) == pseudo_query


def test_training_step_reaches_every_weight(model):
    docs = [sectioned_document(2 + i % 2, 3 + i) for i in range(4)]
    for i, d in enumerate(docs):
        d.id = f"d{i}"
    batch = model.collator("fit")(docs)
    terms = model.losses(batch)
    assert set(terms) == {"info_nce_loss", "negatives_per_anchor", "skipped_documents"}
    assert terms["negatives_per_anchor"].item() == 3
    model.zero_grad()
    model.total_loss(terms).backward()
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in model.parameters())


@pytest.mark.parametrize("objective", ["halves", "one_passage"])
def test_grad_cache_equals_plain_training(no_dropout_encoder_dir, objective):
    torch.manual_seed(0)  # float64: float32 rounding alone comes near any fixed bound (tests/methods/test_fine_tuning.py)
    plain = GraphRoBERTa(EncoderSpec(no_dropout_encoder_dir), node_dim=16,
                         passages=PassageSpec(words_per_passage=8, max_passage_tokens=32),
                         attention_dropout=0.0, objective=objective).double()
    cached = copy.deepcopy(plain)
    cached.grad_cache_token_budget = 64
    docs = [sectioned_document(1 + i % 3, 2 + i) for i in range(6)]
    for i, d in enumerate(docs):
        d.id = f"d{i}"
    torch.manual_seed(1)
    batch = plain.collator("fit")(docs)
    terms = plain.losses(batch)
    plain.total_loss(terms).backward()
    out = cached.grad_cache_forward(batch)
    out.backward_loss.backward()
    assert out.sub_batches > 2
    assert abs(out.loss.item() - terms["info_nce_loss"].item()) <= 1e-9
    for (name, p), q in zip(plain.named_parameters(), cached.parameters()):
        assert (p.grad - q.grad).abs().max().item() <= 1e-9, name


def test_node_layout():
    doc_nodes, passage_nodes = GraphDocumentEncoder.node_layout(torch.tensor([2, 1, 3]))
    assert doc_nodes.tolist() == [0, 3, 5]
    assert passage_nodes.tolist() == [1, 2, 4, 6, 7, 8]


def test_warmup_fraction_follows_the_run_length():
    optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
    scheduler = LinearWarmupDecay(optimizer, warmup_fraction=0.1)
    scheduler.set_total_steps(100)  # as the method does once the trainer knows the run length
    assert optimizer.param_groups[0]["lr"] == pytest.approx(1 / 11)  # step 0 of a 10-step warm-up
    lrs = []
    for _ in range(100):
        optimizer.step()
        scheduler.step()
        lrs.append(optimizer.param_groups[0]["lr"])
    assert lrs[9] == pytest.approx(1.0) and lrs[54] == pytest.approx(0.5) and lrs[-1] == pytest.approx(0.0)


@pytest.mark.parametrize("config", CONFIGS)
def test_every_pretraining_config_runs_fast_dev_run(config, tiny_encoder_dir, corpus_jsonl, tmp_path):
    cli = main(["fit", "--config", str(ROOT / config), f"--model.init_args.encoder.name={tiny_encoder_dir}",
                "--model.init_args.node_dim=16", "--model.init_args.passages.max_passage_tokens=64",
                "--model.init_args.grad_cache_token_budget=256", "--data=lit_docemb.data.JSONLDataModule",
                f"--data.paths=[{corpus_jsonl}]", "--data.global_batch_size=4", "--data.num_workers=0",
                "--trainer.accelerator=cpu", "--trainer.devices=1", "--trainer.strategy=auto",
                "--trainer.logger=lightning.pytorch.loggers.CSVLogger", f"--trainer.logger.save_dir={tmp_path}",
                "--trainer.fast_dev_run=2", "--trainer.precision=32-true",
                f"--trainer.default_root_dir={tmp_path}"])
    assert cli.trainer.global_step == 2
    assert cli.trainer.callback_metrics["train/grad_cache_sub_batches"].item() > 1
    # the method connected the DataModule in its setup (after the DataModule's): batches came from its cache
    assert cli.datamodule.token_cache is cli.model.token_cache is not None
    assert isinstance(cli.datamodule.train_set[0], TokenizedPassages)


def test_predict_returns_attention_rows_that_sum_to_one(model, tmp_path):
    docs = [sectioned_document(), Document("one", sections=[Section("", "Just one passage.")])]
    model.eval()
    try:
        with torch.no_grad():
            out = model.predict_step(model.collator("predict")(docs), 0)
            plain = model.embed(model.collator("predict")(docs))
    finally:
        model.train()
    assert torch.allclose(out["embeddings"], plain, atol=1e-6)
    n = model.collator("predict")(docs).graphs.passage_counts.tolist()
    full, single = out["attention"]
    assert full.shape == (2, n[0] + 1, n[0] + 1) and single.shape == (2, 2, 2)
    assert torch.allclose(full.sum(-1), torch.ones(2, n[0] + 1), atol=1e-5)  # fully connected
    off_diagonal = ~torch.eye(n[0] + 1, dtype=torch.bool)
    assert (full[:, off_diagonal] > 0).all() and (full[:, ~off_diagonal] == 0).all()  # no self-loops (DGL's GATConv)
    path = attention_heatmap(full, tmp_path / "fig6.png", title="doc")
    assert path.stat().st_size > 1000 and path.read_bytes()[:4] == b"\x89PNG"
    with pytest.raises(ValueError, match="need attention"):
        attention_heatmap(full[0], tmp_path / "bad.png")


@pytest.mark.parametrize("stage", ["fit", "validate", "predict"])
def test_cached_passages_collate_exactly_like_documents(model, stage, tmp_path):
    docs = [sectioned_document(2 + i % 2, 3 + i) for i in range(4)] + [Document("short", sections=[
        Section("", "Too short.")])]
    for i, d in enumerate(docs[:4]):
        d.id = f"d{i}"
    cached = model.token_cache
    cached.cache_dir = str(tmp_path)
    items = list(cached.open(docs))
    torch.manual_seed(3)
    from_documents = model.collator(stage)(docs)
    torch.manual_seed(3)
    from_cache = model.collator(stage)(items)
    graphs = [("graphs",)] if stage == "predict" else [("view_a",), ("view_b",)]
    for (field,) in graphs:
        a, b = getattr(from_documents, field), getattr(from_cache, field)
        assert torch.equal(a.passages.input_ids, b.passages.input_ids)
        assert torch.equal(a.passages.attention_mask, b.passages.attention_mask)
        assert torch.equal(a.passage_counts, b.passage_counts)
        assert all(torch.equal(x, y) for x, y in zip(a.edges, b.edges))
    if stage != "predict":
        assert from_cache.skipped == from_documents.skipped == 1


def test_title_passage_makes_the_title_the_first_passage(tiny_encoder_dir, tmp_path):
    document = Document("t1", title="  Harbour   tides ", sections=[Section("Intro", "The boat left. The tide rose."),
                                                                     Section("End", "Gulls came back.")])
    assert [p.text for p in chunk_passages(document, 4, with_title=True)] == [
        "Harbour tides", "The boat left.", "The tide rose.", "Gulls came back."]
    assert [p.section_index for p in chunk_passages(document, 4, with_title=True)] == [0, 0, 0, 1]
    assert [p.text for p in chunk_passages(document, 4, max_passages=2, with_title=True)] == [
        "Harbour tides", "The boat left."]
    assert chunk_passages(Document("u", sections=[Section("", "No title here.")]), 4, with_title=True)[0].text == \
        "No title here."
    plain, titled = (GraphRoBERTa(EncoderSpec(tiny_encoder_dir), node_dim=16,
                                  passages=PassageSpec(words_per_passage=4, max_passage_tokens=16, title_passage=title),
                                  passage_cache_dir=str(tmp_path)) for title in (False, True))
    assert titled.collator("predict")([document]).graphs.passage_counts.tolist() == [4]
    assert plain.collator("predict")([document]).graphs.passage_counts.tolist() == [3]
    cached = titled.token_cache.open([document])[0]  # the cache splits as the collator does, under its own key
    assert len(cached) == 4 and titled.token_cache.fingerprint([document]) != plain.token_cache.fingerprint(
        [document])
