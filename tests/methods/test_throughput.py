"""Live throughput figures: token counting of every batch type, and the Throughput callback through the CLI."""

from __future__ import annotations

import csv
import types
from pathlib import Path

import torch
from lightning.pytorch.callbacks import Callback

from lit_docemb.commands.cli import DocEmbCLI
from lit_docemb.data.core.batches import (
    Doc2VecCPairBatch,
    MaskedTokenBatch,
    PackedWords,
    PassageGraphBatch,
    SubDocumentPairBatch,
    TokenBatch,
    ViewPairBatch,
    count_tokens,
)
from lit_docemb.methods import callbacks
from lit_docemb.methods.callbacks import Throughput


def tokens(lengths: list[int], width: int = 6) -> TokenBatch:
    mask = torch.tensor([[1] * n + [0] * (width - n) for n in lengths])
    return TokenBatch(torch.randint(5, 50, mask.shape) * mask, mask)


def test_count_tokens_sums_the_real_tokens_of_every_part():
    view_a, view_b = tokens([3, 6]), tokens([2, 1])
    mlm = MaskedTokenBatch(view_a.input_ids, view_a.attention_mask, torch.full((2, 6), -100))
    assert int(count_tokens(ViewPairBatch(view_a, view_b, torch.arange(2), mlm))) == 9 + 3 + 9
    assert int(count_tokens(ViewPairBatch(view_a, view_b, torch.arange(2)))) == 12
    graphs = PassageGraphBatch(tokens([4, 4, 1]), torch.tensor([2, 1]), [torch.zeros(2, 0)] * 2)
    assert int(count_tokens(SubDocumentPairBatch(graphs, graphs, torch.arange(2)))) == 18
    words = PackedWords.of(torch.tensor([[4, 5, 0], [7, 0, 0]]))
    deca = Doc2VecCPairBatch(words, PackedWords.from_rows([[1, 2, 3], []]), torch.arange(2))
    assert int(count_tokens(deca)) == 3 + 3
    assert count_tokens({"a": 1, "b": [2.0]}) is None


class BatchRecorder(Callback):
    """Documents and tokens of every training batch, counted here from the batch's own fields."""

    def __init__(self):
        self.documents, self.tokens = [], []

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        self.documents.append(len(batch))
        parts = [batch.view_a, batch.view_b] + ([batch.mlm] if batch.mlm is not None else [])
        self.tokens.append(sum(int(p.attention_mask.sum()) for p in parts))


def test_throughput_is_logged_from_the_cli_with_the_trained_counts(tiny_encoder_dir, corpus_jsonl, tmp_path,
                                                                     monkeypatch):
    clock = iter(range(1, 1000))  # every reading of the callback's clock is one second after the previous one
    monkeypatch.setattr(callbacks, "time", types.SimpleNamespace(perf_counter=lambda: float(next(clock))))
    recorder = BatchRecorder()
    cli = DocEmbCLI(args=[
        "fit", "--model=lit_docemb.methods.DocSplit", f"--model.encoder.name={tiny_encoder_dir}", "--model.encoder.max_length=64",
        "--data=lit_docemb.data.JSONLDataModule", f"--data.paths=[{corpus_jsonl}]", "--data.batch_size=3",
        "--data.num_workers=0", "--data.val_fraction=0.0", "--trainer.accelerator=cpu", "--trainer.devices=1",
        "--trainer.logger=lightning.pytorch.loggers.CSVLogger", f"--trainer.logger.save_dir={tmp_path}",
        "--trainer.enable_progress_bar=false", f"--trainer.default_root_dir={tmp_path}",
        "--trainer.max_steps=4", "--trainer.log_every_n_steps=2", "--trainer.enable_checkpointing=false"],
        trainer_defaults={"callbacks": [recorder]})
    assert sum(isinstance(c, Throughput) for c in cli.trainer.callbacks) == 1  # added by the CLI
    with open(next(Path(tmp_path).rglob("metrics.csv"))) as f:
        rows = list(csv.DictReader(f))
    logged = {int(r["step"]): r for r in rows if r.get("train/documents_per_s")}
    # logged before batches 1 and 3 (steps 2 and 4), each over the batches since the previous reading (1 s)
    assert sorted(logged) == [1, 3]
    windows = {1: slice(0, 1), 3: slice(1, 3)}
    for step, window in windows.items():
        assert float(logged[step]["train/documents_per_s"]) == sum(recorder.documents[window]) > 0
        assert float(logged[step]["train/tokens_per_s"]) == sum(recorder.tokens[window]) > 0
        assert 0.1 < float(logged[step]["train/peak_memory_gib"]) < 64  # this process's peak RSS
    loss_steps = {int(r["step"]) for r in rows if r.get("train/loss")}
    assert set(logged) <= loss_steps  # beside the losses on the dashboard
