"""The user's journey through one CLI, for every shipped config: fit a few steps (with the config's own scheduler,
callbacks, logger and evaluations), then on the run folder ``evaluate``, ``embed``, ``export`` (or its one-line
refusal), ``figures`` and a resumed ``fit --ckpt_path last``. Tiny encoder, corpus fixtures in their real on-disk
layout (:mod:`journeys`); a config the matrix cannot prepare fails, naming what to add."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from journeys import ROOT, journey_config
from runs import run_embed

from lit_docemb.commands.cli import main

CONFIGS = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "configs").rglob("*.yaml")
                 if p.parent.name != "trainer")
EXPORTABLE = {"DocSplit", "GraphRoBERTa", "DocumentClassifier", "DenseRetrieval", "CoLDE"}  # + DECA with an encoder


def write_documents(path: Path, titled: bool) -> list[dict]:
    """Five documents in lit_docemb JSONL: titled two-section papers (what CTPE splits), or one untitled section
    (whose text is what a sentence-transformers ``encode`` is given)."""
    from corpus_files import topic_texts

    rows = []
    for i, text in enumerate(topic_texts(5, start=3)):
        words = text.split()
        if titled:
            rows.append({"id": f"doc{i}", "title": " ".join(words[:6]),
                         "sections": [{"heading": "Abstract", "text": " ".join(words[6:90])}]})
        else:
            rows.append({"id": f"doc{i}", "title": "", "sections": [{"heading": "", "text": " ".join(words[:90])}]})
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return rows


#: Product bugs the matrix found and that are not fixed yet: the test fails until they are (strict xfail).
KNOWN = {"configs/colde/aan.yaml": "embed: CoLDE's document_similarity column changes width between batches "
                                   "(ShardWriter: 'Table schema does not match')"}


@pytest.mark.slow
@pytest.mark.parametrize("config", [pytest.param(c, marks=pytest.mark.xfail(strict=True, reason=KNOWN[c]))
                                    if c in KNOWN else c for c in CONFIGS])
def test_journey(config, tiny_encoder_dir, tmp_path, capsys):
    prepared = journey_config(ROOT / config, tiny_encoder_dir, tmp_path)
    run = tmp_path / "run"
    fitted = main(["fit", "--config", str(prepared)])
    assert fitted.trainer.global_step == 2
    wandb_run = getattr(__import__("sys").modules.get("wandb"), "run", None)
    if wandb_run is not None:  # what the end of the fit process does: the offline run file gets its metrics
        wandb_run.finish()
    method = type(fitted.model).__name__
    exportable = method in EXPORTABLE or (method == "DECA" and fitted.model.hparams.get("encoder"))
    saved, last = run / "config.yaml", run / "checkpoints" / "last.ckpt"
    if not last.exists():  # an evaluation-only config (cluster_*) keeps Lightning's default checkpoint
        last = next((run / "checkpoints").glob("epoch=*-step=2.ckpt"))
    assert saved.exists()

    main(["evaluate", "--config", str(saved), "--ckpt_path", str(last), "--device", "cpu", "--batch_size", "8"])
    results = json.loads((run / "evaluation" / "evaluation.json").read_text())["results"]
    assert any(np.isfinite(list(metrics.values())).all() and metrics for metrics in results.values()), results
    assert "written to" in capsys.readouterr().out

    documents = tmp_path / "docs.jsonl"
    rows = write_documents(documents, titled=not exportable)
    run_embed(saved, last, documents, tmp_path / "embedded", "--format", "npy")
    ids = (tmp_path / "embedded" / "ids.txt").read_text().split()
    embedded = np.load(tmp_path / "embedded" / "embeddings.npy")
    assert ids == [r["id"] for r in rows] and embedded.shape[0] == len(rows)
    assert np.isfinite(embedded).all() and not np.allclose(embedded[0], embedded[1])

    export = ["export", "--config", str(saved), "--ckpt_path", str(last), "--output", str(tmp_path / "st")]
    if exportable:
        from sentence_transformers import SentenceTransformer

        main(export)
        st = SentenceTransformer(str(tmp_path / "st"), device="cpu", local_files_only=True, trust_remote_code=True)
        vectors = st.encode([r["sections"][0]["text"] for r in rows], batch_size=5)
        np.testing.assert_allclose(vectors, embedded, atol=1e-5)
    else:
        capsys.readouterr()
        with pytest.raises(SystemExit) as exited:
            main(export)
        err = capsys.readouterr().err.strip()
        assert exited.value.code == 2 and len(err.splitlines()) == 1 and "lit_docemb embed" in err, err
        assert not (tmp_path / "st").exists()

    if fitted.trainer.loggers:
        main(["figures", "--run", str(run)])
        assert (run / "figures" / "training_curves.png").read_bytes()[:4] == b"\x89PNG"
    else:  # logger: false leaves no curves: one line saying so, status 2
        capsys.readouterr()
        with pytest.raises(SystemExit) as exited:
            main(["figures", "--run", str(run)])
        err = capsys.readouterr().err.strip()
        assert exited.value.code == 2 and len(err.splitlines()) == 1 and "no metrics.csv" in err, err

    resume = "last" if last.name == "last.ckpt" else str(last)
    resumed = main(["fit", "--config", str(prepared), "--ckpt_path", resume, "--trainer.max_steps=3"])
    assert resumed.trainer.global_step == 3
