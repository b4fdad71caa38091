"""Dense-retrieval fine-tuning: query/document batches, masking of a query's own positives, starting from a
fine-tuned checkpoint, and every retrieval config through the CLI on a WIKIR-layout fixture."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from corpus_files import _write_wikir

from lit_docemb.commands import main
from lit_docemb.data.core.document import Document, Section
from lit_docemb.data.retrieval.datamodule import RetrievalExample
from lit_docemb.methods import DenseRetrieval, GraphRoBERTa
from lit_docemb.data import PassageSpec
from lit_docemb.models import EncoderSpec

ROOT = Path(__file__).resolve().parents[2]
#: The retrieval fine-tuning configs (DenseRetrieval around Graph-RoBERTa); configs/retrieval_cranfield.yaml pretrains
#: DocSplit on a collection's documents and is walked by the journeys instead.
CONFIGS = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "configs").rglob("retrieval_*.yaml")
                 if "lit_docemb.methods.DenseRetrieval" in p.read_text(encoding="utf-8"))


def doc(i: int) -> Document:
    return Document(f"d{i}", sections=[Section("", f"Document {i} is about topic {i}. It has two sentences.")])


@pytest.fixture(scope="module")
def model(tiny_encoder_dir) -> DenseRetrieval:
    torch.manual_seed(0)
    return DenseRetrieval(GraphRoBERTa(EncoderSpec(tiny_encoder_dir), node_dim=16,
                                       passages=PassageSpec(words_per_passage=6, max_passage_tokens=32)))


def test_batch_holds_queries_positives_then_negatives(model):
    examples = [RetrievalExample("q1", "topic one", doc(1), [doc(7), doc(8)]),
                RetrievalExample("q1", "topic one", doc(2), [doc(9), doc(7)]),
                RetrievalExample("q2", "topic two", doc(3), [doc(4), doc(5)])]
    batch = model.collator("fit")(examples)
    assert len(batch) == 3 and batch.queries.graphs.passage_counts.tolist() == [1, 1, 1]  # single-node queries
    assert batch.documents.ids == ["d1", "d2", "d3", "d7", "d8", "d9", "d7", "d4", "d5"]
    ids = batch.candidate_ids.tolist()
    assert ids[0] == ids[1] == batch.query_ids[0] == batch.query_ids[1]  # q1's two positives share its id
    assert ids[2] == batch.query_ids[2] and len(set(ids[3:])) == 5  # negatives: one id per document


def test_queries_are_single_nodes_and_one_passage_documents_graphs(model):
    examples = [RetrievalExample("q1", "topic one", doc(1), [doc(7)]), RetrievalExample("q2", "topic two", doc(2), [])]
    batch = model.collator("fit")(examples)
    queries, documents = batch.queries.graphs, batch.documents.graphs
    assert queries.is_query.tolist() == [True, True] and all(e.shape == (2, 0) for e in queries.edges)
    assert not documents.is_query.any()
    graph, short = model.backbone.model, Document("d", sections=[Section("", "One short passage.")])
    assert model.collator("fit").collate([short]).graphs.passage_counts.tolist() == [1]
    model.eval()
    try:
        with torch.no_grad():
            embedded = model.backbone.embed(batch.queries)  # as losses embeds them
            one_passage = model.backbone.embed(model.collator("fit").collate([short])).squeeze(0)
            assert torch.allclose(embedded, graph.passage_nodes(queries.passages), atol=1e-6)  # eq. 1 only
            graph.layers[-1].lin.weight.add_(0.5)
            try:
                assert torch.equal(model.backbone.embed(batch.queries), embedded)
                changed = model.backbone.embed(model.collator("fit").collate([short])).squeeze(0)
                assert not torch.allclose(changed, one_passage, atol=1e-4)  # a document goes through the layers
            finally:
                graph.layers[-1].lin.weight.sub_(0.5)
    finally:
        model.train()


def test_other_positive_of_the_same_query_is_not_a_negative(model):
    examples = [RetrievalExample("q1", "topic one", doc(1), [doc(7)]),
                RetrievalExample("q1", "topic one", doc(2), [doc(8)]),
                RetrievalExample("q2", "topic two", doc(3), [doc(9)])]
    terms = model.losses(model.collator("fit")(examples))
    # 6 candidates; each q1 anchor loses the other q1 positive: (4 + 4 + 5) / 3
    assert terms["negatives_per_anchor"].item() == pytest.approx(13 / 3)
    model.total_loss(terms).backward()
    assert all(p.grad is not None for p in model.parameters())


def test_starts_from_a_fine_tuned_wrappers_checkpoint(model, tiny_encoder_dir, tmp_path):
    torch.save({"state_dict": model.state_dict()}, tmp_path / "phase1.ckpt")
    torch.manual_seed(5)
    backbone = GraphRoBERTa(EncoderSpec(tiny_encoder_dir), node_dim=16,
                            passages=PassageSpec(words_per_passage=6, max_passage_tokens=32))
    phase2 = DenseRetrieval(backbone, checkpoint=str(tmp_path / "phase1.ckpt"))
    for (name, a), b in zip(model.backbone.state_dict().items(), phase2.backbone.state_dict().values()):
        assert torch.equal(a, b), name


@pytest.mark.parametrize("config", CONFIGS)
def test_every_retrieval_config_runs_fast_dev_run(config, tiny_encoder_dir, tmp_path):
    root = _write_wikir(tmp_path / "wikir")
    cli = main(["fit", "--config", str(ROOT / config),
                f"--model.init_args.backbone.init_args.encoder.name={tiny_encoder_dir}",
                "--model.init_args.backbone.init_args.node_dim=16",
                "--model.init_args.backbone.init_args.passages.max_passage_tokens=64",
                "--model.init_args.checkpoint=null",
                "--data=lit_docemb.data.WIKIRDataModule", f"--data.root={root}", "--data.mode=retrieval",
                "--data.negatives=run", "--data.negatives_run=null", "--data.num_negatives=2",
                "--data.val_queries_from_train=0",
                "--data.global_batch_size=3", "--data.num_workers=0", f"--data.cache_dir={tmp_path / 'cache'}",
                "--trainer.accelerator=cpu", "--trainer.devices=1", "--trainer.precision=32-true",
                "--trainer.logger=lightning.pytorch.loggers.CSVLogger", f"--trainer.logger.save_dir={tmp_path}",
                "--trainer.logger.name=retrieval",  # Robust04's names its fold, which WIKIR has not
                "--trainer.fast_dev_run=2", f"--trainer.default_root_dir={tmp_path}"])
    assert cli.trainer.global_step == 2
    assert cli.trainer.callback_metrics["train/negatives_per_anchor"].item() > 2


def test_graph_roberta_retrieval_trains_on_max_passages_and_infers_on_max_passages_inference(tiny_encoder_dir):
    """Seed 000: documents of up to 50 passages in training, 100 at inference (here 2 and 5)."""
    words = " ".join(f"word{i}" for i in range(40))
    long = [Document(f"long{i}", sections=[Section("", words)]) for i in range(3)]
    model = DenseRetrieval(GraphRoBERTa(EncoderSpec(tiny_encoder_dir), node_dim=16,
                                        passages=PassageSpec(words_per_passage=3, max_passage_tokens=16,
                                                             max_passages=2, max_passages_inference=5),
                                        cache_passages=False))
    batch = model.collator("fit")([RetrievalExample("q1", "word1 word2", long[0], long[1:])])
    assert batch.documents.graphs.passage_counts.tolist() == [2, 2, 2]
    assert batch.queries.graphs.passage_counts.tolist() == [1]
    assert model.collator("predict")(long).graphs.passage_counts.tolist() == [5, 5, 5]
    assert model.collator("validate")([RetrievalExample("q1", "w", long[0], [])]).documents.graphs.passage_counts.tolist() == [5]
