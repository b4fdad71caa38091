"""Exact resume: a CPU fit through the real CLI, killed with SIGKILL inside random mid-epoch micro-batches and
resumed each time from its ``last.ckpt`` (``--ckpt_path last``), ends with parameters bitwise equal to those of
an uninterrupted run with the same config and checkpoint cadence, after the same per-micro-batch losses; without
gradient accumulation and with ``accumulate_grad_batches: 2`` (checkpoints only at optimizer-step boundaries).

What has to come back for that: the data order and position in the epoch (the loader's state), every batch's
views and masks (seeded per batch, so also with a dataloader worker), the dropout random state
(``RandomStateCheckpoint``), AdamW's moments and the warm-up/decay schedule's step. The run validates mid-epoch
(inside an accumulation window) and crosses an epoch boundary (whose last window is a single micro-batch), with
dropout on and one dataloader worker.
"""

from __future__ import annotations

import dataclasses
import os
import random
import signal
import subprocess
import sys
import time
from functools import partial
from pathlib import Path

import numpy as np
import pytest
import torch

from lit_docemb.data.core.document import Document, Section
from lit_docemb.data.core.sampling import (
    DistributedBatchSampler,
    ResumableLoader,
    seeded_random_state,
)
from lit_docemb.methods import DocSplit, GraphRoBERTa
from lit_docemb.methods.callbacks import RandomStateCheckpoint
from lit_docemb.data import PassageSpec
from lit_docemb.models import EncoderSpec

SUPPORT = Path(__file__).parents[1] / "support"
CHECKPOINT_EVERY = 3


# --- the pieces, in one process ---------------------------------------------------------------------------------
def draws(items: list[int]) -> tuple:
    """A collator that is nothing but randomness: the batch's items and one draw from each global generator."""
    return tuple(items), torch.rand(2).tolist(), random.random(), float(np.random.rand())


def loader_batches(num_workers: int = 0, epoch: int = 0, resume_after: int | None = None) -> list[tuple]:
    loader = ResumableLoader(list(range(10)), DistributedBatchSampler(10, 3, seed=5), collate_fn=draws,
                             num_workers=num_workers)
    loader.sampler.set_epoch(epoch)
    if resume_after is not None:
        loader.load_state_dict({"epoch": epoch, "documents": resume_after, "num_documents": 10, "seed": 5,
                                "documents_per_step": 3})
    return list(loader)


def global_states() -> tuple:
    return torch.get_rng_state(), random.getstate(), np.random.get_state()[1].tolist()


def test_batch_randomness_depends_on_seed_epoch_and_position_only():
    torch.manual_seed(0)
    before = global_states()
    batches = loader_batches()
    after = global_states()
    assert torch.equal(before[0], after[0]) and before[1:] == after[1:]  # the caller's generators untouched
    torch.manual_seed(1), random.seed(1), np.random.seed(1)
    assert loader_batches() == batches  # not the caller's random state
    assert loader_batches(num_workers=2) == batches  # nor the worker that builds a batch
    assert loader_batches(resume_after=6) == batches[2:]  # a resumed epoch: the interrupted one's batches
    assert len({str(b[1:]) for b in batches}) == len(batches)  # every batch its own draws
    next_epoch = loader_batches(epoch=1)
    assert not {str(b[1:]) for b in batches} & {str(b[1:]) for b in next_epoch}  # new draws every epoch


def leaves(batch) -> list:
    """Every tensor and value of a (nested dataclass) batch, in order."""
    if dataclasses.is_dataclass(batch):
        return [x for f in dataclasses.fields(batch) for x in leaves(getattr(batch, f.name))]
    if isinstance(batch, (list, tuple)):
        return [x for item in batch for x in leaves(item)]
    return [batch]


def same(a, b) -> bool:
    a, b = leaves(a), leaves(b)
    return len(a) == len(b) and all(torch.equal(x, y) if isinstance(x, torch.Tensor) else x == y for x, y in zip(a, b))


@pytest.mark.parametrize("method", ["DocSplit", "GraphRoBERTa"])
def test_training_views_are_a_function_of_the_batch_seed(method, tiny_encoder_dir):
    """The methods' random views (sentence splits and MLM masks, passage halves) come from the generators the
    loader seeds per batch, and from nothing else."""
    build = {"DocSplit": lambda: DocSplit(EncoderSpec(tiny_encoder_dir, max_length=48)),
             "GraphRoBERTa": lambda: GraphRoBERTa(EncoderSpec(tiny_encoder_dir), node_dim=16,
                                                  passages=PassageSpec(words_per_passage=8,
                                                                       max_passage_tokens=32))}[method]
    collate = build().collator("fit")
    documents = [Document(f"d{i}", title="T", sections=[Section(f"S{s}", " ".join(
        f"Section {s} of document {i} sentence {j} has some words." for j in range(4))) for s in range(3)])
        for i in range(3)]

    def batch(seed: int):
        with seeded_random_state(seed):
            return collate(documents)

    reference = batch(11)
    torch.manual_seed(0), random.seed(0)
    assert same(batch(11), reference)
    assert not all(same(batch(seed), reference) for seed in (12, 13, 14))


