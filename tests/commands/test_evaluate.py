"""Evaluations through their common interface: clustering / probe / few-shot against hand-computed values,
retrieval (dense, BM25, hybrid) against the independent dense_search path, the Markdown table, and the whole
loop: ``fit`` with a retrieval evaluation as a callback (``val/ndcg@10`` monitored per epoch), then
``python -m lit_docemb evaluate`` on the checkpoint."""

from __future__ import annotations

import json
import math
from types import SimpleNamespace

import pytest
import torch
from corpus_files import (
    _write_wikir,
)
from runs import Letters

from lit_docemb.commands.evaluate import build_evaluation
from lit_docemb.data.corpora.aan import AANDataModule
from lit_docemb.data.retrieval.bm25 import BM25Index
from lit_docemb.data.core.document import Document, Query, Section
from lit_docemb.data.retrieval.trec import read_run
from lit_docemb.data.corpora.wikir import WIKIRDataModule
from lit_docemb.eval.evaluation import EvaluationContext, markdown_table
from lit_docemb.eval.labelled import (
    Clustering,
    FewShot,
    LabelledEmbeddingEvaluation,
    LinearProbe,
)
from lit_docemb.eval.matching import evaluate_pairs
from lit_docemb.eval.ranking import retrieval_metrics
from lit_docemb.eval.retrieval import RetrievalEvaluation, split_qrels
from lit_docemb.eval.runner import run_evaluations
from lit_docemb.eval.search import rank
from lit_docemb.methods import DenseRetrieval, DocSplit
from lit_docemb.models import EncoderSpec


def labelled(i: int, text: str, label: str) -> Document:
    return Document(f"{label}{i}", sections=[Section("", text)], label=label)


class CountingLetters(Letters):
    def __init__(self) -> None:
        super().__init__()
        self.embedded = 0

    def embed(self, batch):
        self.embedded += len(batch)
        return super().embed(batch)


@pytest.fixture
def labelled_data():
    # fit: two 'aaaa' documents labelled x, two 'eeee' labelled y; test: one 'aaaa' labelled y (a mistake for both
    # k-means and the probe) -> clusters {aaaa: x, y} and {eeee: y, y}
    train = [labelled(0, "aaaa", "x"), labelled(1, "eeee", "y")]
    val = [labelled(2, "aaaa", "x"), labelled(3, "eeee", "y")]
    test = [labelled(4, "aaaa", "x"), labelled(5, "aaaa", "y"), labelled(6, "eeee", "y"), labelled(7, "eeee", "y")]
    return SimpleNamespace(train_set=train, val_set=val, test_set=test, documents=None)


def test_labelled_evaluations_against_hand_computed_values(labelled_data):
    method = CountingLetters()
    context = EvaluationContext(method, labelled_data)
    results = run_evaluations([Clustering(), LinearProbe(), FewShot(shots=[1], repetitions=4),
                               LabelledEmbeddingEvaluation()], context)
    assert method.embedded == 8  # the four evaluations share the embeddings of the context
    h_labels = -(0.25 * math.log(0.25) + 0.75 * math.log(0.75))
    mutual = 0.25 * math.log(2) + 0.25 * math.log(2 / 3) + 0.5 * math.log(4 / 3)
    assert results["clustering"]["cluster/nmi"] == pytest.approx(mutual / ((h_labels + math.log(2)) / 2))
    assert results["clustering"]["cluster/purity"] == 0.75
    f1_x, f1_y = 2 / 3, 0.8  # x: precision 1/2, recall 1; y: precision 1, recall 2/3
    assert results["linear_probe"] == pytest.approx({"probe/accuracy": 0.75, "probe/error_rate": 0.25,
                                                     "probe/macro_f1": (f1_x + f1_y) / 2})
    assert results["few_shot"] == pytest.approx({"few_shot_1/accuracy_mean": 0.75, "few_shot_1/accuracy_std": 0.0,
                                                 "few_shot_1/macro_f1_mean": (f1_x + f1_y) / 2,
                                                 "few_shot_1/macro_f1_std": 0.0})
    assert results["labelled"] == results["linear_probe"] | results["clustering"]
    table = markdown_table(results)
    assert "### clustering" in table and f"| cluster | {results['clustering']['cluster/nmi']:.4f} | 0.7500 |" in table


def test_labelled_evaluations_refuse_missing_splits_and_labels(labelled_data):
    no_test = SimpleNamespace(train_set=labelled_data.train_set, val_set=labelled_data.val_set, test_set=None,
                              documents=None)
    with pytest.raises(ValueError, match="labelled test split"):
        Clustering().evaluate(EvaluationContext(Letters(), no_test))
    assert Clustering(evaluate_on="val").evaluate(EvaluationContext(Letters(), no_test))["cluster/purity"] == 1.0
    unlabelled = SimpleNamespace(train_set=[Document("u", sections=[Section("", "a")])], val_set=[], test_set=[
        labelled(0, "a", "x")], documents=None)
    with pytest.raises(ValueError, match="must be labelled"):
        LinearProbe().evaluate(EvaluationContext(Letters(), unlabelled))
    with pytest.raises(ValueError, match="need shots >= 1"):
        build_evaluation("{class_path: few_shot, init_args: {shots: []}}")
    with pytest.raises(TypeError, match="not an evaluation"):
        build_evaluation("nonsense")
    assert isinstance(build_evaluation("{class_path: retrieval, init_args: {split: test}}"), RetrievalEvaluation)


