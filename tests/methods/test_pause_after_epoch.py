"""PauseAfterEpoch: a run in phases (Graph-RoBERTa's MSMARCO, negatives mined by the 5-epoch checkpoint) is one
run: paused after its epoch, resumed with ``--ckpt_path last``, it ends where an unpaused run ends, on one
learning-rate schedule sized for all its epochs."""

from __future__ import annotations

import pytest
from runs import tiny_args

from lit_docemb.commands import main
from lit_docemb.methods.callbacks import PauseAfterEpoch
from lit_docemb.errors import ConfigError


def test_a_paused_and_resumed_fit_is_one_schedule(tiny_encoder_dir, corpus_jsonl, tmp_path):
    base = [*tiny_args(tiny_encoder_dir, corpus_jsonl, tmp_path), "--trainer.max_epochs=4", "--trainer.limit_train_batches=2",
            "--trainer.callbacks+=lit_docemb.methods.callbacks.RunCheckpoint", "--trainer.limit_val_batches=0",
            "--trainer.callbacks+=lit_docemb.methods.callbacks.PauseAfterEpoch", "--trainer.callbacks.epoch=2",
            "--model.init_args.scheduler={class_path: lit_docemb.methods.LinearWarmupDecay, "
            "init_args: {warmup_fraction: 0.25}}"]
    first = main(["fit", *base])
    steps_per_epoch = first.trainer.num_training_batches
    assert first.trainer.current_epoch == 2 and first.trainer.global_step == 2 * steps_per_epoch
    schedule = first.trainer.lr_scheduler_configs[0].scheduler
    assert schedule.total_steps == 4 * steps_per_epoch  # sized for the whole run, not the phase
    assert schedule.get_last_lr()[0] > 0  # not decayed to the end at the pause

    second = main(["fit", *base, "--ckpt_path=last"])
    assert second.trainer.current_epoch == 4 and second.trainer.global_step == 4 * steps_per_epoch
    resumed = second.trainer.lr_scheduler_configs[0].scheduler
    assert resumed.total_steps == 4 * steps_per_epoch and resumed.last_epoch == 4 * steps_per_epoch
    assert resumed.get_last_lr()[0] == pytest.approx(0.0)  # the one decay reached its end


def test_epoch_is_counted_from_one():
    with pytest.raises(ConfigError, match="PauseAfterEpoch.epoch must be >= 1"):
        PauseAfterEpoch(0)
