"""Do dataloader workers deliver what in-process collation does? Documents/s per method collated in the training
process, by 1 worker and by 2 workers, with each batch sent as one buffer (``one_buffer=True``, issue 23 item 2) and
as the collator returns it (``one_buffer=False``, what every method did before) (issue 23, item 2).

For each method (Graph-RoBERTa reading its tokenized-passage cache, DocSplit, DECA with Doc2VecC and WordNet and
CTPE with word vectors, each reading its field cache (``deca_text``, ``ctpe_text``: from the text, as before issue
23 item 1), CoLDE), the method's training collator runs in a
:class:`~lit_docemb.data.core.sampling.ResumableLoader` over ``--documents`` documents of ``--words`` words (batch
``--batch-size``); the rate is timed from the first batch on (worker start-up left out) over the whole epoch.
Every configuration is measured once per repeat, the repeats interleaved, so that the load of a shared machine
falls on all of them alike; the table shows medians and the median of the per-repeat ratios in-process / worker
(goal ≤ 1.3).

Encoders are random-init BERTs (``--hidden``, ``--layers``) with a WordPiece tokenizer trained on the documents
(no hub, no download); documents are resampled from text installed with Python
(:func:`~lit_docemb.data.corpora.installed_docs.iter_installed_docs`). Only the collators run: no model step.

With ``--device cuda`` it also checks, per method, that a batch pinned by the DataLoader's pin-memory thread and
moved to the GPU in one copy (:func:`~lit_docemb.data.core.batch_buffer.to_device_in_one_copy`) equals the collator's
batch, and times that copy against Lightning's field-by-field transfer (``move_data_to_device``).

Usage::

    python benchmarks/worker_transport.py
    python benchmarks/worker_transport.py --methods graph_roberta --repeats 5
    python3 benchmarks/worker_transport.py --device cuda
"""

from __future__ import annotations

import os

os.environ["TOKENIZERS_PARALLELISM"] = "false"

import argparse
import dataclasses
import itertools
import platform
import statistics
import tempfile
import time
import warnings
from pathlib import Path

import torch
from lightning.pytorch.utilities import move_data_to_device

from lit_docemb.augment import Vocabulary
from lit_docemb.data.core.batch_buffer import BufferedBatch, tensors_of, to_device_in_one_copy
from lit_docemb.data.core.document import Document, Section
from lit_docemb.data.caches.field_cache import FieldRows, FieldTokenCache
from lit_docemb.data.corpora.installed_docs import iter_installed_docs
from lit_docemb.data.core.sampling import DistributedBatchSampler, ResumableLoader
from lit_docemb.data.core.tokens import document_text
from lit_docemb.methods import CTPE, DECA, CoLDE, DocSplit, GraphRoBERTa
from lit_docemb.models import EncoderSpec
from lit_docemb.models.ctpe import WordEmbeddings
from lit_docemb.views.ctpe import FieldIds

METHODS = ["graph_roberta", "docsplit", "deca", "deca_text", "ctpe", "ctpe_text", "colde"]


def installed_text_documents(count: int, words: int, words_per_section: int = 200) -> list[Document]:
    """``count`` documents of ``words`` words in sections of ``words_per_section``: windows over the words of the
    installed Python documentation, document i starting 997 * i words in (wrapping around)."""
    stream = [w for doc in iter_installed_docs(["pydoc"]) for s in doc.sections for w in s.text.split()]
    documents = []
    for i in range(count):
        start = 997 * i % len(stream)
        text = list(itertools.islice(itertools.cycle(stream), start, start + words))
        sections = [Section(f"part {k}", " ".join(text[k:k + words_per_section]))
                    for k in range(0, words, words_per_section)]
        documents.append(Document(f"transport:{i}", f"Document {i}", sections, label=str(i % 8)))
    return documents


