"""What the Lightning Trainer costs per DocSplit training step, against a plain PyTorch loop (issue 12, item 1).

One process, one model size, the same pre-collated batches for both sides (DocSplit views with its masked-LM
copy, from installed text resampled as in ``data_pipeline.py``), so that only the framework differs:

* **Lightning**: ``Trainer.fit`` of a :class:`~lit_docemb.methods.DocSplit` with what a ``fit`` from the
  command line has: the guards every method adds (``NonFiniteGuard``, ``FailFast``), the ``Throughput``
  callback the CLI adds, a logger (CSV, at ``log_every_n_steps``), the progress bar, ``self.log`` of every loss
  term each step. No checkpointing and no validation (neither is a per-step cost).
* **plain**: a deep copy of the same module with its own AdamW, ``loss = total_loss(losses(batch));
  loss.backward(); step(); zero_grad()`` in a Python loop: the same forward, backward and update.

The two alternate in blocks of ``--block`` steps inside one fit: a callback runs a plain block at the end of
every Lightning block and its duration is subtracted from the Lightning block's wall time (first block of
each discarded as warm-up). The figure is the median over blocks of Lightning time / plain time. Goal ≤ 1.05.
A second table times, on the Lightning side, the hooks lit_docemb itself adds (guards, Throughput, the
``self.log`` calls of ``_log_terms``), to show where overhead above the plain loop comes from.

The hooks are timed on the host. On CUDA with the wall clock (``time.perf_counter`` around each): a hook that
waits for the device shows that wait as its cost, which is what it costs a step whose host would otherwise run
ahead. On the CPU, where nothing waits for a device, with the thread's CPU time (``time.thread_time``; torch runs
on this one thread with the default ``--threads 1``), which other processes on a loaded machine do not inflate. On CUDA the
block boundaries synchronise the device, both sides move each batch to the device, and both use a fused AdamW
(the methods' default there).

Usage::

    python benchmarks/framework_overhead.py                     # 2-layer 128-d BERT, batch 8, 128 tokens, CPU
    python benchmarks/framework_overhead.py --hidden 256 --layers 4 --batch-size 16 --pairs 20
    python3 benchmarks/framework_overhead.py --device cuda      # BERT-base (12 x 768), batch 32, 256 tokens, bf16
"""

from __future__ import annotations

import os

os.environ["TOKENIZERS_PARALLELISM"] = "false"

import argparse
import copy
import statistics
import tempfile
import time
import warnings
from collections import defaultdict
from functools import wraps

import lightning as L
import torch
from lightning.fabric.utilities.apply_func import move_data_to_device
from lightning.pytorch.callbacks import Callback
from lightning.pytorch.loggers import CSVLogger
from torch.utils.data import DataLoader

from common import load_line, machine_line, resampled_documents, write_bert
from lit_docemb.methods.callbacks import Throughput
from lit_docemb.methods.guards import FailFast, NonFiniteGuard
from lit_docemb.methods import DocSplit
from lit_docemb.methods.progress import RateProgressBar
from lit_docemb.models import EncoderSpec

#: --preset: BERT-base, the size an H100 trains DocSplit at (the CPU default stays small enough for 2 cores).
PRESETS = {"bert-base": {"hidden": 768, "layers": 12, "batch_size": 32, "max_length": 256}}


def plain_step(model: DocSplit, optimizer: torch.optim.Optimizer, batch, precision: str = "32-true") -> None:
    batch = move_data_to_device(batch, model.device)
    with torch.autocast(model.device.type, dtype=torch.bfloat16, enabled=precision == "bf16-mixed"):
        loss = model.total_loss(model.losses(batch))
    loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


