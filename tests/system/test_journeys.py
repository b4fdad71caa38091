"""The user's journey through one CLI, for every shipped config (a model piece such as a baseline encoder joined to
the corpus config its header names): fit a few steps (with the config's own scheduler,
callbacks, logger and evaluations), then on the run folder ``evaluate``, ``embed``, ``export`` (or its one-line
refusal), ``figures`` and a resumed ``fit --ckpt_path last``. Tiny encoder, corpus fixtures in their real on-disk
layout (:mod:`journeys`); a config the matrix cannot prepare fails, naming what to add.

The commands run inside the test process (torch, Lightning and transformers import once), except the quickstart's
first ``fit``, which runs as ``python -m lit_docemb`` as the README says, so the real entry point is exercised."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml
from journeys import ROOT, journey_config, with_pieces
from runs import run_embed

from lit_docemb.commands import main
from lit_docemb.methods.checkpoints import read_checkpoint

PATHS = sorted((ROOT / "configs").rglob("*.yaml"))
SECTIONS = {path: set(yaml.safe_load(path.read_text(encoding="utf-8")) or {}) for path in PATHS}
CONFIGS = [str(path.relative_to(ROOT)) for path in PATHS if {"model", "data"} <= SECTIONS[path]]
"""Every config that names a model and a corpus: one journey each."""
MODEL_PIECES = [str(path.relative_to(ROOT)) for path in PATHS
                if "model" in SECTIONS[path] and "data" not in SECTIONS[path]]
"""Configs that name a model but no corpus (configs/baselines/): given after a corpus config, as the command in their
header says; each runs that command's journey (``fit``: the whole journey; ``evaluate``: the plain-encoder one)."""
TRAINER_PIECES = [str(path.relative_to(ROOT)) for path in PATHS if SECTIONS[path] == {"trainer"}]
"""Configs of trainer settings only, added after a method config (``--config configs/trainer/ddp.yaml``)."""
VALUE_PIECES = [str(path.relative_to(ROOT)) for path in PATHS if "class_path" in SECTIONS[path]]
"""The value of one trainer key that configs name by path (``logger: ../trainer/wandb_logger.yaml``)."""

EXPORTABLE = {"DocSplit", "GraphRoBERTa", "DocumentClassifier", "DenseRetrieval", "CoLDE",
              "MaskedLanguageModelling", "SimCSE"}  # + DECA on an encoder
SUBPROCESS = {"configs/quickstart.yaml"}
TOO_SHORT_TO_QUERY = ("OpenWebTextDataModule",)
"""Corpora whose fixture documents (14-25 words, no title, no label) give the before/after report nothing to score:
it says so in one line per task (a real OpenWebText page is cut in two halves and queried)."""


def test_every_config_is_a_run_a_model_piece_or_a_trainer_piece():
    pieces = MODEL_PIECES + TRAINER_PIECES + VALUE_PIECES
    assert len(CONFIGS) + len(pieces) == len(PATHS), \
        sorted(set(map(str, PATHS)) - {str(ROOT / p) for p in CONFIGS + pieces})
    assert "configs/quickstart.yaml" in CONFIGS and TRAINER_PIECES and MODEL_PIECES and VALUE_PIECES


def documented_command(piece: str) -> tuple[str, str]:
    """(command, corpus config) of the ``python -m lit_docemb <command> --config <corpus> --config <piece>`` line
    that a model piece's header documents."""
    text = (ROOT / piece).read_text(encoding="utf-8")
    found = re.search(rf"python -m lit_docemb (\w+) --config (\S+) --config {re.escape(piece)}\b", text)
    assert found, f"{piece}: its header must show the command that uses it (--config <corpus config> --config {piece})"
    return found.group(1), found.group(2)


def merged(first: dict, second: dict) -> dict:
    """``second`` over ``first``, as a later ``--config`` overrides an earlier one: mappings merge key by key, a
    different ``class_path`` replaces the whole component."""
    if not (isinstance(first, dict) and isinstance(second, dict)):
        return second
    if "class_path" in first and "class_path" in second and first["class_path"] != second["class_path"]:
        return second
    return {**first, **{key: merged(first[key], value) if key in first else value for key, value in second.items()}}


