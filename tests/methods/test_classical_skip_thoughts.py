"""DECA's Skip-Thought row and CTPE's avg-Skip-thoughts as a classical baseline (``SkipThoughtAverage`` in
lit_docemb/models/classical.py): a document's vector against the mean of a step-by-step NumPy reference over its
sentences, on a tiny release in the authors' layout; the documented ``evaluate`` on text_gcn's raw 20ng files through
the real CLI; a missing release stops in one line naming the key."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from corpus_files import write_skip_thoughts_release
from journeys import write_text_gcn_release
from skip_thoughts_reference import reference_vector

from lit_docemb.commands import main
from lit_docemb.data.core.document import Document, Section
from lit_docemb.eval.embedding import embed_documents
from lit_docemb.methods import ClassicalBaseline
from lit_docemb.models.classical import SkipThoughtAverage
from lit_docemb.views.classical import document_units

ROOT = Path(__file__).resolve().parents[2]
WORDS = ["the", "keeper", "counted", "gulls", "storm", "came", "late", "lamp"]  # "left", "zebras" are UNK


def document(identifier: str, title: str, text: str) -> Document:
    return Document(identifier, title, [Section("", text)])


DOCUMENTS = [
    document("a", "The lamp", "The keeper counted gulls.\nThe storm came late! The gulls left."),
    document("b", "", "Storm gulls came"),
    document("c", "", "1999 -- 2001 ... 42"),  # no word: no sentence, the zero vector
    document("d", "Zebras", "The lamp came late? Gulls counted the keeper. Storm."),
]


def test_a_document_is_the_mean_of_its_sentences_reference_vectors(tmp_path):
    folder = write_skip_thoughts_release(tmp_path / "skip", WORDS)
    representation = SkipThoughtAverage(str(folder), batch_words=8)  # passes mix documents' sentences
    lengths = [[1] * n for n in (1, 2, 3, 3, 4, 9)]
    assert [[len(rows) for _, rows in batch] for batch in representation._batches(list(enumerate(lengths)))] == \
        [[1, 2], [3, 3], [4], [9]]  # 2 x 2, 2 x 3 and 4 fit in 8 words, 9 runs alone
    method = ClassicalBaseline(representation)
    method.prepare(DOCUMENTS)
    method.to(torch.device("cpu")).eval()
    vectors = embed_documents(method, DOCUMENTS, batch_size=2).numpy()
    assert document_units(DOCUMENTS[0], "sentences") == ["the lamp", "the keeper counted gulls",
                                                         "the storm came late", "the gulls left"]
    assert vectors.shape == (4, 6 + 2 * 4) and vectors.dtype == np.float32
    for row, doc in enumerate(DOCUMENTS):
        sentences = document_units(doc, "sentences")
        expected = np.mean([reference_vector(folder, s) for s in sentences], axis=0) if sentences else np.zeros(14)
        np.testing.assert_allclose(vectors[row], expected, atol=1e-5, err_msg=doc.id)
    assert np.abs(vectors[2]).max() == 0 and np.abs(vectors[0] - vectors[3]).max() > 1e-3
    # the frozen encoder moves with the method and trains nothing
    assert method.representation_module is method.representation.module
    assert not any(p.requires_grad for p in method.parameters())


def test_the_documented_deca_20news_command_scores_it(tmp_path, capsys):
    source = write_text_gcn_release(tmp_path / "text_gcn", "20ng")  # raw corpus/20ng.txt and the cleaned file
    fixture_words = sorted({w for d in DOCUMENTS for w in document_units(d, "words")} | {"ocean", "python"})
    folder = write_skip_thoughts_release(tmp_path / "skip", fixture_words)
    out = tmp_path / "skip_thought"
    main(["evaluate", "--config", str(ROOT / "configs/deca/20news_dc_sc.yaml"), "--config",
          str(ROOT / "configs/baselines/classical/skip_thought.yaml"), "--data.init_args.text_gcn_corpus", "raw",
          f"--data.init_args.source={source}", "--data.init_args.num_workers=0",
          f"--data.init_args.cache_dir={tmp_path / 'cache'}",
          f"--model.init_args.representation.init_args.folder={folder}", "--output", str(out),
          "--accelerator", "cpu"])
    record = json.loads((out / "evaluation.json").read_text())
    labelled = record["results"]["labelled"]
    assert 0.0 <= labelled["probe/error_rate"] <= 1.0 and "cluster/nmi" in labelled
    assert "| probe |" in capsys.readouterr().out


def test_a_missing_release_stops_the_cli_in_one_line(tmp_path, capsys):
    source = write_text_gcn_release(tmp_path / "text_gcn", "20ng")
    with pytest.raises(SystemExit) as stopped:
        main(["evaluate", "--config", str(ROOT / "configs/deca/20news_dc_sc.yaml"), "--config",
              str(ROOT / "configs/baselines/classical/skip_thought.yaml"), f"--data.init_args.source={source}",
              f"--model.init_args.representation.init_args.folder={tmp_path / 'absent'}", "--accelerator", "cpu"])
    error = capsys.readouterr().err.strip()
    assert stopped.value.code == 2 and "Traceback" not in error and len(error.splitlines()) == 1, error
    assert "model.init_args.representation.init_args.folder:" in error and "absent' lacks uni_skip.npz" in error