def test_random_states_survive_a_weights_only_checkpoint_and_apply_at_the_first_training_batch(tmp_path):
    callback = RandomStateCheckpoint()
    torch.manual_seed(3), random.seed(3), np.random.seed(3)
    torch.save({"callbacks": {"RandomStateCheckpoint": callback.state_dict()}}, tmp_path / "c.ckpt")
    expected = torch.rand(3), random.random(), np.random.rand()
    state = torch.load(tmp_path / "c.ckpt", weights_only=True)["callbacks"]["RandomStateCheckpoint"]

    torch.manual_seed(4), random.seed(4), np.random.seed(4)
    callback.load_state_dict(state)
    torch.rand(5)  # what start-up draws before the first batch (model construction, sanity check) is overwritten
    callback.on_train_batch_start(None, None, None, 0)
    actual = torch.rand(3), random.random(), np.random.rand()
    assert torch.equal(actual[0], expected[0]) and actual[1:] == expected[1:]
    callback.on_train_batch_start(None, None, None, 1)  # once only: later batches continue the stream
    assert not torch.equal(torch.rand(3), expected[0])


def test_random_states_of_another_number_of_processes_are_not_applied(caplog):
    callback = RandomStateCheckpoint()
    state = callback.state_dict()
    callback.load_state_dict({"ranks": state["ranks"] * 2})
    assert "random states of 2 processes, this run has 1" in caplog.text
    before = torch.get_rng_state()
    callback.on_train_batch_start(None, None, None, 0)
    assert torch.equal(torch.get_rng_state(), before)


# --- the whole run, killed and resumed ----------------------------------------------------------------------------
def fit_command(encoder: str, corpus: str, root: Path, *extra: str) -> list[str]:
    """A tiny DocSplit fit (dropout 0.1, MLM on) of two epochs with a checkpoint every CHECKPOINT_EVERY steps."""
    return [
        sys.executable, "-m", "lit_docemb", "fit", "--seed_everything=7",
        "--model=lit_docemb.methods.DocSplit", f"--model.encoder.name={encoder}", "--model.encoder.max_length=48",
        "--model.scheduler=lit_docemb.methods.LinearWarmupDecay", "--model.scheduler.warmup_steps=3",
        "--data=lit_docemb.data.JSONLDataModule", f"--data.paths=[{corpus}]", "--data.batch_size=4",
        "--data.num_workers=1", "--data.val_fraction=0.2", "--data.max_documents=40",
        "--trainer.accelerator=cpu", "--trainer.devices=1",
        "--trainer.max_epochs=2", "--trainer.val_check_interval=5", "--trainer.limit_val_batches=2",
        "--trainer.logger=false", "--trainer.enable_progress_bar=false", "--trainer.enable_model_summary=false",
        f"--trainer.default_root_dir={root}",
        "--trainer.callbacks+=lit_docemb.methods.callbacks.RunCheckpoint",
        f"--trainer.callbacks.every_n_train_steps={CHECKPOINT_EVERY}",
        "--trainer.callbacks+=resume_probe.StepProbe", *extra,
    ]


def environment() -> dict[str, str]:
    return {**os.environ, "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false",
            "PYTHONPATH": os.pathsep.join([str(SUPPORT), os.environ.get("PYTHONPATH", "")])}


def run_to_end(command: list[str]) -> None:
    result = subprocess.run(command, check=False, capture_output=True, text=True, timeout=300, env=environment())
    assert result.returncode == 0, result.stderr[-4000:]


def run_and_kill(command: list[str], root: Path, timeout_s: float = 300) -> None:
    """Starts the fit in its own process group and SIGKILLs the group (trainer and dataloader worker) once the
    probe reports that it is blocked inside the chosen step."""
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                               env=environment(), start_new_session=True)
    deadline = time.monotonic() + timeout_s
    try:
        while not (root / "paused").exists():
            if process.poll() is not None:
                pytest.fail(f"the run ended before the kill point:\n{process.stderr.read()[-4000:]}")
            if time.monotonic() > deadline:
                pytest.fail("the run did not reach the kill point in time")
            time.sleep(0.05)
    finally:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        process.stderr.close()
    assert process.returncode == -signal.SIGKILL


