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

Usage::

    python benchmarks/framework_overhead.py                     # 2-layer 128-d BERT, batch 8, 128 tokens
    python benchmarks/framework_overhead.py --hidden 256 --layers 4 --batch-size 16 --pairs 20
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
from lightning.pytorch.callbacks import Callback
from lightning.pytorch.loggers import CSVLogger
from torch.utils.data import DataLoader

from common import load_line, machine_line, resampled_documents, write_bert
from lit_docemb.methods.callbacks import Throughput
from lit_docemb.methods.guards import FailFast, NonFiniteGuard
from lit_docemb.methods import DocSplit


def plain_step(model: DocSplit, optimizer: torch.optim.Optimizer, batch) -> None:
    loss = model.total_loss(model.losses(batch))
    loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)


class Interleave(Callback):
    """Times Lightning blocks of ``block`` steps and runs a plain block after each, ``pairs`` + 1 times."""

    def __init__(self, plain_model: DocSplit, batches: list, block: int) -> None:
        self.plain_model = plain_model
        self.optimizer = torch.optim.AdamW(plain_model.parameters(), lr=plain_model.default_learning_rate)
        self.batches = batches
        self.block = block
        self.lightning: list[float] = []
        self.plain: list[float] = []
        self._block_started: float | None = None
        self._plain_inside = 0.0

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx: int) -> None:
        if batch_idx % self.block:
            return
        now = time.perf_counter()
        if self._block_started is not None:
            self.lightning.append(now - self._block_started - self._plain_inside)
        self._block_started, self._plain_inside = now, 0.0

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx: int) -> None:
        if (batch_idx + 1) % self.block:
            return
        started = time.perf_counter()
        for plain_batch in self.batches[batch_idx + 1 - self.block: batch_idx + 1]:
            plain_step(self.plain_model, self.optimizer, plain_batch)
        self._plain_inside = time.perf_counter() - started
        self.plain.append(self._plain_inside)


def time_hooks(targets: list[tuple[str, object, str]], seconds: dict[str, float]) -> None:
    """Wraps each ``getattr(owner, name)`` so that its wall time adds to ``seconds[label]``."""
    for label, owner, name in targets:
        original = getattr(owner, name)

        @wraps(original)
        def timed(*args, _original=original, _label=label, **kwargs):
            started = time.perf_counter()
            try:
                return _original(*args, **kwargs)
            finally:
                seconds[_label] += time.perf_counter() - started

        setattr(owner, name, timed)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hidden", type=int, default=128)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--max-length", type=int, default=128)
    parser.add_argument("--block", type=int, default=3, help="steps per block")
    parser.add_argument("--pairs", type=int, default=12, help="timed (Lightning, plain) block pairs")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (1: least disturbed by load)")
    parser.add_argument("--log-every-n-steps", type=int, default=50, help="the Trainer's default")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    warnings.filterwarnings("ignore", ".*does not have many workers.*")
    L.seed_everything(0, verbose=False)
    steps = args.block * (args.pairs + 1)

    with tempfile.TemporaryDirectory(prefix="lit_docemb_overhead_") as tmp:
        encoder = write_bert(os.path.join(tmp, "bert"), args.hidden, args.layers, max_positions=args.max_length)
        model = DocSplit(encoder, pooling="cls", max_length=args.max_length)
        plain_model = copy.deepcopy(model)
        collate = model.collator("fit")
        documents = resampled_documents(steps * args.batch_size, 400, ["pydoc"], seed=0)
        batches = [collate(documents[i: i + args.batch_size]) for i in range(0, len(documents), args.batch_size)]
        real = sum(int(b.view_a.attention_mask.sum() + b.view_b.attention_mask.sum()) for b in batches)
        padded = sum(b.view_a.attention_mask.numel() + b.view_b.attention_mask.numel() for b in batches)

        hook_seconds: dict[str, float] = defaultdict(float)
        time_hooks([("NonFiniteGuard.on_before_optimizer_step", NonFiniteGuard, "on_before_optimizer_step"),
                    ("Throughput (batch start + end)", Throughput, "on_train_batch_start"),
                    ("Throughput (batch start + end)", Throughput, "on_train_batch_end"),
                    ("EmbeddingMethod._log_terms (self.log of every term)", DocSplit, "_log_terms")],
                   hook_seconds)
        interleave = Interleave(plain_model, batches, args.block)
        trainer = L.Trainer(accelerator="cpu", devices=1, max_steps=steps, logger=CSVLogger(tmp),
                            log_every_n_steps=args.log_every_n_steps, enable_checkpointing=False,
                            enable_model_summary=False, limit_val_batches=0,
                            callbacks=[interleave, Throughput(), NonFiniteGuard(), FailFast()])
        load_before = os.getloadavg()
        # the pre-collated batches as they are (batch_size=None: no collation, no workers)
        trainer.fit(model, train_dataloaders=DataLoader(batches, batch_size=None))
        load_after = os.getloadavg()

    lightning, plain = interleave.lightning[1:], interleave.plain[1:len(interleave.lightning)]  # warm-up out
    ratios = [a / b for a, b in zip(lightning, plain)]
    step_plain = statistics.median(plain) / args.block
    step_lightning = statistics.median(lightning) / args.block
    ratio = statistics.median(ratios)
    print(f"\nDocSplit, random-init BERT {args.layers} layers × {args.hidden} (FFN {4 * args.hidden}, vocab 30,522, "
          f"MLM head), batch {args.batch_size} documents ({args.max_length} tokens per view, "
          f"{real / len(batches) / args.batch_size:.0f} real tokens per document over both views, "
          f"{1 - real / padded:.0%} padding), fp32 on CPU; {machine_line()}; {len(ratios)} interleaved blocks of "
          f"{args.block} steps.\n")
    print("| loop | s per step (median) | relative |")
    print("|---|---:|---:|")
    print(f"| plain PyTorch (forward, backward, AdamW step) | {step_plain:.3f} | 1.00 |")
    print(f"| Lightning Trainer + lit_docemb callbacks and logging | {step_lightning:.3f} | "
          f"{step_lightning / step_plain:.3f} |")
    print(f"| **Lightning / plain, median of per-block ratios** (goal ≤ 1.05) | | **{ratio:.3f}** "
          f"{'met' if ratio <= 1.05 else 'MISSED'} (min {min(ratios):.3f}, max {max(ratios):.3f}) |")
    print(f"\nlit_docemb's own per-step hooks on the Lightning side (all {steps} steps, warm-up included):\n")
    print("| hook | ms per step | share of a plain step |")
    print("|---|---:|---:|")
    for label, seconds in hook_seconds.items():
        print(f"| {label} | {1e3 * seconds / steps:.2f} | {seconds / steps / step_plain:.1%} |")
    print(f"\n{load_line(load_before, load_after)}.")


if __name__ == "__main__":
    main()
