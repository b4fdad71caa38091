"""DocSplit training throughput and model-FLOPs utilisation (MFU) through the Lightning Trainer (issue 12, item 4).

Trains :class:`~lit_docemb.methods.DocSplit` (two views per document plus the masked-LM copy of the first view,
as the paper) on pre-collated batches of installed text long enough to fill every view, through
``Trainer.fit`` with the CLI's callbacks, and reports documents/s, tokens/s and MFU over the steps after a
warm-up (on CUDA each timed window ends with a device synchronisation).

Model FLOPs per step (fwd + bwd = 3 x forward; no recomputation counted), for a BERT of L layers, width d,
FFN 4d, vocabulary V, over every encoder pass (2B views + B masked copies) of real tokens:
``72 L d^2`` per token (the dense layers), ``12 L d T^2`` per sequence of T tokens (attention scores and
values), and ``6 (d^2 + d V)`` per masked position (the MLM head, scored only at masked positions).
MFU = model FLOPs/s / peak FLOPs/s of the device: ``--peak-tflops``, else a table of dense bf16 peaks by GPU
name (H100 SXM 989, H100 PCIe 756, H200 989, A100 312 TFLOP/s), else on CPU the fp32 rate of a 2048 x 2048
matmul measured here (so on CPU the figure is "share of this machine's matmul rate", labelled as such).

Usage::

    python benchmarks/throughput.py --device cuda        # BERT-base size, 512 tokens, batch 32, bf16-mixed
    python benchmarks/throughput.py --device cpu         # 2-layer 128-d BERT, 128 tokens, batch 4, fp32
"""

from __future__ import annotations

import os

os.environ["TOKENIZERS_PARALLELISM"] = "false"

import argparse
import tempfile
import time
import warnings

import lightning as L
import torch
from lightning.pytorch.callbacks import Callback
from torch.utils.data import DataLoader

from common import load_line, machine_line, resampled_documents, write_bert
from lit_docemb.methods.callbacks import peak_memory_gib
from lit_docemb.data.batches import ViewPairBatch, count_tokens
from lit_docemb.methods import DocSplit

#: Dense (no sparsity) bf16 tensor-core peaks, TFLOP/s, by a substring of ``torch.cuda.get_device_name()``.
PEAK_BF16_TFLOPS = {"H100 PCIe": 756.0, "H100": 989.0, "H200": 989.0, "A100": 312.0, "L40S": 362.0, "A10G": 70.0}

PRESETS = {"cuda": {"hidden": 768, "layers": 12, "max_length": 512, "batch_size": 32, "precision": "bf16-mixed",
                    "steps": 40, "warmup": 10},
           "cpu": {"hidden": 128, "layers": 2, "max_length": 128, "batch_size": 4, "precision": "32-true",
                   "steps": 12, "warmup": 4}}


def docsplit_step_flops(batch: ViewPairBatch, layers: int, hidden: int, vocabulary: int) -> float:
    """Model FLOPs (forward + backward) of one DocSplit training step on ``batch`` (see the module docstring)."""
    masks = [batch.view_a.attention_mask, batch.view_b.attention_mask]
    if batch.mlm is not None:
        masks.append(batch.mlm.attention_mask)
    lengths = torch.cat([m.sum(1) for m in masks]).double()  # real tokens of every encoded sequence
    dense = 72 * layers * hidden**2 * float(lengths.sum())
    attention = 12 * layers * hidden * float(lengths.square().sum())
    masked = int((batch.mlm.labels != -100).sum()) if batch.mlm is not None else 0
    return dense + attention + 6 * (hidden**2 + hidden * vocabulary) * masked


def peak_flops(device: torch.device, given_tflops: float | None) -> tuple[float, str]:
    if given_tflops is not None:
        return given_tflops * 1e12, f"{given_tflops:g} TFLOP/s (--peak-tflops)"
    if device.type == "cuda":
        name = torch.cuda.get_device_name(device)
        for key, tflops in PEAK_BF16_TFLOPS.items():
            if key in name:
                return tflops * 1e12, f"{tflops:g} TFLOP/s, dense bf16 peak of {name}"
        raise SystemExit(f"no known bf16 peak for {name!r}: pass --peak-tflops")
    a, b = torch.randn(2048, 2048), torch.randn(2048, 2048)
    a @ b
    started, repeats = time.perf_counter(), 5
    for _ in range(repeats):
        a @ b
    rate = repeats * 2 * 2048**3 / (time.perf_counter() - started)
    return rate, f"{rate / 1e12:.3f} TFLOP/s, fp32 2048² matmul measured here ({torch.get_num_threads()} threads)"