def write_encoder(folder: Path, documents: list[Document], hidden: int, layers: int) -> str:
    """A random-init BERT with a 8,000-entry WordPiece vocabulary trained on ``documents``, saved to ``folder``."""
    from tokenizers.implementations import BertWordPieceTokenizer
    from transformers import BertConfig, BertModel, PreTrainedTokenizerFast

    trained = BertWordPieceTokenizer(lowercase=True)
    trained.train_from_iterator((document_text(d, True) for d in documents), vocab_size=8000)
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=trained._tokenizer, unk_token="[UNK]", pad_token="[PAD]",
                                        cls_token="[CLS]", sep_token="[SEP]", mask_token="[MASK]")
    BertModel(BertConfig(vocab_size=len(tokenizer), hidden_size=hidden, num_hidden_layers=layers,
                         num_attention_heads=max(1, hidden // 64), intermediate_size=4 * hidden)).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return str(folder)


def training_items(method: str, encoder: str, documents: list[Document], cache: Path):
    """(the method's training collator, the items its DataLoader reads: documents or cached passages). ``deca`` and
    ``ctpe`` read their field caches (word types, fields' token ids) as in training; ``deca_text`` and ``ctpe_text``
    the same collators reading the text, as before issue 23 item 1."""
    if method == "graph_roberta":
        model = GraphRoBERTa(EncoderSpec(encoder), passage_cache_dir=str(cache))
        return model.collator("fit"), model.token_cache.open(documents)
    if method == "docsplit":
        return DocSplit(EncoderSpec(encoder)).collator("fit"), documents
    if method.startswith("deca"):
        model = DECA(token_cache_dir=str(cache))
        model._set_vocabulary(Vocabulary.from_texts(document_text(d, True) for d in documents))
        if method == "deca":
            model.word_rows = FieldRows(model.word_cache().open(documents))
        return model.collator("fit"), documents
    if method.startswith("ctpe"):
        model = CTPE(WordEmbeddings(init="random"), token_cache_dir=str(cache))
        model.prepare(documents)
        if method == "ctpe":
            model.field_rows = FieldRows(FieldTokenCache(FieldIds(model.tokenizer), str(cache)).open(documents))
        return model.collator("fit"), documents
    return CoLDE(EncoderSpec(encoder)).collator("fit"), documents


def loader_rate(collate, items, batch_size: int, workers: int, one_buffer: bool) -> float:
    """Documents/s of one epoch from its second batch on."""
    loader = ResumableLoader(items, DistributedBatchSampler(len(items), batch_size, seed=0), collate_fn=collate,
                             num_workers=workers, one_buffer=one_buffer)
    iterator = iter(loader)
    next(iterator)
    started, documents = time.perf_counter(), 0
    for batch in iterator:
        documents += len(batch) + getattr(batch, "skipped", 0)
    return documents / (time.perf_counter() - started)


def same(left, right) -> bool:
    if isinstance(left, torch.Tensor):
        return left.dtype == right.dtype and left.shape == right.shape and torch.equal(left.cpu(), right.cpu())
    if dataclasses.is_dataclass(left):
        return all(same(getattr(left, f.name), getattr(right, f.name)) for f in dataclasses.fields(left))
    if isinstance(left, list | tuple):
        return len(left) == len(right) and all(map(same, left, right))
    return left == right


def device_copy(collate, items, batch_size: int, device: torch.device, repeats: int = 20) -> tuple[float, float]:
    """Checks pinned + one-copy transfer against the collator's batch; ms per batch (one copy, field by field)."""
    batch = collate([items[i] for i in range(batch_size)])
    pinned = BufferedBatch.pack(batch).pin_memory().unpack()
    if not all(t.is_pinned() for t in tensors_of(pinned)):
        raise AssertionError("the buffer was not pinned")
    one_copy = to_device_in_one_copy(pinned, device, non_blocking=True)
    if one_copy is None or not same(batch, one_copy):
        raise AssertionError("the one-copy transfer changed the batch")
    timings = []
    for move in (lambda: to_device_in_one_copy(pinned, device, non_blocking=True),
                 lambda: move_data_to_device(pinned, device)):
        move()
        torch.cuda.synchronize(device)
        started = time.perf_counter()
        for _ in range(repeats):
            move()
        torch.cuda.synchronize(device)
        timings.append((time.perf_counter() - started) / repeats * 1000)
    return timings[0], timings[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--methods", nargs="+", default=METHODS, choices=METHODS)
    parser.add_argument("--documents", type=int, default=640)
    parser.add_argument("--words", type=int, default=800, help="words per document")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--hidden", type=int, default=128)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--device", default="cpu", help="cuda: also check and time the one-copy device transfer")
    args = parser.parse_args()
    warnings.filterwarnings("ignore", ".*does not have many workers.*")
    torch.set_num_threads(1)
    configurations = [(0, False), (1, False), (1, True), (2, False), (2, True)]  # (workers, one buffer)
    load_before = os.getloadavg()
    rows = []
    with tempfile.TemporaryDirectory(prefix="lit_docemb_transport_") as tmp:
        documents = installed_text_documents(args.documents, args.words)
        encoder = write_encoder(Path(tmp) / "bert", documents, args.hidden, args.layers)
        for method in args.methods:
            try:
                collate, items = training_items(method, encoder, documents, Path(tmp) / "passages")
            except FileNotFoundError as err:  # DECA's WordNet files (Debian's wordnet-base) are not installed
                print(f"{method}: left out: {err}", flush=True)
                continue
            rates = {c: [] for c in configurations}
            for _ in range(args.repeats):
                for workers, one_buffer in configurations:
                    rates[workers, one_buffer].append(loader_rate(collate, items, args.batch_size, workers,
                                                                  one_buffer))
            tensors = len(tensors_of(collate([items[i] for i in range(args.batch_size)])))
            copy_ms = device_copy(collate, items, args.batch_size, torch.device(args.device)) \
                if args.device.startswith("cuda") else None
            rows.append((method, tensors, rates, copy_ms))
            in_process = statistics.median(rates[0, False])
            print(f"{method}: in-process {in_process:,.0f} documents/s; " + ", ".join(
                f"{w} worker{'s' * (w > 1)} {'one buffer' if b else 'as returned'} "
                f"{statistics.median(rates[w, b]):,.0f}" for w, b in configurations[1:]), flush=True)
    load_after = os.getloadavg()
    print(f"\n{args.documents} documents of {args.words} words, batch {args.batch_size}, training collators, "
          f"{args.repeats} interleaved repeats; {platform.machine()}, {os.cpu_count()} CPUs, torch "
          f"{torch.__version__}, Python {platform.python_version()}.\n")
    print("| method | tensors per batch | in-process documents/s | 1 worker before / after | "
          "2 workers before / after | in-process ÷ 1 worker before → after | in-process ÷ 2 workers before → after |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for method, tensors, rates, _ in rows:
        def ratio(workers: int, one_buffer: bool) -> float:
            return statistics.median(a / b for a, b in zip(rates[0, False], rates[workers, one_buffer]))

        median = {c: statistics.median(r) for c, r in rates.items()}
        print(f"| {method} | {tensors} | {median[0, False]:,.0f} | {median[1, False]:,.0f} / {median[1, True]:,.0f} | "
              f"{median[2, False]:,.0f} / {median[2, True]:,.0f} | {ratio(1, False):.2f} → {ratio(1, True):.2f} | "
              f"{ratio(2, False):.2f} → {ratio(2, True):.2f} |")
    if args.device.startswith("cuda"):
        print(f"\nTransfer of one pinned batch to {torch.cuda.get_device_name(args.device)} (checked equal to the "
              f"collator's batch):\n\n| method | one copy ms | field by field ms |\n|---|---:|---:|")
        for method, _, _, (one, fields) in rows:
            print(f"| {method} | {one:.3f} | {fields:.3f} |")
    print(f"\nos.getloadavg() before: {', '.join(f'{x:.2f}' for x in load_before)}; after: "
          f"{', '.join(f'{x:.2f}' for x in load_after)} (1, 5, 15 min).")


if __name__ == "__main__":
    main()
