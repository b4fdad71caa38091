"""Every bad value is one line (issue 18, item 5): a range or semantic check of a method, a loss, a DataModule
or a command stops the command before any step with ``error: <full key or file>: ...`` and status 2, no
traceback. Through the real entry point, on the tiny encoder."""

from __future__ import annotations

import collections
import os
import random
import shutil
from pathlib import Path

import pytest
import torch
import yaml
from runs import save_run, tiny_args

from lit_docemb.commands import main
from lit_docemb.commands.run_folder import last_checkpoint
from lit_docemb.methods import DocSplit
from lit_docemb.models import EncoderSpec

METHODS = {
    "docsplit": ["--model=lit_docemb.methods.DocSplit", "--model.encoder.max_length=64"],
    "graph_roberta": ["--model=lit_docemb.methods.GraphRoBERTa", "--model.node_dim=16",
                      "--model.passages.max_passage_tokens=32", "--model.passages.words_per_passage=3",
                      "--model.cache_passages=false"],
    "colde": ["--model=lit_docemb.methods.CoLDE", "--model.chunk_tokens=16"],
    "deca": ["--model=lit_docemb.methods.DECA"],
    "ctpe": ["--model=lit_docemb.methods.CTPE", "--model.embeddings=lit_docemb.methods.WordEmbeddings"],
    "classified_graph": ["--model=lit_docemb.methods.DocumentClassifier", "--model.labels=[x,y]",
                         "--model.backbone=lit_docemb.methods.GraphRoBERTa", "--model.backbone.encoder.name={encoder}",
                         "--model.backbone.node_dim=16", "--model.backbone.passages.max_passage_tokens=32",
                         "--model.backbone.cache_passages=false"],
}