def write_documents(path: Path, titled: bool) -> list[dict]:
    """Five documents in lit_docemb JSONL: titled papers with an abstract and claims (what CTPE splits, at the title
    or before the claims), or one untitled section (whose text is what a sentence-transformers ``encode`` is given)."""
    from corpus_files import topic_texts

    rows = []
    for i, text in enumerate(topic_texts(5, start=3)):
        words = text.split()
        if titled:
            rows.append({"id": f"doc{i}", "title": " ".join(words[:6]),
                         "sections": [{"heading": "Abstract", "text": " ".join(words[6:50])},
                                      {"heading": "Claims", "text": " ".join(words[50:90])}]})
        else:
            rows.append({"id": f"doc{i}", "title": "", "sections": [{"heading": "", "text": " ".join(words[:90])}]})
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return rows


def fit(config: Path, in_subprocess: bool) -> None:
    """``fit --config config``: through ``python -m lit_docemb`` or :func:`lit_docemb.commands.main`."""
    if in_subprocess:
        result = subprocess.run([sys.executable, "-m", "lit_docemb", "fit", "--config", str(config)],
                                capture_output=True, text=True, timeout=600, cwd=config.parent, check=False)
        assert result.returncode == 0, result.stderr[-3000:]
        return
    try:
        main(["fit", "--config", str(config)])
    finally:  # a failed fit leaves no wandb run open for the next config to log into
        finish_wandb()


def finish_wandb() -> None:
    """What the end of a ``fit`` process does: the offline wandb run file gets its metrics, and the next run (the
    resumed fit, the next config) opens a run of its own instead of logging into this one."""
    wandb_run = getattr(sys.modules.get("wandb"), "run", None)
    if wandb_run is not None:
        wandb_run.finish()


def global_step(checkpoint: Path) -> int:
    return read_checkpoint(str(checkpoint))["global_step"]


@pytest.mark.slow
@pytest.mark.parametrize("config", CONFIGS)
def test_journey(config, tiny_encoder_dir, tmp_path, capsys):
    journey(journey_config(ROOT / config, tiny_encoder_dir, tmp_path), tmp_path, capsys, config in SUBPROCESS)


def exportable_method(settings: dict) -> tuple[str, bool]:
    """(the method's class name, whether it exports to sentence-transformers)."""
    method = settings["model"]["class_path"].rsplit(".", 1)[-1]
    backbone = settings["model"]["init_args"].get("backbone") or {}
    if settings["model"]["init_args"].get("sentence_pooling", "none") != "none":  # pooled sentences: no such form
        return method, False
    return method, method in EXPORTABLE or (method == "DECA" and backbone["class_path"].endswith(".EncoderBackbone"))


def journey(prepared: Path, tmp_path: Path, capsys, in_subprocess: bool = False) -> None:
    """fit 2 steps, then evaluate (and its before/after report), embed, export (or its refusal), figures and a resumed
    fit on the run folder."""
    settings = yaml.safe_load(prepared.read_text(encoding="utf-8"))
    method, exportable = exportable_method(settings)
    run = tmp_path / "run"

    fit(prepared, in_subprocess=in_subprocess)
    saved, last = run / "config.yaml", run / "checkpoints" / "last.ckpt"
    if not last.exists():  # an evaluation-only config (cluster_*) keeps Lightning's default checkpoint
        last = next((run / "checkpoints").glob("epoch=*-step=2.ckpt"))
    assert saved.exists() and global_step(last) == 2

    capsys.readouterr()
    main(["evaluate", "--config", str(saved), "--ckpt_path", str(last), "--batch_size", "8"])
    results = json.loads((run / "evaluation" / "evaluation.json").read_text())["results"]
    assert results and all(metrics and np.isfinite(list(metrics.values())).all() for metrics in results.values())
    assert "written to" in capsys.readouterr().out

    main(["evaluate", "--config", str(saved), "--ckpt_path", str(last), "--batch_size", "8", "--before_after",
          "--resamples", "50"])
    assert "| metric | items | before | after | change | 95% interval of the change |" in capsys.readouterr().out
    report = json.loads((run / "evaluation" / "before_after.json").read_text())
    if settings["data"]["class_path"].endswith(TOO_SHORT_TO_QUERY):
        assert not report["rows"] and report["notes"][0].startswith("retrieval: no held-out document"), report
    else:
        assert report["rows"], report["notes"]  # every other corpus fixture offers at least one task
    assert all(np.isfinite([row[k] for k in ("before", "after", "change", "low", "high")]).all()
               for row in report["rows"])

    documents = tmp_path / "docs.jsonl"
    rows = write_documents(documents, titled=not exportable)
    run_embed(saved, last, documents, tmp_path / "embedded", "--format", "npy")
    ids = (tmp_path / "embedded" / "ids.txt").read_text().split()
    vector_file = "former.npy" if method == "CTPE" else "embeddings.npy"
    embedded = np.load(tmp_path / "embedded" / vector_file)
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
        err = capsys.readouterr().err  # besides the refusal, only third-party progress lines (loading weights)
        refusal = [line for line in err.splitlines() if "lit_docemb embed" in line]
        assert exited.value.code == 2 and len(refusal) == 1 and "Traceback" not in err, err
        assert not (tmp_path / "st").exists()

    if settings["trainer"].get("logger") is not False:
        main(["figures", "--run", str(run)])
        assert (run / "figures" / "training_curves.png").read_bytes()[:4] == b"\x89PNG"
    else:  # logger: false leaves no curves: one line saying so, status 2
        capsys.readouterr()
        with pytest.raises(SystemExit) as exited:
            main(["figures", "--run", str(run)])
        err = capsys.readouterr().err.strip()
        assert exited.value.code == 2 and len(err.splitlines()) == 1 and "no metrics.csv" in err, err

    resume = "last" if last.name == "last.ckpt" else str(last)
    try:
        resumed = main(["fit", "--config", str(prepared), "--ckpt_path", resume, "--trainer.max_steps=3"])
    finally:
        finish_wandb()
    assert resumed.trainer.global_step == 3


