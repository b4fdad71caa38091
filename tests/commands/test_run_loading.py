"""One way to load a run: every command restores a run through the method's own ``on_load_checkpoint`` (DECA's
and CTPE's vocabularies size their tables there), from a run folder (``--run_dir``) or from ``--config`` and
``--ckpt_path``; a folder that is not a run folder is one line naming it and what it lacks."""

from __future__ import annotations

from pathlib import Path

import lightning as L
import pytest
import torch
import yaml
from corpus_files import WORDS, _write_wikir, topic_texts, write_lra

import lit_docemb.commands.dense_search as dense_search_command
import lit_docemb.commands.matching as matching_command
from lit_docemb.augment import Vocabulary
from lit_docemb.commands import main
from lit_docemb.methods import DECA, DocSplit
from lit_docemb.methods.deca_components import Doc2VecCAlone, Doc2VecCBackbone

BACKBONE = {"embedding_dim": 8, "min_word_count": 1}


def deca_run(folder: Path, data: dict) -> DECA:
    """A run folder as a fit leaves it (config.yaml, checkpoints/last.ckpt) of a DECA whose Doc2VecC vocabulary,
    and so its word table, comes from the corpus: a DECA built from the config alone has an empty table."""
    torch.manual_seed(0)
    method = DECA(Doc2VecCBackbone(**BACKBONE), Doc2VecCAlone())
    method._set_vocabulary(Vocabulary.from_texts([" ".join(WORDS) + " entry", *topic_texts(8)]))
    checkpoint = {"state_dict": method.state_dict(), "pytorch-lightning_version": L.__version__}
    method.on_save_checkpoint(checkpoint)
    (folder / "checkpoints").mkdir(parents=True)
    torch.save(checkpoint, folder / "checkpoints" / "last.ckpt")
    config = {"model": {"class_path": "lit_docemb.methods.DECA", "init_args": {
        "backbone": {"class_path": "lit_docemb.methods.deca_components.Doc2VecCBackbone", "init_args": BACKBONE},
        "framework": {"class_path": "lit_docemb.methods.deca_components.Doc2VecCAlone"}}},
        "data": data, "trainer": {"logger": False}}
    (folder / "config.yaml").write_text(yaml.safe_dump(config))
    return method


def spy(monkeypatch, module, name: str) -> list:
    """Records the method a command hands ``module.name`` (the real function still runs)."""
    seen, real = [], getattr(module, name)

    def recorded(method, *args, **kwargs):
        seen.append(method)
        return real(method, *args, **kwargs)

    monkeypatch.setattr(module, name, recorded)
    return seen


def table_size(method: DECA) -> int:
    return method.backbone.word_embeddings.num_embeddings


@pytest.mark.parametrize("form", ["run_dir", "config"])
def test_dense_search_restores_the_checkpoints_vocabulary(form, tmp_path, monkeypatch):
    """It loaded weights only (``load_method_checkpoint``): DECA's table, sized by its vocabulary in
    ``on_load_checkpoint``, did not fit the method built from the config, and the command stopped."""
    root = _write_wikir(tmp_path / "wikir")
    data = {"class_path": "lit_docemb.data.WIKIRDataModule",
            "init_args": {"root": str(root), "cache_dir": str(tmp_path / "cache")}}
    trained = deca_run(tmp_path / "runs" / "deca", data)
    seen = spy(monkeypatch, dense_search_command, "rank")
    run = tmp_path / "runs" / "deca"
    where = ["--run_dir", str(run)] if form == "run_dir" else [
        "--config", str(run / "config.yaml"), "--ckpt_path", str(run / "checkpoints" / "last.ckpt"),
        "--output", str(run / "dense-search" / "test.run")]
    main(["dense-search", *where, "--depth", "3", "--accelerator", "cpu"])
    assert table_size(seen[0]) == table_size(trained) > 1
    assert seen[0].index == trained.index
    assert torch.equal(seen[0].backbone.word_embeddings.weight, trained.backbone.word_embeddings.weight)
    assert (run / "dense-search" / "test.run").read_text().count(" Q0 ") > 0  # inside the run folder


def test_matching_restores_the_checkpoints_vocabulary(tmp_path, monkeypatch):
    data = {"class_path": "lit_docemb.data.AANDataModule",
            "init_args": {"source": str(write_lra(tmp_path / "lra")), "mode": "pairs",
                          "cache_dir": str(tmp_path / "cache"), "num_workers": 0}}
    trained = deca_run(tmp_path / "runs" / "deca", data)
    seen = spy(monkeypatch, matching_command, "evaluate_pairs")
    metrics = main(["matching", "--run_dir", str(tmp_path / "runs" / "deca"), "--accelerator", "cpu"])
    assert table_size(seen[0]) == table_size(trained) > 1
    assert torch.equal(seen[0].backbone.word_embeddings.weight, trained.backbone.word_embeddings.weight)
    assert 0.0 <= metrics["threshold/f1"] <= 1.0


@pytest.mark.parametrize("command", ["evaluate", "embed", "export", "figures", "interpolate", "dense-search",
                                     "matching"])
@pytest.mark.parametrize("lacks", ["folder", "config.yaml", "checkpoint"])
def test_a_run_dir_that_is_not_a_run_folder_is_one_line(command, lacks, tmp_path, capsys):
    run = tmp_path / "runs" / "x"
    if lacks != "folder":
        run.mkdir(parents=True)
    if lacks == "checkpoint":
        (run / "config.yaml").write_text("model: {class_path: lit_docemb.methods.DocSplit}\n")
    extra = {"embed": ["--input", str(tmp_path / "docs.jsonl")], "figures": ["--attention", "docs.jsonl"]}
    with pytest.raises(SystemExit) as stop:
        main([command, "--run_dir", str(run), *extra.get(command, [])])
    assert stop.value.code == 2
    expected = {"folder": "no such folder", "config.yaml": "not a run folder: it has no config.yaml",
                "checkpoint": "not a run folder: it has no checkpoint (checkpoints/last.ckpt)"}[lacks]
    err = capsys.readouterr().err
    assert err.startswith(f"error: --run_dir {run}: {expected}") and err.count("\n") == 1, err


def test_embed_and_export_read_a_run_folder_and_write_inside_it(tiny_encoder_dir, tmp_path):
    from runs import save_run, write_tsv

    from lit_docemb.data.core.document import Document, Section

    args = {"encoder": {"name": tiny_encoder_dir, "pooling": "mean", "max_length": 64}}
    run = tmp_path / "runs" / "docsplit"
    save_run(DocSplit(**args), run, args)
    (run / "checkpoints").mkdir()
    (run / "last.ckpt").rename(run / "checkpoints" / "last.ckpt")
    docs = write_tsv(tmp_path / "docs.tsv", [Document(f"d{i}", sections=[Section("", text)])
                                                    for i, text in enumerate(topic_texts(5))], bad_lines=False)
    main(["embed", "--run_dir", str(run), "--input", str(docs), "--accelerator", "cpu", "--devices", "1",
          "--progress_bar", "false"])
    assert (run / "embeddings" / "embeddings.parquet").is_file()
    main(["export", "--run_dir", str(run)])
    assert (run / "export" / "modules.json").is_file()