#: (id, method, extra arguments, the error line's start)
FIT_CASES = [
    ("docsplit-temperature", "docsplit", ["--model.temperature=-1"],
     "model.init_args.temperature: must be > 0, got -1"),
    ("docsplit-temperature-zero", "docsplit", ["--model.temperature=0"],
     "model.init_args.temperature: must be > 0, got 0"),
    ("docsplit-max-length-positions", "docsplit", ["--model.encoder.max_length=100000"],
     "model.init_args.encoder.max_length: 100000 exceeds the 128 positions of encoder"),
    ("docsplit-max-length-zero", "docsplit", ["--model.encoder.max_length=0"],
     "model.init_args.encoder.max_length: must be >= 1"),
    ("docsplit-grad-cache", "docsplit", ["--model.grad_cache_token_budget=0"],
     "model.init_args.grad_cache_token_budget: must be >= 1"),
    ("docsplit-missing-encoder", "docsplit", ["--model.encoder.name={root}/no-such-encoder"],
     "model.init_args.encoder.name: folder '{root}/no-such-encoder' does not exist"),
    ("graph-temperature", "graph_roberta", ["--model.temperature=-0.5"],
     "model.init_args.temperature: must be > 0, got -0.5"),
    ("graph-max-passages", "graph_roberta", ["--model.passages.max_passages=1"],
     "model.init_args.passages.max_passages: must be >= 2 to split documents in two, got 1"),
    ("graph-max-passage-tokens", "graph_roberta", ["--model.passages.max_passage_tokens=4096"],
     "model.init_args.passages.max_passage_tokens: 4096 exceeds the 128 positions"),
    ("graph-words-per-passage", "graph_roberta", ["--model.passages.words_per_passage=0"],
     "model.init_args.passages.words_per_passage: must be >= 1, got 0"),
    ("graph-max-passages-inference", "graph_roberta", ["--model.passages.max_passages_inference=0"],
     "model.init_args.passages.max_passages_inference: must be >= 1, got 0"),
    ("colde-temperature", "colde", ["--model.temperature=0"], "model.init_args.temperature: must be > 0, got 0"),
    ("colde-num-sections", "colde", ["--model.num_sections=7"], "model.init_args.num_sections: must be in 2..5"),
    ("nested-temperature", "classified_graph", ["--model.backbone.temperature=-1"],
     "model.init_args.backbone.init_args.temperature: must be > 0, got -1"),
    ("nested-encoder-max-length", "classified_graph", ["--model.backbone.encoder.max_length=64"],
     "model.init_args.backbone.init_args.encoder.max_length: GraphRoBERTa does not use it"),
    ("nested-words-per-passage", "classified_graph", ["--model.backbone.passages.words_per_passage=0"],
     "model.init_args.backbone.init_args.passages.words_per_passage: must be >= 1, got 0"),
    ("nested-missing-encoder", "classified_graph", ["--model.backbone.encoder.name={root}/no-such-encoder"],
     "model.init_args.backbone.init_args.encoder.name: folder '{root}/no-such-encoder' does not exist"),
    ("wrapper-labels", "classified_graph", ["--model.labels=[x]"],
     "model.init_args.labels: must name at least 2 distinct classes"),
    ("docsplit-max-length-outside-the-encoder", "docsplit", ["--model.max_length=64"],
     "model.init_args.max_length: unknown option of lit_docemb.methods.DocSplit; it is encoder.max_length"),
    ("graph-encoder-max-length", "graph_roberta", ["--model.encoder.max_length=64"],
     "model.init_args.encoder.max_length: GraphRoBERTa does not use it, got 64: leave it at 512 (GraphRoBERTa reads "
     "passages.max_passage_tokens)"),
    ("colde-encoder-max-length", "colde", ["--model.encoder.max_length=64"],
     "model.init_args.encoder.max_length: CoLDE does not use it, got 64: leave it at 512 (CoLDE reads chunk_tokens)"),
    ("colde-max-chunks", "colde", ["--model.max_chunks_per_section=0"],
     "model.init_args.max_chunks_per_section: must be in 1..chunk_embeddings"),
    ("colde-chunk-tokens", "colde", ["--model.chunk_tokens=1000"],
     "model.init_args.chunk_tokens: 1000 exceeds the 128 positions"),
    ("colde-cosine-augmentation", "colde", ["--model.objective=cosine"],
     "model.init_args.augmentation: objective 'cosine'"),
    ("deca-temperature", "deca", ["--model.framework=lit_docemb.methods.deca_components.SimCLR",
                                  "--model.framework.temperature=-1"],
     "model.init_args.framework.init_args.temperature: must be > 0, got -1"),
    ("deca-corruption", "deca", ["--model.backbone=lit_docemb.methods.deca_components.Doc2VecCBackbone",
                                 "--model.backbone.corruption=1.5"],
     "model.init_args.backbone.init_args.corruption: must be in [0, 1), got 1.5"),
    ("deca-encoder-max-length", "deca", ["--model.backbone=lit_docemb.methods.deca_components.EncoderBackbone",
                                         "--model.backbone.encoder.name={encoder}",
                                         "--model.backbone.encoder.max_length=4096"],
     "model.init_args.backbone.init_args.encoder.max_length: 4096 exceeds the 128 positions"),
    ("deca-encoder-pooling", "deca", ["--model.backbone=lit_docemb.methods.deca_components.EncoderBackbone",
                                      "--model.backbone.encoder.name={encoder}", "--model.backbone.encoder.pooling=mean"],
     "model.init_args.backbone.init_args.encoder.pooling: DECA's encoder backbone does not use it, got 'mean'"),
    ("deca-missing-encoder", "deca", ["--model.backbone=lit_docemb.methods.deca_components.EncoderBackbone",
                                      "--model.backbone.encoder.name=./no/such/encoder"],
     "model.init_args.backbone.init_args.encoder.name: folder './no/such/encoder' does not exist; set it to a Hugging "
     "Face model folder"),
    ("ctpe-max-length", "ctpe", ["--model.max_length=0"], "model.init_args.max_length: must be >= 1, got 0"),
    ("ctpe-tfidf-neighbours", "ctpe", ["--model.tfidf_neighbours=0"],
     "model.init_args.tfidf_neighbours: must be >= 1 or null, got 0"),
    ("data-batch-size", "docsplit", ["--data.batch_size=0"], "data.init_args.batch_size: must be >= 1"),
    ("data-batch-size-negative", "docsplit", ["--data.batch_size=-3"], "data.init_args.batch_size: must be >= 1"),
    ("data-num-workers", "docsplit", ["--data.num_workers=-1"], "data.init_args.num_workers: must be >= 0"),
    ("data-val-fraction-one", "docsplit", ["--data.val_fraction=1.0"],
     "data.init_args.val_fraction: must be in [0, 1), got 1.0"),
    ("data-val-fraction-negative", "docsplit", ["--data.val_fraction=-0.1"],
     "data.init_args.val_fraction: must be in [0, 1), got -0.1"),
    ("data-max-documents", "docsplit", ["--data.max_documents=0"], "data.init_args.max_documents: must be >= 1"),
    ("data-missing-path", "docsplit", ["--data.paths=[{root}/nowhere/docs.jsonl]"],
     "data.init_args.paths: '{root}/nowhere/docs.jsonl' does not exist"),
    ("ctpe-pos", "ctpe", ["--model.pos=1.5"], "model.init_args.pos: a token ratio must lie strictly between 0 and 1"),
    ("scheduler-warmup-fraction", "docsplit", ["--model.scheduler=lit_docemb.methods.LinearWarmupDecay",
                                               "--model.scheduler.warmup_fraction=1.5"],
     "model.init_args.scheduler.init_args.warmup_fraction: must be in [0, 1) or null, got 1.5"),
    ("guard-max-consecutive", "docsplit", ["--trainer.callbacks+=lit_docemb.methods.guards.NonFiniteGuard",
                                           "--trainer.callbacks.max_consecutive=0"],
     "trainer.callbacks (NonFiniteGuard).init_args.max_consecutive: must be >= 1, got 0"),
]


