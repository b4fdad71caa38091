"""The classical baselines' journeys through the real CLI, one per kind of table: DECA's Tables 3-4 (probe error
rate and k-means NMI on Yao et al.'s R8 files) and CTPE's Tables 2-3 (candidate ranking of a task folder), then
``embed`` of a JSONL file without a checkpoint. The documented commands, on fixtures in the releases' layouts."""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path

import numpy as np
from journeys import write_ctpe_task, write_text_gcn_release

from lit_docemb.commands import main

ROOT = Path(__file__).resolve().parents[2]


def test_deca_tables_3_and_4_rows(tmp_path, caplog, capsys):
    source = write_text_gcn_release(tmp_path / "text_gcn", "R8")  # 24 training and 8 test documents, two classes
    out = tmp_path / "tfidf"
    with caplog.at_level(logging.INFO, logger="lit_docemb.methods.classical"):
        main(["evaluate", "--config", str(ROOT / "configs/deca/r8_dc_sc.yaml"), "--config",
              str(ROOT / "configs/baselines/classical/tfidf.yaml"), f"--data.init_args.source={source}",
              "--data.init_args.num_workers=0", f"--data.init_args.cache_dir={tmp_path / 'cache'}", "--output",
              str(out), "--accelerator", "cpu"])
    assert "TfIdf fitted on 32 documents" in caplog.text  # fit_on: all: training and test documents (DECA §4.1)
    results = json.loads((out / "evaluation.json").read_text())["results"]["labelled"]
    # the fixture's two classes have disjoint vocabularies: TF-IDF separates them
    assert results["probe/error_rate"] == 0.0 and results["cluster/nmi"] == 1.0
    assert "| probe |" in capsys.readouterr().out


def test_ctpe_tables_2_and_3_rows(tmp_path, monkeypatch):
    task = write_ctpe_task(tmp_path / "data" / "ctpe" / "arxiv")  # where configs/ctpe/arxiv.yaml reads it
    monkeypatch.chdir(tmp_path)
    main(["evaluate", "--config", str(ROOT / "configs/ctpe/arxiv.yaml"), "--config",
          str(ROOT / "configs/baselines/classical/lsa.yaml"), "--data.init_args.num_workers=0",
          "--model.init_args.representation.init_args.iterations=5", "--accelerator", "cpu"])
    results = json.loads((tmp_path / "runs/ctpe_arxiv/evaluation/evaluation.json").read_text())["results"]
    ranking = {name.removeprefix("ranking/"): value for name, value in results["candidate_ranking"].items()}
    assert ranking["candidates"] == 20 and ranking["queries"] == 20 and ranking["skipped_candidates"] == 0
    for name in ("P@20", "recall@20", "f1@20", "map", "ndcg", "bpref", "paper_map@20", "paper_ndcg@20",
                 "paper_bpref"):
        assert 0.0 <= ranking[name] <= 1.0, name
    assert ranking["map"] > 0.0
    shutil.rmtree(task)


def test_embed_fits_on_its_input_without_a_checkpoint(tmp_path):
    rows = [{"id": f"d{i}", "title": "", "sections": [{"heading": "", "text": text}]}
            for i, text in enumerate(["ocean tide wave", "ocean ship harbour", "python compiler loop"])]
    (tmp_path / "docs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    main(["embed", "--config", str(ROOT / "configs/deca/r8_dc_sc.yaml"), "--config",
          str(ROOT / "configs/baselines/classical/tfidf.yaml"), "--input", str(tmp_path / "docs.jsonl"), "--output",
          str(tmp_path / "embedded"), "--format", "npy", "--accelerator", "cpu", "--devices", "1",
          "--progress_bar", "false"])
    embedded = np.load(tmp_path / "embedded" / "embeddings.npy")
    assert embedded.shape == (3, 8)  # the input's 8 words
    np.testing.assert_allclose(np.linalg.norm(embedded, axis=1), 1.0, atol=1e-6)
    assert embedded[0] @ embedded[1] > 0 and embedded[0] @ embedded[2] == 0  # a shared word, none
