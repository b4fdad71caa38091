"""Non-finite guard: a poisoned batch (NaN loss) skips its update and is counted, a streak stops the run with a
clear error, and a checkpoint with non-finite weights is refused; with a fused AdamW the same, decided on the
device and read at logging steps only."""

from __future__ import annotations

import gc

import lightning as L
import pytest
import torch
from lightning.pytorch.callbacks import Callback

from lit_docemb.data.corpora.jsonl import JSONLDataModule
from lit_docemb.methods import guards
from lit_docemb.methods.docsplit import DocSplit
from lit_docemb.methods.frozen_heap import FrozenHeap
from lit_docemb.methods.guards import NonFiniteGuard
from lit_docemb.models import EncoderSpec


class PoisonedDocSplit(DocSplit):
    """DocSplit whose loss is NaN at the given global steps (as a corrupt batch or an overflow would make it)."""

    poison_steps: set[int] = set()

    def losses(self, batch):
        terms = super().losses(batch)
        if self.global_step in self.poison_steps:
            terms["info_nce_loss"] = terms["info_nce_loss"] * float("nan")
        return terms


def optimizer_tensors(trainer) -> list[torch.Tensor]:
    """Copies of the optimizer's state tensors (moments, step counts)."""
    return [v.detach().clone() for state in trainer.optimizers[0].state.values() for v in state.values()
            if isinstance(v, torch.Tensor)]


class Snapshots(Callback):
    """Parameters and optimizer state before and after every training batch, and the guard's count after it."""

    def __init__(self):
        self.before, self.after, self.state_before, self.state_after, self.counted = {}, {}, {}, {}, {}

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        self.before[trainer.global_step] = [p.detach().clone() for p in pl_module.parameters()]
        self.state_before[trainer.global_step] = optimizer_tensors(trainer)

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        self.after[trainer.global_step - 1] = [p.detach().clone() for p in pl_module.parameters()]
        self.state_after[trainer.global_step - 1] = optimizer_tensors(trainer)
        guard = next(c for c in trainer.callbacks if isinstance(c, NonFiniteGuard))
        self.counted[trainer.global_step - 1] = guard.skipped


def fused_adamw(parameters):
    return torch.optim.AdamW(parameters, lr=1e-3, fused=True)


def fit(encoder: str, corpus: str, root, poison: set[int], steps: int, callbacks: list, optimizer=None,
        log_every_n_steps: int = 50) -> tuple:
    torch.manual_seed(0)
    model = PoisonedDocSplit(EncoderSpec(encoder, max_length=64), optimizer=optimizer)
    model.poison_steps = poison
    data = JSONLDataModule([corpus], batch_size=4, num_workers=0, val_fraction=0.0)
    trainer = L.Trainer(accelerator="cpu", devices=1, max_steps=steps, logger=False, enable_progress_bar=False,
                        enable_checkpointing=False, default_root_dir=root, callbacks=callbacks,
                        log_every_n_steps=log_every_n_steps)
    trainer.fit(model, data)
    return model, trainer


@pytest.mark.parametrize("optimizer", [None, fused_adamw], ids=["read-every-step", "fused-read-at-logging-steps"])
def test_poisoned_step_is_skipped_and_counted(tiny_encoder_dir, corpus_jsonl, tmp_path, optimizer):
    snapshots = Snapshots()
    model, trainer = fit(tiny_encoder_dir, corpus_jsonl, tmp_path, poison={1}, steps=5, callbacks=[snapshots],
                         optimizer=optimizer, log_every_n_steps=3)
    guard = next(c for c in trainer.callbacks if isinstance(c, NonFiniteGuard))  # added by the method
    assert guard.skipped == 1 and guard.consecutive == 0
    assert trainer.global_step == 5
    assert all(torch.equal(a, b) for a, b in zip(snapshots.before[1], snapshots.after[1]))  # no update
    assert all(torch.equal(a, b) for a, b in zip(snapshots.state_before[1], snapshots.state_after[1]))
    assert len(snapshots.state_after[1]) == len(snapshots.state_before[1]) > 0  # moments and steps, untouched
    assert not all(torch.equal(a, b) for a, b in zip(snapshots.before[2], snapshots.after[2]))  # then it trains
    assert all(torch.isfinite(p).all() for p in model.parameters())
    assert trainer.callback_metrics["train/nonfinite_skipped_steps"].item() == 1.0
    # read every step, or on the device until the first logging step (the 3rd, global step 2)
    assert snapshots.counted[1] == (1 if optimizer is None else 0) and snapshots.counted[2] == 1


def test_skip_on_the_device_equals_skip_by_reading(tiny_encoder_dir, corpus_jsonl, tmp_path, monkeypatch):
    """The device-side decision changes nothing else: with the same fused AdamW, a run whose poisoned steps (the
    first, where the optimizer state is created, and a later one) are skipped on the device ends with the very
    weights of a run whose guard reads every step and drops those gradients."""
    on_device, _ = fit(tiny_encoder_dir, corpus_jsonl, tmp_path / "device", poison={0, 2}, steps=4, callbacks=[],
                       optimizer=fused_adamw)
    monkeypatch.setattr(guards, "skips_on_device", lambda optimizer: False)
    read, trainer = fit(tiny_encoder_dir, corpus_jsonl, tmp_path / "read", poison={0, 2}, steps=4, callbacks=[],
                        optimizer=fused_adamw)
    assert next(c for c in trainer.callbacks if isinstance(c, NonFiniteGuard)).skipped == 2
    assert not any(torch.equal(a, b) for a, b in zip(on_device.parameters(), PoisonedDocSplit(
        EncoderSpec(tiny_encoder_dir, max_length=64)).parameters()) if a.numel() > 1)  # it trained
    for (name, a), b in zip(on_device.named_parameters(), read.parameters()):
        assert torch.equal(a, b), name


@pytest.mark.parametrize("optimizer", [None, fused_adamw], ids=["read-every-step", "fused-read-at-logging-steps"])
def test_streak_stops_the_run_with_a_clear_error(tiny_encoder_dir, corpus_jsonl, tmp_path, optimizer):
    with pytest.raises(RuntimeError, match="2 consecutive training steps had non-finite"):
        fit(tiny_encoder_dir, corpus_jsonl, tmp_path, poison={0, 1, 2, 3}, steps=4,
            callbacks=[NonFiniteGuard(max_consecutive=2)], optimizer=optimizer)


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


class FreezeCounts(Callback):
    """The garbage collector's frozen objects at each training batch."""

    def __init__(self):
        self.counts = []

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        self.counts.append(gc.get_freeze_count())


def test_training_runs_with_its_heap_frozen_and_gives_it_back(tiny_encoder_dir, corpus_jsonl, tmp_path):
    """Every method adds FrozenHeap: the objects alive when training starts are out of the collector's full
    collections during it, and back in its reach after the fit, and after a fit that failed."""
    gc.unfreeze()
    counts = FreezeCounts()
    _, trainer = fit(tiny_encoder_dir, corpus_jsonl, tmp_path, poison=set(), steps=2, callbacks=[counts])
    assert any(isinstance(c, FrozenHeap) for c in trainer.callbacks)
    assert len(counts.counts) == 2 and min(counts.counts) > 10_000  # torch, Lightning, the model...
    assert gc.get_freeze_count() == 0
    with pytest.raises(RuntimeError, match="non-finite"):
        fit(tiny_encoder_dir, corpus_jsonl, tmp_path, poison={0, 1}, steps=2,
            callbacks=[NonFiniteGuard(max_consecutive=2)])
    assert gc.get_freeze_count() == 0