def one_error_line(argv: list[str], capsys) -> str:
    """Runs ``python -m lit_docemb <argv>`` in this process; asserts status 2, no traceback and exactly one stderr
    line starting ``error: ``, the last one (loading may print progress before it); returns it without ``error: ``."""
    with pytest.raises(SystemExit) as stopped:
        main(argv)
    err = capsys.readouterr().err
    assert stopped.value.code == 2, err[-2000:]
    assert "Traceback" not in err
    errors = [line for line in err.splitlines() if line.startswith("error")]
    assert len(errors) == 1 and errors[0].startswith("error: ") and err.endswith(errors[0] + "\n"), err[-2000:]
    return errors[0].removeprefix("error: ")


@pytest.mark.parametrize("method, extra, expected", [case[1:] for case in FIT_CASES], ids=[c[0] for c in FIT_CASES])
def test_a_bad_value_of_fit_is_one_line_naming_the_key(tiny_encoder_dir, corpus_jsonl, tmp_path, capsys, method,
                                                       extra, expected):
    base = tiny_args(tiny_encoder_dir, corpus_jsonl, tmp_path)
    encoder = [f"--model.encoder.name={tiny_encoder_dir}"] * (method not in ("ctpe", "deca", "classified_graph"))
    model = [arg.format(encoder=tiny_encoder_dir) for arg in METHODS[method][:1] + encoder + METHODS[method][1:]]
    extra = [e.format(root=tmp_path, encoder=tiny_encoder_dir) for e in extra]
    argv = ["fit", *model, *base[3:], "--trainer.max_steps=1", *extra]
    assert one_error_line(argv, capsys).startswith(expected.format(root=tmp_path))
    assert not (tmp_path / "checkpoints").exists()  # stopped before any step