@pytest.mark.slow
@pytest.mark.parametrize("piece", MODEL_PIECES)
def test_model_piece_journey(piece, tiny_encoder_dir, tmp_path, capsys, caplog):
    """A baseline's documented command on a fixture of its corpus config: ``fit`` runs the whole journey;
    ``evaluate`` scores the encoder as initialised, then ``embed`` and ``export`` it without a checkpoint (the
    exported model encodes as ``embed`` does)."""
    command, corpus_config = documented_command(piece)
    documents = with_pieces(yaml.safe_load((ROOT / corpus_config).read_text(encoding="utf-8")),
                            (ROOT / corpus_config).parent)  # written elsewhere: its pieces' paths would not resolve
    combined = tmp_path / "combined.yaml"
    model = with_pieces(yaml.safe_load((ROOT / piece).read_text(encoding="utf-8")), (ROOT / piece).parent)
    combined.write_text(yaml.safe_dump(merged(documents, model)))
    prepared = journey_config(combined, tiny_encoder_dir, tmp_path)
    if command == "fit":
        journey(prepared, tmp_path, capsys)
        return
    assert command == "evaluate", f"{piece}: a baseline's command is fit or evaluate, not {command}"
    capsys.readouterr()
    main(["evaluate", "--config", str(prepared), "--batch_size", "8"])
    assert "written to" in capsys.readouterr().out
    assert "no --ckpt_path: scoring" in caplog.text
    results = json.loads((tmp_path / "run" / "evaluation" / "evaluation.json").read_text())["results"]
    assert results and all(metrics and np.isfinite(list(metrics.values())).all() for metrics in results.values())

    method, exportable = exportable_method(yaml.safe_load(prepared.read_text(encoding="utf-8")))
    rows = write_documents(tmp_path / "docs.jsonl", titled=False)
    main(["embed", "--config", str(prepared), "--input", str(tmp_path / "docs.jsonl"), "--output",
          str(tmp_path / "embedded"), "--format", "npy", "--batch_size", "3", "--accelerator", "cpu", "--devices", "1",
          "--progress_bar", "false"])
    embedded = np.load(tmp_path / "embedded" / "embeddings.npy")
    assert embedded.shape[0] == len(rows) and np.isfinite(embedded).all()
    if not exportable:  # a document pooled from its sentences (sentence_sum/), no encoder (ClassicalBaseline): refused in one line
        capsys.readouterr()
        with pytest.raises(SystemExit) as exited:
            main(["export", "--config", str(prepared), "--output", str(tmp_path / "st")])
        assert exited.value.code == 2 and "lit_docemb embed" in capsys.readouterr().err
        return
    main(["export", "--config", str(prepared), "--output", str(tmp_path / "st")])
    from sentence_transformers import SentenceTransformer

    st = SentenceTransformer(str(tmp_path / "st"), device="cpu", local_files_only=True)
    vectors = st.encode([r["sections"][0]["text"] for r in rows], batch_size=5)
    np.testing.assert_allclose(vectors, embedded, atol=1e-5)
