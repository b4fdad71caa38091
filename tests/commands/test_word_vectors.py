"""``python -m lit_docemb word-vectors``: word2vec / GloVe vectors from a text file or from a fit config's DataModule,
written where CTPE's ``init: pretrained`` reads them (the way docs/reproduce.md makes CTPE's word2vec(full), GloVe and
GloVe(full)); bad input is one line naming the argument, status 2."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml

from lit_docemb.commands import main
from lit_docemb.models.ctpe import WordEmbeddings
from lit_docemb.models.word_vectors import read_word_vectors

ROOT = Path(__file__).resolve().parents[2]
TOPICS = [["ant", "bee", "wasp", "moth"], ["car", "bus", "van", "taxi"], ["oak", "elm", "ash", "fir"]]


@pytest.fixture()
def corpus(tmp_path):
    """The same 300 planted-topic documents as a text file (one per line) and as lit_docemb JSONL."""
    rng = np.random.default_rng(0)
    texts = [" ".join(rng.choice(TOPICS[rng.integers(3)], 12)) for _ in range(300)]
    (tmp_path / "corpus.txt").write_text("".join(f"{t}\n" for t in texts))
    (tmp_path / "corpus.jsonl").write_text("".join(json.dumps({"id": f"d{i}", "text": t}) + "\n"
                                                   for i, t in enumerate(texts)))
    return tmp_path


def same_topic_nearer(vectors) -> bool:
    cos = lambda a, b: float(vectors.similarity(a, b))  # noqa: E731
    return min(cos("ant", "bee"), cos("car", "taxi"), cos("oak", "fir")) > max(cos("ant", "car"), cos("bee", "elm"))


def test_glove_from_a_text_file_feeds_ctpe(corpus):
    output = corpus / "vectors" / "glove.txt"
    summary = main(["word-vectors", "--method", "glove", "--input", str(corpus / "corpus.txt"), "--output",
                    str(output), "--vectors_format", "glove_text", "--dim", "10", "--window", "5", "--epochs", "25",
                    "--min_count", "1"])
    assert summary["words"] == 12 and summary["dim"] == 10
    vectors = read_word_vectors(str(output), "glove_text")
    assert same_topic_nearer(vectors)
    tokenizer, table = WordEmbeddings("pretrained", dim=10, min_count=1, vectors=str(output),
                                      vectors_format="glove_text").build(["ant bee car oak"] * 5)
    assert torch.allclose(table.embedding.weight[tokenizer.index["bee"]], torch.tensor(vectors["bee"]))


def test_word2vec_from_a_config_datamodule(corpus):
    config = corpus / "fit.yaml"
    config.write_text(yaml.safe_dump({"data": {"class_path": "lit_docemb.data.JSONLDataModule",
                                               "init_args": {"paths": ["nowhere.jsonl"], "num_workers": 0}}}))
    output = corpus / "w2v.bin"
    summary = main(["word-vectors", "--config", str(config), f"--data.init_args.paths=[{corpus / 'corpus.jsonl'}]",
                    "--output", str(output), "--dim", "10", "--window", "5", "--epochs", "10", "--min_count", "1"])
    assert summary["method"] == "word2vec" and summary["words"] == 12
    assert same_topic_nearer(read_word_vectors(str(output), "word2vec_binary"))


def one_error_line(argv, capsys) -> str:
    with pytest.raises(SystemExit) as stopped:
        main(argv)
    err = capsys.readouterr().err
    assert stopped.value.code == 2 and "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    return lines[0].removeprefix("error: ")


@pytest.mark.parametrize("extra, expected", [
    (["--input", "{root}/missing.txt"], "--input: no file at '{root}/missing.txt'; give a text file"),
    (["--input", "{root}/corpus.txt", "--method", "fasttext"], "--method: must be word2vec or glove, got 'fasttext'"),
    (["--input", "{root}/corpus.txt", "--vectors_format", "npy"], "--vectors_format: must be one of"),
    ([], "--input / --config: give the corpus one way"),
    (["--input", "{root}/corpus.txt", "--config", "{root}/fit.yaml"], "--input / --config: give the corpus one way"),
    (["--input", "{root}/corpus.txt", "--data.init_args.paths", "x"], "--data.init_args.paths: data overrides need"),
    (["--input", "{root}/corpus.txt", "--min_count", "10000"], "--input: no word occurs 10000 times or more"),
    (["--config", "{root}/fit.yaml"], "data.init_args.paths: 'nowhere.jsonl' does not exist"),
    (["--config", "{root}/fit.yaml", "--data.init_args.pathz", "x"], "data.init_args.pathz"),
], ids=["missing-input", "unknown-method", "unknown-format", "no-corpus", "two-corpora", "stray-override",
        "empty-vocabulary", "config-missing-path", "config-unknown-key"])
def test_bad_input_is_one_line_naming_the_argument(corpus, capsys, extra, expected):
    (corpus / "fit.yaml").write_text(yaml.safe_dump({"data": {"class_path": "lit_docemb.data.JSONLDataModule",
                                                              "init_args": {"paths": ["nowhere.jsonl"]}}}))
    argv = ["word-vectors", "--output", str(corpus / "out.bin"), *[a.format(root=corpus) for a in extra]]
    assert one_error_line(argv, capsys).startswith(expected.format(root=corpus))
    assert not (corpus / "out.bin").exists()


def test_glove_full_from_the_arxiv_snapshot_as_documented(tmp_path, monkeypatch):
    """docs/reproduce.md's arXiv (full) line: the CTPE config with its DataModule switched to the metadata snapshot;
    every paper's title and abstract is read (the task folder the config names is not)."""
    from corpus_files import write_arxiv_snapshot

    from lit_docemb.commands.word_vectors import _datamodule_texts

    snapshot = write_arxiv_snapshot(tmp_path / "arxiv-metadata-oai-snapshot.json", n=24)
    switch = ["--data", "lit_docemb.data.ArxivDataModule", "--data.init_args.source", str(snapshot),
              "--data.init_args.cache_dir", str(tmp_path / "cache")]
    texts = list(_datamodule_texts([str(ROOT / "configs/ctpe/arxiv.yaml")], switch)())
    assert len(texts) == 24 and all(len(t.split()) > 5 for t in texts)
    record = json.loads(snapshot.read_text().splitlines()[0])
    assert texts[0].split() == record["title"].split() + record["abstract"].split()  # the title once, the abstract
    output = tmp_path / "arxiv_glove_full.txt"
    summary = main(["word-vectors", "--method", "glove", "--config", str(ROOT / "configs/ctpe/arxiv.yaml"), *switch,
                    "--output", str(output), "--vectors_format", "glove_text", "--dim", "8", "--epochs", "2",
                    "--min_count", "1"])
    assert summary["words"] > 10 and len(output.read_text().splitlines()) == summary["words"]


