"""ClassicalBaseline (lit_docemb/methods/classical.py): an untrained method that survives what evaluate and embed do
with a method, refuses fit in one line, and whose shipped configs parse after the dataset configs they name."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml
from corpus_files import labelled_docs

from lit_docemb.commands import main
from lit_docemb.errors import ConfigError
from lit_docemb.eval.embedding import embed_documents
from lit_docemb.methods import ClassicalBaseline
from lit_docemb.models.classical import ParagraphVectors, TfIdf
from lit_docemb.views.classical import document_key, document_words

ROOT = Path(__file__).resolve().parents[2]
CLASSICAL = sorted((ROOT / "configs" / "baselines" / "classical").glob("*.yaml"))


@pytest.mark.parametrize("representation", [TfIdf(), ParagraphVectors("dbow", dimension=8, epochs=5, min_count=1)],
                         ids=["tfidf", "pv_dbow"])
def test_embed_rows_gives_the_representation_of_each_document_in_order(representation):
    documents = labelled_docs(12)
    method = ClassicalBaseline(representation)
    method.prepare(documents[:10])  # the last two are unseen: transformed (TF-IDF) or inferred (PV)
    method.to(torch.device("cpu")).eval()
    vectors = embed_documents(method, documents, batch_size=5)  # batched by length, put back in order
    words = [document_words(d) for d in documents]
    expected = representation.transform(words, [document_key(d.id, w) for d, w in zip(documents, words)])
    assert vectors.dtype == torch.float32 and vectors.device.type == "cpu"
    np.testing.assert_array_equal(vectors.numpy(), expected)
    assert method.fitted_documents == 10 and not method.training
    assert sum(p.numel() for p in method.parameters()) == 0  # nothing to train


def test_it_refuses_to_embed_before_fitting_and_to_train():
    method = ClassicalBaseline()
    with pytest.raises(ConfigError, match="fitted on a corpus before it embeds"):
        method.collator("predict")
    with pytest.raises(ConfigError, match="no trainable weight"):
        method.setup("fit")


def test_fit_stops_in_one_line(tmp_path, capsys):
    from journeys import write_text_gcn_release

    source = write_text_gcn_release(tmp_path / "text_gcn", "R8")
    with pytest.raises(SystemExit) as stopped:
        main(["fit", "--config", str(ROOT / "configs/deca/r8_dc_sc.yaml"), "--config",
              str(ROOT / "configs/baselines/classical/tfidf.yaml"), f"--data.init_args.source={source}",
              "--data.init_args.num_workers=0", f"--data.init_args.cache_dir={tmp_path / 'cache'}",
              "--trainer.logger=false", f"--trainer.default_root_dir={tmp_path / 'run'}",
              "--trainer.accelerator=cpu"])
    err = capsys.readouterr().err
    assert stopped.value.code == 2 and "Traceback" not in err
    assert [line for line in err.splitlines() if "no trainable weight" in line] and "lit_docemb evaluate" in err


def documented_dataset(piece: Path) -> str:
    """The dataset config of the ``evaluate --config <dataset> --config <piece>`` line of a piece's header."""
    relative = str(piece.relative_to(ROOT))
    found = re.search(rf"python -m lit_docemb evaluate --config (\S+) --config {re.escape(relative)}\b",
                      piece.read_text(encoding="utf-8"))
    assert found, f"{relative}: its header must show the evaluate command that uses it"
    return found.group(1)


def test_every_classical_config_parses_after_the_dataset_config_it_names(capsys):
    assert {p.stem for p in CLASSICAL} >= {"tfidf", "lsa", "lda", "w2v_avg", "pv_dbow", "pv_dm"}
    for piece in CLASSICAL:
        dataset = documented_dataset(piece)
        assert dataset.startswith(("configs/deca/", "configs/ctpe/")), dataset
        with pytest.raises(SystemExit) as exit_info:
            main(["fit", "--config", str(ROOT / dataset), "--config", str(piece), "--print_config"])
        assert exit_info.value.code in (0, None)
        model = yaml.safe_load(capsys.readouterr().out)["model"]
        assert model["class_path"] == "lit_docemb.methods.ClassicalBaseline", piece
        representation = model["init_args"]["representation"]
        assert representation["class_path"].startswith("lit_docemb.models.classical."), piece
        dimension = {k: v for k, v in representation["init_args"].items() if k in ("dimension", "topics")}
        assert set(dimension.values()) <= {100}, (piece, dimension)  # the papers' 100 dimensions