class Interleave(Callback):
    """Times Lightning blocks of ``block`` steps and runs a plain block after each, ``pairs`` + 1 times."""

    def __init__(self, plain_model: DocSplit, batches: list, block: int, precision: str = "32-true") -> None:
        self.plain_model = plain_model
        fused = {"fused": True} if plain_model.device.type == "cuda" else {}
        self.optimizer = torch.optim.AdamW(plain_model.parameters(), lr=plain_model.default_learning_rate, **fused)
        self.batches = batches
        self.block = block
        self.precision = precision
        self.lightning: list[float] = []
        self.plain: list[float] = []
        self.plain_cpu: list[float] = []  # CPU time of this thread in the plain blocks
        self._block_started: float | None = None
        self._plain_inside = 0.0

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx: int) -> None:
        if batch_idx % self.block:
            return
        synchronize(pl_module.device)
        now = time.perf_counter()
        if self._block_started is not None:
            self.lightning.append(now - self._block_started - self._plain_inside)
        self._block_started, self._plain_inside = now, 0.0

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx: int) -> None:
        if (batch_idx + 1) % self.block:
            return
        synchronize(pl_module.device)
        started, started_cpu = time.perf_counter(), time.thread_time()
        for plain_batch in self.batches[batch_idx + 1 - self.block: batch_idx + 1]:
            plain_step(self.plain_model, self.optimizer, plain_batch, self.precision)
        synchronize(pl_module.device)
        self._plain_inside = time.perf_counter() - started
        self.plain_cpu.append(time.thread_time() - started_cpu)
        self.plain.append(self._plain_inside)