# --- checkpoints: every command names the file and what to do ---------------------------------------------------
def bad_checkpoint(kind: str, good: Path, folder: Path) -> Path:
    """A checkpoint path that cannot be read: missing, a folder, empty, truncated, random bytes, pickled code."""
    path = folder / f"{kind}.ckpt"
    if kind == "folder":
        path.mkdir()
    elif kind == "empty":
        path.write_bytes(b"")
    elif kind == "truncated":
        path.write_bytes(good.read_bytes()[: good.stat().st_size // 2])
    elif kind == "random":
        path.write_bytes(random.Random(0).randbytes(4096))
    elif kind == "code":
        torch.save({"state_dict": {}, "callback": collections.OrderedDict, "x": Path("p")}, path)
    return path


CHECKPOINT_PROBLEMS = {
    "missing": "does not exist; give another checkpoint of the run",
    "folder": "is a folder, not a checkpoint file; give another checkpoint of the run",
    "empty": "is empty (0 bytes; a save that never finished); give another checkpoint of the run",
    "truncated": "is not a torch checkpoint (not a zip archive: truncated, corrupt or another kind of file)",
    "random": "is not a torch checkpoint (not a zip archive: truncated, corrupt or another kind of file)",
    "code": "holds objects other than weights and plain values (",
}


@pytest.fixture(scope="module")
def saved_run(tiny_encoder_dir, corpus_jsonl, tmp_path_factory) -> tuple[Path, Path]:
    """A run folder (config.yaml with model, data and trainer; checkpoints/last.ckpt) of a tiny DocSplit."""
    root = tmp_path_factory.mktemp("run")
    method = DocSplit(EncoderSpec(tiny_encoder_dir, max_length=64))
    config, ckpt = save_run(method, root / "checkpoints", {"encoder": {"name": tiny_encoder_dir, "max_length": 64}})
    full = yaml.safe_load(config.read_text())
    full["data"] = {"class_path": "lit_docemb.data.JSONLDataModule",
                    "init_args": {"paths": [corpus_jsonl], "batch_size": 4, "num_workers": 0}}
    full["trainer"] = {"accelerator": "cpu", "devices": 1, "logger": False, "default_root_dir": str(root)}
    (root / "config.yaml").write_text(yaml.safe_dump(full))
    config.unlink()
    return root / "config.yaml", ckpt


COMMANDS = {
    "evaluate": lambda config, ckpt, out: ["evaluate", "--config", str(config), "--ckpt_path", str(ckpt),
                                           "--output", str(out / "evaluation"), "--accelerator", "cpu"],
    "embed": lambda config, ckpt, out: ["embed", "--config", str(config), "--ckpt_path", str(ckpt), "--input",
                                        str(out / "docs.jsonl"), "--output", str(out / "vectors"),
                                        "--accelerator", "cpu", "--devices", "1", "--progress_bar", "false"],
    "export": lambda config, ckpt, out: ["export", "--config", str(config), "--ckpt_path", str(ckpt), "--output",
                                         str(out / "exported")],
}


@pytest.mark.parametrize("command, kind", [
    ("evaluate", "empty"), ("evaluate", "random"), ("evaluate", "folder"),
    ("embed", "truncated"), ("embed", "missing"), ("embed", "code"),
    ("export", "random"), ("export", "empty"), ("export", "truncated"),
])
def test_an_unreadable_checkpoint_is_one_line_naming_the_file(saved_run, corpus_jsonl, tmp_path, capsys, command,
                                                              kind):
    config, good = saved_run
    (tmp_path / "docs.jsonl").write_text(Path(corpus_jsonl).read_text())
    bad = bad_checkpoint(kind, good, tmp_path)
    line = one_error_line(COMMANDS[command](config, bad, tmp_path), capsys)
    assert line.startswith(f"--ckpt_path: {bad} {CHECKPOINT_PROBLEMS[kind]}")
    assert "weights_only=False" not in line
    assert not any((tmp_path / name).exists() for name in ("evaluation", "vectors", "exported"))


@pytest.mark.parametrize("kind", ["empty", "truncated", "random", "folder"])
def test_fit_with_an_unreadable_checkpoint_is_one_line(saved_run, tiny_encoder_dir, corpus_jsonl, tmp_path, capsys,
                                                       kind):
    bad = bad_checkpoint(kind, saved_run[1], tmp_path)
    argv = ["fit", *tiny_args(tiny_encoder_dir, corpus_jsonl, tmp_path / "run"), f"--ckpt_path={bad}"]
    assert one_error_line(argv, capsys).startswith(f"--ckpt_path: {bad} {CHECKPOINT_PROBLEMS[kind]}")


def test_last_falls_back_to_the_newest_intact_checkpoint(saved_run, tmp_path, caplog):
    good = saved_run[1]
    folder = tmp_path / "checkpoints"
    folder.mkdir()
    older, newer = folder / "epoch=0-step=2.ckpt", folder / "epoch=1-step=4.ckpt"
    for i, path in enumerate([older, newer]):
        shutil.copy(good, path)
        os.utime(path, (1_000_000 + i, 1_000_000 + i))
    (folder / "last.ckpt").write_bytes(good.read_bytes()[:1000])  # killed during its save
    assert last_checkpoint(str(tmp_path)) == str(newer)
    assert f"--ckpt_path last: {folder / 'last.ckpt'} cannot be read; resuming from {newer}" in caplog.text
    newer.write_bytes(b"")
    assert last_checkpoint(str(tmp_path)) == str(older)
    shutil.copy(good, folder / "last.ckpt")  # intact again: used as it is
    assert last_checkpoint(str(tmp_path)) == str(folder / "last.ckpt")


def test_last_with_no_intact_checkpoint_is_one_line(saved_run, tiny_encoder_dir, corpus_jsonl, tmp_path, capsys):
    (tmp_path / "checkpoints").mkdir()
    (tmp_path / "checkpoints" / "last.ckpt").write_bytes(b"")
    argv = ["fit", *tiny_args(tiny_encoder_dir, corpus_jsonl, tmp_path), "--ckpt_path=last"]
    assert one_error_line(argv, capsys) == (
        f"--ckpt_path last: {tmp_path / 'checkpoints' / 'last.ckpt'} is empty (0 bytes; a save that never finished);"
        f" give another checkpoint of the run (its checkpoints/*.ckpt), or --ckpt_path last to take the newest intact"
        f" one; no other checkpoint of {tmp_path} is intact either: start over in another trainer.default_root_dir "
        f"(or with LIT_DOCEMB_OVERWRITE=1)")


def test_a_missing_file_inside_the_corpus_root_is_one_line(tiny_encoder_dir, tmp_path, capsys):
    root = tmp_path / "wikir"
    (root / "training").mkdir(parents=True)  # the root exists, its documents.csv does not
    argv = ["fit", "--model=lit_docemb.methods.DocSplit", f"--model.encoder.name={tiny_encoder_dir}",
            "--model.encoder.max_length=64", "--data=lit_docemb.data.corpora.wikir.WIKIRDataModule", f"--data.root={root}",
            f"--data.cache_dir={tmp_path / 'cache'}", "--data.num_workers=0", "--trainer.accelerator=cpu",
            "--trainer.devices=1", "--trainer.logger=false", "--trainer.max_steps=1",
            f"--trainer.default_root_dir={tmp_path / 'run'}"]
    assert one_error_line(argv, capsys).startswith(
        f"WIKIR documents not found: {root / 'documents.csv'} does not exist; expected ")
    assert not (tmp_path / "run" / "checkpoints").exists()


@pytest.mark.parametrize("command, flag, value, expected", [
    ("embed", "--batch_size", "0", "--batch_size: must be >= 1 (documents per batch and device), got 0"),
    ("embed", "--num_workers", "-2", "--num_workers: must be >= 0 (0 reads in the main process), got -2"),
    ("evaluate", "--batch_size", "-1", "--batch_size: must be >= 1 (documents per forward pass), got -1"),
])
def test_a_bad_command_option_is_one_line(saved_run, corpus_jsonl, tmp_path, capsys, command, flag, value, expected):
    config, ckpt = saved_run
    (tmp_path / "docs.jsonl").write_text(Path(corpus_jsonl).read_text())
    assert one_error_line([*COMMANDS[command](config, ckpt, tmp_path), flag, value], capsys) == expected


@pytest.mark.parametrize("command", ["embed", "export"])
@pytest.mark.parametrize("backbone_args, expected", [
    ({"temperature": -1}, "model.init_args.backbone.init_args.temperature: must be > 0, got -1"),
    ({"passages": {"words_per_passage": 0}},
     "model.init_args.backbone.init_args.passages.words_per_passage: must be >= 1, got 0"),
])
def test_a_bad_value_of_a_nested_method_in_a_run_config_is_one_line(tiny_encoder_dir, corpus_jsonl, tmp_path, capsys,
                                                                   command, backbone_args, expected):
    backbone = {"class_path": "lit_docemb.methods.GraphRoBERTa",
                "init_args": {"encoder": {"name": str(tiny_encoder_dir)}, "node_dim": 16, **backbone_args}}
    backbone["init_args"]["passages"] = {"max_passage_tokens": 32, **backbone_args.get("passages", {})}
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump({"model": {"class_path": "lit_docemb.methods.DocumentClassifier",
                                                "init_args": {"labels": ["x", "y"], "backbone": backbone}}}))
    inputs = ["--input", str(corpus_jsonl)] * (command == "embed")
    argv = [command, "--config", str(config), *inputs, "--output", str(tmp_path / "out")]
    assert one_error_line(argv, capsys).startswith(expected)
    assert not (tmp_path / "out").exists()