def test_a_task_folders_documents_have_the_keys_they_were_fitted_under(tmp_path):
    """CTPE's ranking reads the task folder's files again: each document must find the key it had in the DataModule,
    so that paragraph vectors give it its trained vector rather than an inferred one."""
    from journeys import write_ctpe_task

    from lit_docemb.data import JSONLDataModule
    from lit_docemb.eval.candidates import read_candidate_task

    task = write_ctpe_task(tmp_path / "task")
    data = JSONLDataModule(paths=[str(task / "candidates.jsonl"), str(task / "test.jsonl")], val_fraction=0.0,
                           num_workers=0)
    data.setup("fit")
    method = ClassicalBaseline(ParagraphVectors("dm", dimension=4, epochs=2, min_count=1))
    method.prepare(data.train_set)
    read = read_candidate_task(task)
    documents = read.candidates + read.queries
    keys = [document_key(d.id, document_words(d)) for d in documents]
    assert len(documents) == 40 and all(key in method.representation.row_of for key in keys)


def wide_vocabulary_docs(n: int, unique_words: int) -> list:
    """``n`` documents of two classes: 8 class words 25 times each, and ``unique_words`` words no other document has
    (a vocabulary of about n x unique_words words, as 20 Newsgroups' raw text has tens of thousands)."""
    from lit_docemb.data.core.document import Document, Section

    classes = {"sea": "ocean tide wave salt harbour ship anchor sailor",
               "code": "python compiler function loop variable parser module thread"}
    docs = []
    for i in range(n):
        label = "sea" if i % 2 else "code"
        own = " ".join(f"w{i}x{chr(97 + j % 26)}{j}" for j in range(unique_words))
        docs.append(Document(f"{label}{i}", sections=[Section("", " ".join([classes[label]] * 25) + " " + own)],
                             label=label))
    return docs


def test_tfidf_is_scored_sparse_without_a_dense_corpus_matrix():
    """DECA's TF-IDF row on 20 Newsgroups: the probe and k-means read the corpus's TF-IDF as a sparse matrix. Here a
    dense (N, V) float64 copy of the 400 fit documents would be 400 x 120k x 8 bytes = 384 MB; the evaluation
    stays far below it (the logistic regression's L-BFGS history, 20 vectors of classes x V, is most of what it
    holds), and scores as it would on the same rows dense."""
    import tracemalloc
    from types import SimpleNamespace

    from scipy import sparse

    from lit_docemb.eval.classification import kmeans_clustering, linear_probe
    from lit_docemb.eval.evaluation import EvaluationContext
    from lit_docemb.eval.labelled import Clustering, LinearProbe
    from lit_docemb.eval.runner import run_evaluations

    docs = wide_vocabulary_docs(600, 200)
    data = SimpleNamespace(train_set=docs[:400], val_set=[], test_set=docs[400:], documents=None)
    method = ClassicalBaseline(TfIdf())
    method.prepare(docs)
    vocabulary = len(method.representation.vectorizer.vocabulary_)
    assert vocabulary > 120_000
    context = EvaluationContext(method, data)
    tracemalloc.start()
    try:
        results = run_evaluations([Clustering(), LinearProbe()], context)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 400 * vocabulary * 8 / 6  # under a sixth of the dense fit matrix alone
    assert results["linear_probe"]["probe/error_rate"] == 0.0 and results["clustering"]["cluster/nmi"] == 1.0
    train = context.features("labelled/test/None/fit", data.train_set)
    assert sparse.issparse(train) and train.shape == (400, vocabulary) and train.dtype == np.float32
    # the same measure as on dense rows: a small vocabulary's matrix scored sparse and dense
    small = ClassicalBaseline(TfIdf())
    small.prepare(labelled_docs(40))
    fit, test = small.document_matrix(labelled_docs(40)[:30]), small.document_matrix(labelled_docs(40)[30:])
    labels = [d.label for d in labelled_docs(40)]
    for score in (linear_probe, kmeans_clustering):
        assert score(fit, labels[:30], test, labels[30:]) == score(fit.toarray(), labels[:30], test.toarray(),
                                                                   labels[30:])