class StepTimer(Callback):
    """Wall time, tokens, documents and model FLOPs of the steps after ``warmup``."""

    def __init__(self, warmup: int, flops) -> None:
        self.warmup, self.flops = warmup, flops
        self.started: float | None = None
        self.seconds = self.tokens = self.documents = self.model_flops = 0.0

    def _now(self, pl_module) -> float:
        if pl_module.device.type == "cuda":
            torch.cuda.synchronize(pl_module.device)
        return time.perf_counter()

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx: int) -> None:
        if batch_idx == self.warmup:
            self.started = self._now(pl_module)

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx: int) -> None:
        if batch_idx >= self.warmup:
            self.tokens += int(count_tokens(batch))
            self.documents += len(batch)
            self.model_flops += self.flops(batch)

    def on_train_end(self, trainer, pl_module) -> None:
        self.seconds = self._now(pl_module) - self.started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", choices=["cuda", "cpu"], default="cuda" if torch.cuda.is_available() else "cpu")
    for name in ("hidden", "layers", "max_length", "batch_size", "steps", "warmup"):
        parser.add_argument(f"--{name.replace('_', '-')}", type=int, default=None, help="default: the device's preset")
    parser.add_argument("--precision", default=None, help="Trainer precision (preset: bf16-mixed on cuda, 32-true on cpu)")
    parser.add_argument("--peak-tflops", type=float, default=None, help="device peak for MFU (default: see above)")
    parser.add_argument("--compile", action="store_true", help="compile_encoder=True")
    parser.add_argument("--threads", type=int, default=None, help="CPU threads (torch default if unset)")
    args = parser.parse_args()
    for key, value in PRESETS[args.device].items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    if args.threads:
        torch.set_num_threads(args.threads)
    warnings.filterwarnings("ignore", ".*does not have many workers.*")
    L.seed_everything(0, verbose=False)
    device = torch.device(args.device, 0) if args.device == "cuda" else torch.device("cpu")
    if args.device == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True

    with tempfile.TemporaryDirectory(prefix="lit_docemb_throughput_") as tmp:
        encoder = write_bert(os.path.join(tmp, "bert"), args.hidden, args.layers, max_positions=max(512, args.max_length))
        model = DocSplit(encoder, pooling="cls", max_length=args.max_length, compile_encoder=args.compile)
        vocabulary = len(model.tokenizer)
        collate = model.collator("fit")
        documents = resampled_documents(args.steps * args.batch_size, 3 * args.max_length, ["pydoc"], seed=0)
        batches = [collate(documents[i: i + args.batch_size]) for i in range(0, len(documents), args.batch_size)]
        timer = StepTimer(args.warmup, lambda b: docsplit_step_flops(b, args.layers, args.hidden, vocabulary))
        trainer = L.Trainer(accelerator="gpu" if args.device == "cuda" else "cpu", devices=1,
                            precision=args.precision, max_steps=args.steps, logger=False, enable_checkpointing=False,
                            enable_model_summary=False, enable_progress_bar=False, limit_val_batches=0,
                            callbacks=[timer])
        load_before = os.getloadavg()
        trainer.fit(model, train_dataloaders=DataLoader(batches, batch_size=None))
        load_after = os.getloadavg()
    peak, peak_text = peak_flops(device, args.peak_tflops)
    achieved = timer.model_flops / timer.seconds
    memory = peak_memory_gib(device)  # CUDA max allocated, or the process's peak RSS on CPU
    name = torch.cuda.get_device_name(device) if args.device == "cuda" else machine_line()
    full = sum(int(b.view_a.attention_mask.all() and b.view_b.attention_mask.all()) for b in batches)
    print(f"\nDocSplit, random-init BERT {args.layers} × {args.hidden} (FFN {4 * args.hidden}, vocab {vocabulary:,}, "
          f"MLM head), {args.max_length} tokens per view ({full}/{len(batches)} batches without padding), batch "
          f"{args.batch_size}, {args.precision}{', compiled' if args.compile else ''}, on {name}; "
          f"{args.steps - args.warmup} timed steps after {args.warmup} warm-up.\n")
    print("| documents/s | tokens/s | model TFLOP/s | MFU | peak used | peak memory GiB |")
    print("|---:|---:|---:|---:|---|---:|")
    print(f"| {timer.documents / timer.seconds:,.1f} | {timer.tokens / timer.seconds:,.0f} | {achieved / 1e12:.3f} | "
          f"{achieved / peak:.1%} | {peak_text} | {memory:.2f} |")
    print(f"\ntokens: real tokens of every encoder pass (2 views + the masked copy). {load_line(load_before, load_after)}.")


if __name__ == "__main__":
    main()
