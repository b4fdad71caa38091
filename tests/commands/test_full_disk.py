"""A full disk (``OSError`` 28) while a checkpoint or an output is written is one line naming the file and what was
kept, exit status 2 (issue 38, item 6): nothing partial is left under the final name. The disk is simulated by a
writer that raises ``ENOSPC`` part-way, as a real one does once the device is full; through the real entry point."""

from __future__ import annotations

import errno
import io
import os
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import torch
from runs import tiny_args
from test_bad_values import COMMANDS, one_error_line, saved_run  # noqa: F401  (saved_run: a fixture)

from lit_docemb.commands import main
from lit_docemb.errors import DiskFull, staged_write
from lit_docemb.eval import embedding_writers
from lit_docemb.export.forms import MethodExport


class FullAfter(io.RawIOBase):
    """A file that takes ``room`` bytes, then raises ``OSError(ENOSPC)`` as a write to a full device does."""

    def __init__(self, file, room: int) -> None:
        super().__init__()
        self.file, self.room = file, room

    def writable(self) -> bool:
        return True

    def write(self, data) -> int:
        if len(data) > self.room:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        self.room -= len(data)
        return self.file.write(data)


def fill_disk_at(monkeypatch, module, name: str, call: int = 1, room: int = 2000) -> list:
    """Makes the ``call``-th call of ``module.name(obj, file, ...)`` write to a disk that is full after ``room``
    bytes (a path is opened for it); returns the paths it was given."""
    original, given = getattr(module, name), []

    def writer(obj, file, *args, **kwargs):
        given.append(file if isinstance(file, str | Path) else file.name)
        if len(given) != call:
            return original(obj, file, *args, **kwargs)
        with open(file, "wb") if isinstance(file, str | Path) else open(os.dup(file.fileno()), "wb") as opened:
            return original(obj, FullAfter(opened, room), *args, **kwargs)

    monkeypatch.setattr(module, name, writer)
    return given


def test_a_full_disk_during_a_checkpoint_save_names_it_and_keeps_the_last_complete_one(
        tiny_encoder_dir, corpus_jsonl, tmp_path, capsys, monkeypatch):
    """The second epoch's checkpoint finds the disk full inside torch's zip writer (two tracebacks before)."""
    given = fill_disk_at(monkeypatch, torch, "save", call=2)
    argv = ["fit", *tiny_args(tiny_encoder_dir, corpus_jsonl, tmp_path), "--trainer.max_epochs=2",
            "--trainer.limit_train_batches=1", "--trainer.limit_val_batches=0",
            "--trainer.callbacks+=lit_docemb.methods.callbacks.RunCheckpoint"]
    line = one_error_line(argv, capsys)
    checkpoints = tmp_path / "checkpoints"
    assert len(given) == 2 and Path(given[1]).parent == checkpoints  # the second save, under a temporary name
    assert line == (f"{checkpoints / 'epoch=1-step=2.ckpt'}: no space left on device while writing it; the last "
                    f"complete checkpoint, {checkpoints / 'last.ckpt'} (-> epoch=0-step=1.ckpt), is kept (free space, "
                    "then resume with --ckpt_path last)")
    assert sorted(os.listdir(checkpoints)) == ["epoch=0-step=1.ckpt", "last.ckpt"]  # no partial file
    assert torch.load(checkpoints / "last.ckpt", weights_only=True)["global_step"] == 1


def test_a_full_disk_while_evaluate_writes_leaves_no_partial_file(saved_run, tmp_path, capsys,  # noqa: F811
                                                                   monkeypatch):
    config, ckpt = saved_run
    out = tmp_path / "evaluation"
    out.mkdir()
    (out / "evaluation.json").write_text("{}\n")  # a previous evaluation's
    original = Path.write_text

    def write_text(path, text, *args, **kwargs):
        if path.name.startswith(".evaluation.json."):
            original(path, text[:10], *args, **kwargs)
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))
        return original(path, text, *args, **kwargs)

    monkeypatch.setattr(Path, "write_text", write_text)
    argv = [*COMMANDS["evaluate"](config, ckpt, tmp_path), "--data.init_args.val_fraction=0.2"]
    line = one_error_line(argv, capsys)
    assert line == (f"{out / 'evaluation.json'}: no space left on device while writing it; the previous "
                    "evaluation.json is kept")
    assert sorted(os.listdir(out)) == ["evaluation.json", "evaluation.md"]
    assert (out / "evaluation.json").read_text() == "{}\n"


