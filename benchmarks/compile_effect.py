"""Effect of ``encoder.compile: true`` (``torch.compile`` of the transformer) on a DocSplit training step (issue 12,
item 4).

Two copies of one :class:`~lit_docemb.methods.DocSplit` (same weights), one built with ``compile=True``,
each with its own AdamW, train on the same pre-collated batches (every view filled to ``--max-length`` tokens,
so shapes do not change and nothing recompiles after the first steps). The first ``--warmup`` steps of each
(the compilation, for the compiled copy) are timed apart; then the two alternate in blocks of ``--block``
steps, and the figure is the median over blocks of eager time / compiled time (> 1: compiled is faster).
The step is the plain loop of ``framework_overhead.py`` (forward, backward, AdamW step).

Usage::

    python benchmarks/compile_effect.py                 # 2-layer 128-d BERT, batch 8, 128 tokens, fp32, CPU
    python benchmarks/compile_effect.py --hidden 256 --layers 4 --pairs 10
"""

from __future__ import annotations

import os

os.environ["TOKENIZERS_PARALLELISM"] = "false"

import argparse
import statistics
import tempfile
import time

import torch

from common import load_line, machine_line, resampled_documents, write_bert
from framework_overhead import plain_step
from lit_docemb.methods import DocSplit
from lit_docemb.models import EncoderSpec


def timed_block(model, optimizer, batches) -> float:
    started = time.perf_counter()
    for batch in batches:
        plain_step(model, optimizer, batch)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hidden", type=int, default=128)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--max-length", type=int, default=128)
    parser.add_argument("--warmup", type=int, default=3, help="steps of each copy before timing (compilation)")
    parser.add_argument("--block", type=int, default=2, help="steps per block")
    parser.add_argument("--pairs", type=int, default=6, help="timed (eager, compiled) block pairs")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory(prefix="lit_docemb_compile_") as tmp:
        encoder = write_bert(os.path.join(tmp, "bert"), args.hidden, args.layers, max_positions=args.max_length)
        torch.manual_seed(0)
        eager = DocSplit(EncoderSpec(encoder, pooling="cls", max_length=args.max_length))
        compiled = DocSplit(EncoderSpec(encoder, pooling="cls", compile=True, max_length=args.max_length))
    compiled.load_state_dict(eager.state_dict())
    optimizers = {m: torch.optim.AdamW(m.parameters(), lr=m.default_learning_rate) for m in (eager, compiled)}
    collate = eager.collator("fit")
    steps = args.warmup + args.block * args.pairs
    documents = resampled_documents(steps * args.batch_size, 3 * args.max_length, ["pydoc"], seed=0)
    batches = [collate(documents[i: i + args.batch_size]) for i in range(0, len(documents), args.batch_size)]
    widths = {b.view_a.input_ids.shape[1] for b in batches} | {b.view_b.input_ids.shape[1] for b in batches}

    load_before = os.getloadavg()
    warmup = {name: timed_block(m, optimizers[m], batches[:args.warmup])
              for name, m in (("eager", eager), ("compiled", compiled))}
    seconds: dict[str, list[float]] = {"eager": [], "compiled": []}
    for pair in range(args.pairs):
        block = batches[args.warmup + pair * args.block: args.warmup + (pair + 1) * args.block]
        order = [("eager", eager), ("compiled", compiled)][:: 1 if pair % 2 == 0 else -1]
        for name, model in order:
            seconds[name].append(timed_block(model, optimizers[model], block))
    load_after = os.getloadavg()

    ratios = [e / c for e, c in zip(seconds["eager"], seconds["compiled"])]
    speedup = statistics.median(ratios)
    print(f"\nDocSplit training step (forward, backward, AdamW), random-init BERT {args.layers} × {args.hidden}, batch "
          f"{args.batch_size}, view widths {sorted(widths)} tokens, fp32; {machine_line()}; {args.pairs} interleaved "
          f"block pairs of {args.block} steps after {args.warmup} warm-up steps each.\n")
    print("| encoder | first steps (s, incl. compilation) | s per step (median) | eager / this, median of per-block "
          "ratios (min-max) |")
    print("|---|---:|---:|---:|")
    for name in ("eager", "compiled"):
        step = statistics.median(seconds[name]) / args.block
        ratio = "1.00" if name == "eager" else f"{speedup:.2f} ({min(ratios):.2f}-{max(ratios):.2f})"
        print(f"| {name} | {warmup[name]:.1f} | {step:.3f} | {ratio} |")
    print(f"\n{load_line(load_before, load_after)}.")


if __name__ == "__main__":
    main()