@pytest.fixture(scope="module")
def method(tiny_encoder_dir) -> DenseRetrieval:
    torch.manual_seed(0)
    return DenseRetrieval(DocSplit(EncoderSpec(tiny_encoder_dir, pooling="mean", max_length=48),
                                   mlm_weight=0.0)).eval()


def test_retrieval_evaluation_matches_the_independent_paths(method, tmp_path):
    data = WIKIRDataModule(str(_write_wikir(tmp_path / "wikir")), cache_dir=str(tmp_path / "c"), num_workers=0)
    (tmp_path / "folds.txt").write_text("8\n9\n")  # the two test queries, one fold each
    evaluation = RetrievalEvaluation(split="test", depth=5, bm25=True, hybrid="cross_validation",
                                     folds_file=str(tmp_path / "folds.txt"), measures=["ndcg@10", "P@5", "mrr@10", "bpref"])
    context = EvaluationContext(method, data, tmp_path / "out")
    embedded, embed = {}, context.embed

    def recording(key, documents):
        embedded[key] = documents
        return embed(key, documents)

    context.embed = recording
    results = evaluation.evaluate(context)
    assert all(isinstance(q, Query) for q in embedded["retrieval/queries/test"])  # Graph-RoBERTa: single nodes
    assert not any(isinstance(d, Query) for d in embedded["retrieval/corpus"])
    split = data.query_split("test")
    queries, qrels = {q: query.text for q, query in split.queries.items()}, split_qrels(split)
    dense = rank(method, data.corpus, queries, depth=5)
    expected = retrieval_metrics(dense, qrels, evaluation.measures)
    assert {k: results[f"test/{k}"] for k in expected} == pytest.approx(expected)
    bm25 = retrieval_metrics(BM25Index(data.corpus).run(split.queries, 5), qrels, evaluation.measures)
    assert {k: results[f"test/bm25/{k}"] for k in evaluation.measures} == pytest.approx(
        {k: bm25[k] for k in evaluation.measures})
    assert 0.0 <= results["test/hybrid/weight"] <= 1.0 and "test/hybrid/ndcg@10" in results
    written = read_run(tmp_path / "out" / "test.dense.run")
    assert set(written) == set(dense) and all(written[q] == pytest.approx(dense[q]) for q in dense)
    assert (tmp_path / "out" / "test.bm25.run").exists() and (tmp_path / "out" / "test.hybrid.run").exists()
    with pytest.raises(ValueError, match="unknown measure"):
        RetrievalEvaluation(measures=["ndcg@ten"])


def test_retrieval_evaluation_ranks_bm25_with_its_k1_and_b(method, tmp_path):
    """The papers' BM25 settings (reproduce.md: Anserini's k1 0.9, b 0.4) reach the index the evaluation ranks with."""
    data = WIKIRDataModule(str(_write_wikir(tmp_path / "wikir")), cache_dir=str(tmp_path / "c"), num_workers=0)
    context = EvaluationContext(method, data, tmp_path / "out")
    split = data.query_split("test")
    runs = {}
    for b in (0.0, 1.0):
        evaluation = RetrievalEvaluation(split="test", depth=5, bm25=True, bm25_k1=0.9, bm25_b=b)
        runs[b] = evaluation.bm25_run(context, "test")
        assert runs[b] == BM25Index(data.corpus, 0.9, b).run(split.queries, 5)
    assert runs[0.0] != runs[1.0]


def fit_stats_read(run) -> int:
    return json.loads((run / "data_stats.json").read_text())["examples"]["documents_read"]