def test_a_full_disk_while_embed_writes_its_parquet_leaves_no_partial_file(saved_run, corpus_jsonl,  # noqa: F811
                                                                           tmp_path, capsys, monkeypatch):
    config, ckpt = saved_run
    (tmp_path / "docs.jsonl").write_text(Path(corpus_jsonl).read_text())
    given = fill_disk_at(monkeypatch, pq, "write_table")
    line = one_error_line(COMMANDS["embed"](config, ckpt, tmp_path), capsys)
    vectors = tmp_path / "vectors"
    assert Path(given[0]).parent == vectors and Path(given[0]).name != "embeddings.parquet"
    assert line == f"{vectors / 'embeddings.parquet'}: no space left on device while writing it; nothing is written " \
                   "under it"
    assert os.listdir(vectors) == []  # the shards are gone with the space they held


def test_a_full_disk_while_embed_writes_a_shard_removes_it(saved_run, corpus_jsonl, tmp_path, capsys,  # noqa: F811
                                                           monkeypatch):
    config, ckpt = saved_run
    (tmp_path / "docs.jsonl").write_text(Path(corpus_jsonl).read_text())
    original = embedding_writers.append_rows

    def append_rows(writer, path, table):
        original(writer, path, table)  # the rows written, then the disk is full
        raise OSError(errno.ENOSPC, "Error writing bytes to file. Detail: [errno 28] No space left on device")

    monkeypatch.setattr(embedding_writers, "append_rows", append_rows)
    line = one_error_line(COMMANDS["embed"](config, ckpt, tmp_path), capsys)
    vectors = tmp_path / "vectors"
    assert line == (f"{vectors / 'shards' / 'rank-00000.parquet'}: no space left on device while writing it; the shard "
                    f"is removed; the outputs in {vectors} are as they were")
    assert not list(vectors.rglob("*.parquet"))


def test_a_full_disk_while_export_writes_leaves_the_output_folder_as_it_was(saved_run, tmp_path, capsys,  # noqa: F811
                                                                           monkeypatch):
    config, ckpt = saved_run
    out = tmp_path / "exported"
    out.mkdir()
    (out / "notes.txt").write_text("mine")

    def save_hf(self, folder):
        Path(folder).mkdir()
        (Path(folder) / "model.safetensors").write_bytes(b"half")
        raise RuntimeError("Error while serializing: I/O error: No space left on device (os error 28)")  # safetensors

    monkeypatch.setattr(MethodExport, "save_hf", save_hf)
    line = one_error_line([*COMMANDS["export"](config, ckpt, tmp_path), "--format", "hf"], capsys)
    assert line == f"{out}: no space left on device while writing it; {out} is as it was"
    assert os.listdir(out) == ["notes.txt"] and sorted(os.listdir(tmp_path)) == ["exported"]


def test_staged_write_replaces_whole_files_and_folders(tmp_path):
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "old.txt").write_text("kept")
    (tmp_path / "out" / "same.txt").write_text("before")
    with staged_write(tmp_path / "out") as staged:
        (staged / "sub").mkdir(parents=True)
        (staged / "same.txt").write_text("after")
        (staged / "sub" / "new.txt").write_text("new")
    assert sorted(os.listdir(tmp_path)) == ["out"]
    assert {p.relative_to(tmp_path / "out").as_posix(): p.read_text() for p in (tmp_path / "out").rglob("*.txt")} \
        == {"old.txt": "kept", "same.txt": "after", "sub/new.txt": "new"}
    with pytest.raises(ValueError, match="not a full disk"), staged_write(tmp_path / "f.txt") as staged:
        staged.write_text("half")
        raise ValueError("not a full disk")  # any other error goes through as it is
    assert os.listdir(tmp_path) == ["out"]
    with pytest.raises(DiskFull) as full, staged_write(tmp_path / "f.txt", kept=lambda: "asked late"):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    assert str(full.value) == f"{tmp_path / 'f.txt'}: no space left on device while writing it; asked late"
    assert full.value.errno == errno.ENOSPC and os.listdir(tmp_path) == ["out"]
