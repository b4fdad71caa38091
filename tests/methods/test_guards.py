"""Non-finite guard: a poisoned batch (NaN loss) skips its update and is counted, a streak stops the run with a
clear error, and a checkpoint with non-finite weights is refused."""

from __future__ import annotations

import lightning as L
import pytest
import torch
from lightning.pytorch.callbacks import Callback

from lit_docemb.data.jsonl import JSONLDataModule
from lit_docemb.methods.docsplit import DocSplit
from lit_docemb.methods.guards import NonFiniteGuard


class PoisonedDocSplit(DocSplit):
    """DocSplit whose loss is NaN at the given global steps (as a corrupt batch or an overflow would make it)."""

    poison_steps: set[int] = set()

    def losses(self, batch):
        terms = super().losses(batch)
        if self.global_step in self.poison_steps:
            terms["info_nce_loss"] = terms["info_nce_loss"] * float("nan")
        return terms


class Snapshots(Callback):
    """Parameters before and after every training batch."""

    def __init__(self):
        self.before, self.after = {}, {}

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        self.before[trainer.global_step] = [p.detach().clone() for p in pl_module.parameters()]

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        self.after[trainer.global_step - 1] = [p.detach().clone() for p in pl_module.parameters()]


def fit(encoder: str, corpus: str, root, poison: set[int], steps: int, callbacks: list) -> tuple:
    torch.manual_seed(0)
    model = PoisonedDocSplit(encoder, max_length=64)
    model.poison_steps = poison
    data = JSONLDataModule([corpus], batch_size=4, num_workers=0, val_fraction=0.0)
    trainer = L.Trainer(accelerator="cpu", devices=1, max_steps=steps, logger=False, enable_progress_bar=False,
                        enable_checkpointing=False, default_root_dir=root, callbacks=callbacks)
    trainer.fit(model, data)
    return model, trainer


def test_poisoned_step_is_skipped_and_counted(tiny_encoder_dir, corpus_jsonl, tmp_path):
    snapshots = Snapshots()
    model, trainer = fit(tiny_encoder_dir, corpus_jsonl, tmp_path, poison={1}, steps=4, callbacks=[snapshots])
    guard = next(c for c in trainer.callbacks if isinstance(c, NonFiniteGuard))  # added by the method
    assert guard.skipped == 1 and guard.consecutive == 0
    assert trainer.global_step == 4
    assert all(torch.equal(a, b) for a, b in zip(snapshots.before[1], snapshots.after[1]))  # no update
    assert not all(torch.equal(a, b) for a, b in zip(snapshots.before[2], snapshots.after[2]))  # then it trains
    assert all(torch.isfinite(p).all() for p in model.parameters())
    assert trainer.callback_metrics["train/nonfinite_skipped_steps"].item() == 1.0


def test_streak_stops_the_run_with_a_clear_error(tiny_encoder_dir, corpus_jsonl, tmp_path):
    with pytest.raises(RuntimeError, match="2 consecutive training steps had non-finite"):
        fit(tiny_encoder_dir, corpus_jsonl, tmp_path, poison={0, 1, 2, 3}, steps=4,
            callbacks=[NonFiniteGuard(max_consecutive=2)])


def test_configured_guard_is_kept(tiny_encoder_dir, corpus_jsonl, tmp_path):
    guard = NonFiniteGuard(max_consecutive=5)
    _, trainer = fit(tiny_encoder_dir, corpus_jsonl, tmp_path, poison={0, 1, 2}, steps=3, callbacks=[guard])
    assert [c for c in trainer.callbacks if isinstance(c, NonFiniteGuard)] == [guard]
    assert guard.skipped == 3


def test_checkpoint_with_non_finite_weights_is_refused(tiny_encoder_dir, corpus_jsonl, tmp_path):
    model, trainer = fit(tiny_encoder_dir, corpus_jsonl, tmp_path, poison=set(), steps=1, callbacks=[])
    trainer.save_checkpoint(tmp_path / "fine.ckpt")
    with torch.no_grad():
        next(model.parameters())[0] = float("inf")
    with pytest.raises(RuntimeError, match="refusing to save a checkpoint with non-finite weights"):
        trainer.save_checkpoint(tmp_path / "bad.ckpt")
    assert not (tmp_path / "bad.ckpt").exists()


def test_guard_state_survives_a_resume():
    guard = NonFiniteGuard()
    guard.skipped, guard.consecutive = 4, 2
    other = NonFiniteGuard()
    other.load_state_dict(guard.state_dict())
    assert (other.skipped, other.consecutive) == (4, 2)