def test_glove_on_the_task_documents_then_ctpe_fits_from_it(tmp_path):
    """The GloVe row's journey: GloVe on the task's documents (the fit config's data section), then CTPE fitted with
    init: pretrained on that file; its word vectors start from the file's (two Adam steps at lr 0.001 move them
    little)."""
    from journeys import ctpe_task_config

    from lit_docemb.commands import main as cli_main

    config = ctpe_task_config(tmp_path, "glove", {"class_path": "lit_docemb.methods.WordEmbeddings",
                                                  "init_args": {"dim": 8, "min_count": 1}}, 32, "coupled")
    vectors_file = tmp_path / "task_glove.txt"
    main(["word-vectors", "--method", "glove", "--config", config, "--output", str(vectors_file), "--vectors_format",
          "glove_text", "--dim", "8", "--epochs", "5", "--min_count", "1"])
    model = cli_main(["fit", "--config", config, "--model.init_args.embeddings.init_args.init", "pretrained",
                      f"--model.init_args.embeddings.init_args.vectors={vectors_file}",
                      "--model.init_args.embeddings.init_args.vectors_format", "glove_text"]).model
    assert model.trainer.global_step == 2
    vectors = read_word_vectors(str(vectors_file), "glove_text")
    table = model.encoder.token_vectors.embedding.weight.detach()
    rows = [(model.tokenizer.index[w], w) for w in vectors.index_to_key if w in model.tokenizer.index]
    assert len(rows) >= 10
    for row, word in rows:
        torch.testing.assert_close(table[row], torch.tensor(vectors[word]), atol=0.01, rtol=0)