def time_hooks(targets: list[tuple[str, object, str]], seconds: dict[str, list[float]], step, clock=time.perf_counter,
               ) -> None:
    """Wraps each ``getattr(owner, name)`` so that its time by ``clock`` adds to ``seconds[label][step()]``."""
    for label, owner, name in targets:
        original = getattr(owner, name)

        @wraps(original)
        def timed(*args, _original=original, _label=label, **kwargs):
            started = clock()
            try:
                return _original(*args, **kwargs)
            finally:
                seconds[_label][step()] += clock() - started

        setattr(owner, name, timed)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument("--preset", choices=sorted(PRESETS), help="model and batch size (default with --device "
                        "cuda: bert-base); --hidden, --layers, --batch-size, --max-length given override it")
    parser.add_argument("--precision", choices=["32-true", "bf16-mixed"],
                        help="default: 32-true on CPU, bf16-mixed on CUDA")
    parser.add_argument("--hidden", type=int)
    parser.add_argument("--layers", type=int)
    parser.add_argument("--batch-size", type=int)
    parser.add_argument("--max-length", type=int)
    parser.add_argument("--block", type=int, default=3, help="steps per block")
    parser.add_argument("--pairs", type=int, default=12, help="timed (Lightning, plain) block pairs")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (1: least disturbed by load)")
    parser.add_argument("--log-every-n-steps", type=int, default=50, help="the Trainer's default")
    args = parser.parse_args()
    preset = PRESETS.get(args.preset or ("bert-base" if args.device == "cuda" else ""),
                         {"hidden": 128, "layers": 2, "batch_size": 8, "max_length": 128})
    for name, value in preset.items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    args.precision = args.precision or ("bf16-mixed" if args.device == "cuda" else "32-true")
    if args.device == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda: no CUDA device is visible to torch")
    device = torch.device(args.device)
    torch.set_num_threads(args.threads)
    warnings.filterwarnings("ignore", ".*does not have many workers.*")
    L.seed_everything(0, verbose=False)
    steps = args.block * (args.pairs + 1)

    with tempfile.TemporaryDirectory(prefix="lit_docemb_overhead_") as tmp:
        encoder = write_bert(os.path.join(tmp, "bert"), args.hidden, args.layers, max_positions=args.max_length)
        model = DocSplit(EncoderSpec(encoder, pooling="cls", max_length=args.max_length))
        plain_model = copy.deepcopy(model).to(device)
        collate = model.collator("fit")
        documents = resampled_documents(steps * args.batch_size, 400, ["pydoc"], seed=0)
        batches = [collate(documents[i: i + args.batch_size]) for i in range(0, len(documents), args.batch_size)]
        real = sum(int(b.view_a.attention_mask.sum() + b.view_b.attention_mask.sum()) for b in batches)
        padded = sum(b.view_a.attention_mask.numel() + b.view_b.attention_mask.numel() for b in batches)

        hook_seconds: dict[str, list[float]] = defaultdict(lambda: [0.0] * (steps + 1))
        trainer: L.Trainer | None = None
        time_hooks([("NonFiniteGuard.on_before_optimizer_step", NonFiniteGuard, "on_before_optimizer_step"),
                    ("Throughput (batch start + end)", Throughput, "on_train_batch_start"),
                    ("Throughput (batch start + end)", Throughput, "on_train_batch_end"),
                    ("EmbeddingMethod._log_terms (at logging steps self.log of the loss and every term)",
                     DocSplit, "_log_terms"),
                    ("RateProgressBar.on_train_batch_end (Lightning's Rich bar, showing the step's loss)",
                     RateProgressBar, "on_train_batch_end")],
                   hook_seconds, lambda: min(trainer.global_step, steps),
                   clock=time.perf_counter if device.type == "cuda" else time.thread_time)
        interleave = Interleave(plain_model, batches, args.block, args.precision)
        trainer = L.Trainer(accelerator="gpu" if device.type == "cuda" else "cpu", devices=1, max_steps=steps,
                            precision=args.precision, logger=CSVLogger(tmp),
                            log_every_n_steps=args.log_every_n_steps, enable_checkpointing=False,
                            enable_model_summary=False, limit_val_batches=0,
                            callbacks=[interleave, Throughput(), NonFiniteGuard(), FailFast(), RateProgressBar()])
        load_before = os.getloadavg()
        # the pre-collated batches as they are (batch_size=None: no collation, no workers)
        trainer.fit(model, train_dataloaders=DataLoader(batches, batch_size=None))
        load_after = os.getloadavg()

    lightning, plain = interleave.lightning[1:], interleave.plain[1:len(interleave.lightning)]  # warm-up out
    ratios = [a / b for a, b in zip(lightning, plain)]
    step_plain = statistics.median(plain) / args.block
    step_lightning = statistics.median(lightning) / args.block
    ratio = statistics.median(ratios)
    where = torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU"
    print(f"\nDocSplit, random-init BERT {args.layers} layers × {args.hidden} (FFN {4 * args.hidden}, vocab 30,522, "
          f"MLM head), batch {args.batch_size} documents ({args.max_length} tokens per view, "
          f"{real / len(batches) / args.batch_size:.0f} real tokens per document over both views, "
          f"{1 - real / padded:.0%} padding), {args.precision} on {where}; {machine_line()}; {len(ratios)} "
          f"interleaved blocks of {args.block} steps; log_every_n_steps {args.log_every_n_steps}.\n")
    print("| loop | s per step (median) | relative |")
    print("|---|---:|---:|")
    print(f"| plain PyTorch (forward, backward, AdamW step) | {step_plain:.3f} | 1.00 |")
    print(f"| Lightning Trainer + lit_docemb callbacks and logging | {step_lightning:.3f} | "
          f"{step_lightning / step_plain:.3f} |")
    print(f"| **Lightning / plain, median of per-block ratios** (goal ≤ 1.05) | | **{ratio:.3f}** "
          f"{'met' if ratio <= 1.05 else 'MISSED'} (min {min(ratios):.3f}, max {max(ratios):.3f}) |")
    clock = "wall time" if device.type == "cuda" else "CPU time of the training thread"
    # a hook's share of a plain step, on the same clock
    plain_step_ms = 1e3 * (step_plain if device.type == "cuda" else statistics.median(interleave.plain_cpu[1:])
                           / args.block)
    per_step = {label: seconds[:steps] for label, seconds in hook_seconds.items()}
    steady = {label: [1e3 * x for x in seconds[args.block:]] for label, seconds in per_step.items()}  # no warm-up
    median = {label: statistics.median(values) for label, values in steady.items()}
    mean = {label: statistics.fmean(values) for label, values in steady.items()}
    own = [sum(values) for values in zip(*(v for label, v in steady.items() if not label.startswith("RateProgress")))]
    own_median = statistics.median(own)
    print(f"\nlit_docemb's own per-step hooks on the Lightning side ({clock}; steps {args.block + 1}-{steps}, after "
          f"the warm-up block): {own_median:.2f} ms per step in all (median over steps; mean "
          f"{statistics.fmean(own):.2f}, logging steps included), the progress bar aside: goal ≤ 1 ms "
          f"{'met' if own_median <= 1 else 'MISSED'}. Per hook, median ms per step: "
          + "; ".join(f"{label.split(' ')[0]} {median[label]:.2f}" for label in steady) + "\n")
    print(f"| hook | ms per step, median | ms per step, mean (logging steps included) | median share of a plain step "
          f"({plain_step_ms:.1f} ms, {clock}) |")
    print("|---|---:|---:|---:|")
    for label in steady:
        print(f"| {label} | {median[label]:.2f} | {mean[label]:.2f} | {median[label] / plain_step_ms:.2%} |")
    print(f"\n{load_line(load_before, load_after)}.")


if __name__ == "__main__":
    main()