def steps(root: Path) -> list[tuple[int, int, int, int]]:
    """(micro-batch, epoch, global step after it, loss bits) of every training micro-batch the probe recorded."""
    return [tuple(map(int, line.split())) for line in (root / "steps.txt").read_text().splitlines()]


def checkpointed_batches(reference: list[tuple[int, int, int, int]]) -> list[int]:
    """The micro-batches after which the run writes ``last.ckpt``: those whose optimizer step reaches a multiple of
    CHECKPOINT_EVERY."""
    previous = [0] + [step for _, _, step, _ in reference]
    return [batch for (batch, _, step, _), before in zip(reference, previous) if step != before
            and step % CHECKPOINT_EVERY == 0]


@pytest.mark.slow
@pytest.mark.parametrize("accumulate, kills", [(1, 1), (2, 3)])
def test_sigkilled_run_resumed_from_last_checkpoint_ends_bitwise_equal(accumulate, kills, tiny_encoder_dir,
                                                                       corpus_jsonl, tmp_path):
    """Killed ``kills`` times at seeded random micro-batches (inside or at the end of an accumulation window, and
    soon after a resume, where a checkpoint written before the window is complete would lose gradients), each time
    resumed with ``--ckpt_path last``: the same losses after every resume and the same final weights, bit for bit."""
    command = partial(fit_command, tiny_encoder_dir, corpus_jsonl)
    accumulation = f"--trainer.accumulate_grad_batches={accumulate}"
    reference_root, resumed_root = tmp_path / "uninterrupted", tmp_path / "killed"
    run_to_end(command(reference_root, accumulation))
    reference = steps(reference_root)
    total, per_epoch = len(reference), sum(epoch == 0 for _, epoch, _, _ in reference)
    assert [batch for batch, _, _, _ in reference] == list(range(1, total + 1)) and total == 2 * per_epoch
    # an optimizer step every `accumulate` micro-batches and at the end of each epoch
    per_epoch_steps = -(-per_epoch // accumulate)
    assert [step for _, _, step, _ in reference] == [
        epoch * per_epoch_steps + (-(-j // accumulate) if j == per_epoch else j // accumulate)
        for epoch in (0, 1) for j in range(1, per_epoch + 1)]
    saved = checkpointed_batches(reference)
    assert len(saved) >= 2

    rng = random.Random(f"exact resume {accumulate} {kills}")  # the same kill points in every test run
    resumed_after, expected_batches = 0, []
    for kill in range(kills):
        # after the first checkpoint; later, from the second micro-batch after the resume (after the resumed
        # run's first checkpoint opportunity) up to the second checkpoint after it
        ahead = [batch for batch in saved if batch > resumed_after]
        first = saved[0] + 1 if kill == 0 else resumed_after + 2
        kill_at = rng.randrange(first, min(ahead[1] if len(ahead) > 1 else total, total) + 1)
        print(f"kill {kill + 1}: inside micro-batch {kill_at} of {total} ({per_epoch} per epoch, "
              f"accumulating {accumulate})")
        extra = [accumulation, f"--trainer.callbacks.pause_at_batch={kill_at}"]
        if kill:
            extra.append("--ckpt_path=last")
        run_and_kill(command(resumed_root, *extra), resumed_root)
        (resumed_root / "paused").unlink()
        expected_batches += range(resumed_after + 1, kill_at)
        resumed_after = max(batch for batch in saved if batch < kill_at)
        # last.ckpt was written at the end of an optimizer step, after the micro-batch that completed it
        last = torch.load(resumed_root / "checkpoints" / "last.ckpt", weights_only=False)
        progress = last["loops"]["fit_loop"]["epoch_loop.batch_progress"]["total"]
        assert (progress["processed"], last["global_step"]) == (resumed_after, reference[resumed_after - 1][2]), \
            f"killed inside micro-batch {kill_at}"
        assert not (resumed_root / "final.pt").exists()

    run_to_end(command(resumed_root, accumulation, "--ckpt_path=last"))
    expected_batches += range(resumed_after + 1, total + 1)
    interrupted = steps(resumed_root)
    assert [batch for batch, _, _, _ in interrupted] == expected_batches
    # the same batches, dropout and learning rates after every resume: the same losses, bit for bit
    different = [row for row in interrupted if row != reference[row[0] - 1]]
    assert not different, f"first differing micro-batch: {different[0]}, uninterrupted: {reference[different[0][0] - 1]}"

    expected = torch.load(reference_root / "final.pt")
    actual = torch.load(resumed_root / "final.pt")
    assert expected.keys() == actual.keys()
    different = [name for name in expected if not torch.equal(expected[name], actual[name])]
    assert not different, f"{len(different)} of {len(expected)} tensors differ, first: {different[0]}"
