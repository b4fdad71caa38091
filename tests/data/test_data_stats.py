"""Skipped records are visible: one WARNING line per corpus read (also from the Arrow cache), ``data_stats.json``
in the run folder and a ``data_stats`` hyper-parameter of the run's loggers."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import yaml
from runs import tiny_args

from lit_docemb.commands import main
from lit_docemb.data.corpora.arxiv import ArxivDataModule


def arxiv_record(arxiv_id: str, title: str, abstract: str) -> str:
    return json.dumps({"id": arxiv_id, "title": title, "abstract": abstract, "categories": "cs.LG"})


SNAPSHOT = [
    arxiv_record("0704.0001", "Counting pebbles", "We count pebbles on beaches that do not exist."),
    '{"id": "0704.0002", "title": "Broken record",',  # truncated JSON
    arxiv_record("0704.0003", "Singing kettles", "A kettle is trained to whistle in tune."),
    "[1, 2, 3]",  # not an object
    arxiv_record("0704.0005", "", "  "),  # empty document
    arxiv_record("0704.0006", "Swaying bridges", "Goats cross rope bridges calmly."),
]


def summaries(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records
            if r.levelno == logging.WARNING and r.name == "lit_docemb.data.core.datamodule"]


def test_reading_and_cached_reading_print_the_same_warning_line(tmp_path, caplog):
    source = tmp_path / "arxiv-metadata-oai-snapshot.json"
    source.write_text("\n".join(SNAPSHOT) + "\n", encoding="utf-8")
    expected = ("ArxivDataModule documents: read 3 documents (train 3, validation 0); skipped 3 (empty_document 1, "
                "malformed_line 2)")
    for run in ("reading", "cached"):
        caplog.clear()
        dm = ArxivDataModule(source=str(source), cache_dir=str(tmp_path / "cache"), val_fraction=0.0)
        with caplog.at_level(logging.WARNING):
            dm.setup("fit")
        assert summaries(caplog) == [expected], run
        assert dm.data_stats == {"documents": {"documents_read": 3, "train": 3, "validation": 0,
                                               "skipped": {"empty_document": 1, "malformed_line": 2}}}, run
    assert not list(tmp_path.rglob("data_stats.json"))  # no trainer, no run folder: only the line


def test_a_fit_writes_data_stats_json_and_logs_it(tiny_encoder_dir, corpus_jsonl, tmp_path, caplog):
    corpus = tmp_path / "docs.jsonl"
    lines = Path(corpus_jsonl).read_text(encoding="utf-8").splitlines()
    n_documents = len(lines)
    corpus.write_text("\n".join([lines[0], "{not json", '{"id": "empty", "title": "", "sections": []}', *lines[1:],
                                 "[1]"]) + "\n", encoding="utf-8")
    root = tmp_path / "run"
    with caplog.at_level(logging.WARNING):
        main(["fit", *tiny_args(tiny_encoder_dir, str(corpus), root), "--trainer.max_steps=1",
              "--trainer.limit_val_batches=0", "--trainer.logger=lightning.pytorch.loggers.CSVLogger",
              f"--trainer.logger.save_dir={root}"])
    stats = json.loads((root / "data_stats.json").read_text())
    [line] = summaries(caplog)
    documents = stats["documents"]
    assert stats["corpus"] == "JSONLDataModule"
    assert documents["documents_read"] == n_documents == documents["train"] + documents["validation"]
    assert sum(documents["skipped"].values()) == 3 and documents["skipped"]["empty_document"] == 1
    assert line == (f"JSONLDataModule documents: read {n_documents} documents (train {documents['train']}, "
                    f"validation {documents['validation']}); skipped 3 ("
                    + ", ".join(f"{k} {v}" for k, v in documents["skipped"].items()) + ")")
    [hparams] = root.glob("lightning_logs/version_0/hparams.yaml")
    assert yaml.safe_load(hparams.read_text())["data_stats"] == stats