def test_fit_logs_retrieval_per_epoch_and_evaluate_scores_the_checkpoint(tiny_encoder_dir, tmp_path, caplog):
    from lit_docemb.commands import main

    root, run = _write_wikir(tmp_path / "wikir"), tmp_path / "run"
    config = tmp_path / "fit.yaml"
    config.write_text(f"""trainer:
  accelerator: cpu
  devices: 1
  max_epochs: 1
  limit_train_batches: 2
  limit_val_batches: 1
  logger: false
  enable_progress_bar: false
  default_root_dir: {run}
  callbacks:
    - class_path: lit_docemb.eval.retrieval.RetrievalEvaluation
      init_args: {{split: val, depth: 5, bm25: true, hybrid: dev, measures: [ndcg@10, mrr@10, P@5]}}
    - class_path: lit_docemb.methods.callbacks.RunCheckpoint
      init_args: {{monitor: val/ndcg@10, mode: max}}
model:
  class_path: lit_docemb.methods.DenseRetrieval
  init_args:
    backbone:
      class_path: lit_docemb.methods.DocSplit
      init_args: {{encoder: {{name: {tiny_encoder_dir}, pooling: mean, max_length: 48}}, mlm_weight: 0.0}}
data:
  class_path: lit_docemb.data.WIKIRDataModule
  init_args: {{root: {root}, cache_dir: {tmp_path / 'c'}, mode: retrieval, negatives: uniform, batch_size: 3,
               num_workers: 0}}
""")
    fitted = main(["fit", "--config", str(config)])
    logged = {k: v.item() for k, v in fitted.trainer.callback_metrics.items() if k.startswith("val/")}
    assert {"val/ndcg@10", "val/bm25/ndcg@10", "val/hybrid/ndcg@10", "val/hybrid/weight"} <= set(logged)
    assert (run / "evaluation" / "epoch=0" / "val.hybrid.run").exists()
    checkpoint = run / "checkpoints" / "last.ckpt"
    assert checkpoint.exists() and (run / "config.yaml").exists()
    out = tmp_path / "evaluation"
    caplog.clear()
    main(["evaluate", "--config", str(run / "config.yaml"), "--ckpt_path", str(checkpoint), "--output", str(out),
          "--evaluation", "{class_path: retrieval, init_args: {split: test, search: faiss, depth: 5}}",
          "--accelerator", "cpu"])
    assert [r.getMessage().split(";")[0] for r in caplog.records if r.name == "lit_docemb.data.core.datamodule"] == [
        f"WIKIRDataModule corpus: read {fit_stats_read(run)} documents"]
    record = json.loads((out / "evaluation.json").read_text())
    configured, given = record["results"]["retrieval"], record["results"]["retrieval_2"]
    fit_stats = json.loads((run / "data_stats.json").read_text())  # the fit's read; evaluate's comes from the cache
    assert fit_stats["corpus"] == "WIKIRDataModule" and fit_stats["examples"]["documents_read"] > 0
    read = record["data_stats"]["corpus"]
    assert read["documents_read"] == fit_stats["examples"]["documents_read"]
    assert read["skipped"]["empty_document"] == fit_stats["examples"]["skipped"]["empty_document"] == 1
    # the configured evaluation on the last checkpoint reproduces the values logged in the last epoch
    assert set(configured) <= set(logged)
    assert configured == pytest.approx({k: logged[k] for k in configured})
    assert set(given) >= {"test/mrr@10", "test/ndcg@20", "test/bpref", "test/recall@100", "test/queries"}
    table = (out / "evaluation.md").read_text()
    assert "### retrieval_2" in table and "| val/hybrid |" in table and "ndcg@10" in table
    assert read_run(out / "test.dense.run").keys() == {"8", "9"}


def test_document_matching_plugs_in_as_one_more_evaluation(method, lra_dir, tmp_path):  # noqa: F811
    data = AANDataModule(source=str(lra_dir), mode="pairs", cache_dir=str(tmp_path / "cache"), num_workers=0)
    data.setup("fit")
    results = run_evaluations([build_evaluation("matching")], EvaluationContext(method, data, batch_size=4))
    expected = evaluate_pairs(method, data, batch_size=4)
    assert results["matching"] == pytest.approx({f"matching/{k}": v for k, v in expected.items()})
    assert {"matching/threshold/f1", "matching/classifier/accuracy"} <= set(results["matching"])


def test_default_evaluations_rank_validation_queries_without_a_test_split_or_say_what_is_missing(tmp_path):
    """MSMARCO without the TREC DL topics has no test queries (its validation queries are held out of training, as
    the Graph-RoBERTa config does): they are ranked. A corpus with nothing to evaluate on is one line (ConfigError)
    naming what it lacks, not a traceback."""
    from corpus_files import write_msmarco

    from lit_docemb.eval.runner import default_evaluations
    from lit_docemb.data.corpora.jsonl import JSONLDataModule
    from lit_docemb.data.corpora.msmarco import MSMARCODataModule
    from lit_docemb.errors import ConfigError

    root = str(write_msmarco(tmp_path / "msmarco"))
    held_out = default_evaluations(MSMARCODataModule(root, val_queries_from_train=2, val_split=None))
    dev = default_evaluations(MSMARCODataModule(root))
    assert [(type(e), e.split) for e in held_out + dev] == [(RetrievalEvaluation, "val")] * 2
    assert default_evaluations(MSMARCODataModule(root, test_queries="q.tsv", test_qrels="r.txt"))[0].split == "test"
    with pytest.raises(ConfigError, match="MSMARCODataModule has neither test nor validation queries"):
        default_evaluations(MSMARCODataModule(root, val_split=None))
    (tmp_path / "docs.jsonl").write_text("".join(json.dumps({"id": f"d{i}", "text": f"text {i}"}) + "\n"
                                                 for i in range(4)))
    unlabelled = JSONLDataModule([str(tmp_path / "docs.jsonl")], val_fraction=0.0, num_workers=0)
    unlabelled.setup("fit")
    with pytest.raises(ConfigError, match=r"^evaluate: JSONLDataModule has no query split, no labels.*val_fraction.*heldout"):
        default_evaluations(unlabelled)
