"""One buffer per batch across the worker boundary (issue 23, item 2): every method's batches come out of a
worker as one buffer and are rebuilt exactly (fields, dtypes, shapes, ``None`` fields, lists of tensors), a real
DataLoader with a worker gives the batches and losses of in-process collation, and a one-storage batch reaches a
device in one copy (on a GPU: ``benchmarks/worker_transport.py --device cuda`` checks the pinned buffer and the
one copy to the device against the collator's batch, as no CPU test can)."""

from __future__ import annotations

import copy
import dataclasses

import lightning as L
import pytest
import torch
from conftest import _topic_texts
from lightning.pytorch.callbacks import Callback

from lit_docemb.augment import Vocabulary
from lit_docemb.data import JSONLDataModule, PassageSpec
from lit_docemb.data.core.batch_buffer import BufferedBatch, BufferedCollate, tensors_of, to_device_in_one_copy
from lit_docemb.data.core.batches import MaskedTokenBatch, PassageGraphBatch, TokenBatch, ViewPairBatch
from lit_docemb.data.core.document import Document, Section
from lit_docemb.data.retrieval.datamodule import RetrievalExample
from lit_docemb.data.core.sampling import DistributedBatchSampler, ResumableLoader
from lit_docemb.data.core.tokens import document_text
from lit_docemb.methods import CTPE, DECA, CoLDE, DocSplit, GraphRoBERTa
from lit_docemb.methods.deca_components import Append, Doc2VecCBackbone, EncoderBackbone
from lit_docemb.views.classifier import LabelledCollator
from lit_docemb.models.ctpe import WordEmbeddings
from lit_docemb.views.dense_retrieval import QueryDocumentCollator
from lit_docemb.models import EncoderSpec


def documents(n: int = 10) -> list[Document]:
    """Titled documents of two to four sections with two labels; one of a single word (skipped by most views)."""
    docs = [Document(f"d{i}", name, [Section(f"part {s}", text[s * 300:(s + 1) * 300]) for s in range(2 + i % 3)],
                     label="ab"[i % 2]) for i, (name, text) in enumerate(_topic_texts()[:n - 1])]
    return docs + [Document("short", "", [Section("", "word")], label="a")]


def assert_same(left, right, where: str = "batch") -> None:
    """Equal types, and equal dtypes, shapes and values of every tensor, recursively."""
    assert type(left) is type(right), (where, type(left), type(right))
    if isinstance(left, torch.Tensor):
        assert (left.dtype, left.shape) == (right.dtype, right.shape), where
        assert torch.equal(left, right), where
    elif dataclasses.is_dataclass(left):
        for field in dataclasses.fields(left):
            assert_same(getattr(left, field.name), getattr(right, field.name), f"{where}.{field.name}")
    elif isinstance(left, dict):
        assert list(left) == list(right), where
        for key in left:
            assert_same(left[key], right[key], f"{where}[{key!r}]")
    elif isinstance(left, list | tuple):
        assert len(left) == len(right), where
        for i, (a, b) in enumerate(zip(left, right)):
            assert_same(a, b, f"{where}[{i}]")
    else:
        assert left == right, where


def one_storage(batch) -> bool:
    return len({t.untyped_storage().data_ptr() for t in tensors_of(batch)}) == 1


def test_the_buffer_keeps_fields_dtypes_shapes_none_and_empty_tensors():
    tokens = TokenBatch(torch.arange(12).view(3, 4), torch.ones(3, 4, dtype=torch.long))
    graphs = PassageGraphBatch(tokens, torch.tensor([1, 2]), [torch.zeros(2, 0, dtype=torch.long),
                                                             torch.tensor([[0, 1], [1, 0]])], torch.tensor([True, False]))
    batch = ViewPairBatch(tokens, TokenBatch(torch.zeros(0, 1, dtype=torch.long), torch.zeros(0, 1, dtype=torch.bool)),
                          torch.tensor([2**62, -5]), None, skipped=3)
    mixed = {"graphs": graphs, "pair": (batch, [torch.tensor(0.5, dtype=torch.bfloat16)]), "ids": ["a", "b"],
             "mlm": MaskedTokenBatch(tokens.input_ids, tokens.attention_mask, torch.full((3, 4), -100))}
    for value in (batch, graphs, mixed):
        buffered = BufferedBatch.pack(value)
        assert buffered.buffer.dtype == torch.uint8 and buffered.buffer.dim() == 1
        rebuilt = buffered.unpack()
        assert_same(value, rebuilt)
        assert one_storage(rebuilt)
    assert len(BufferedBatch.pack(batch)) == len(batch) == 3
    with pytest.raises(TypeError, match="no len"):
        len(BufferedBatch.pack(torch.tensor(1.0)))  # a 0-d tensor has no len()
    assert BufferedBatch.pack([Document("x")]).unpack() == [Document("x")]  # no tensor: the items as they are


@pytest.fixture(scope="module")
def collators(tiny_encoder_dir) -> dict:
    """(collator, method whose ``losses`` reads its batches or None) of every method's stages."""
    docs = documents()
    graph = GraphRoBERTa(EncoderSpec(tiny_encoder_dir), node_dim=16,
                         passages=PassageSpec(words_per_passage=40, max_passage_tokens=64))
    docsplit = DocSplit(EncoderSpec(tiny_encoder_dir, max_length=64))
    deca = DECA(Doc2VecCBackbone(min_word_count=1, embedding_dim=8))
    append = DECA(Doc2VecCBackbone(min_word_count=1, embedding_dim=8), Append())
    for method in (deca, append):
        method._set_vocabulary(Vocabulary.from_texts(document_text(d, True) for d in docs))
    deca_encoder = DECA(EncoderBackbone(EncoderSpec(tiny_encoder_dir, max_length=64)))
    deca_encoder._set_vocabulary(Vocabulary.from_texts(document_text(d, True) for d in docs))
    colde = CoLDE(EncoderSpec(tiny_encoder_dir), chunk_tokens=24, num_heads=2, lstm_output_size=16, projection_size=8,
                  chunk_embeddings=16)
    ctpe = CTPE(WordEmbeddings(init="random", min_count=1, dim=8), pos=0.5, n_filters=4, kernel_widths=[1, 2])
    ctpe.prepare(docs, docs)
    return {
        "graph_roberta_fit": (graph.collator("fit"), graph),
        "graph_roberta_predict": (graph.collator("predict"), None),
        "docsplit_fit_mlm": (docsplit.collator("fit"), docsplit),
        "docsplit_validate": (DocSplit(EncoderSpec(tiny_encoder_dir, max_length=64),
                                       mlm_weight=0.0).collator("validate"),
                              None),
        "docsplit_predict": (docsplit.collator("predict"), None),
        "deca_fit": (deca.collator("fit"), deca),
        "deca_append_fit": (append.collator("fit"), append),
        "deca_predict": (deca.collator("predict"), None),
        "deca_encoder_fit": (deca_encoder.collator("fit"), deca_encoder),
        "colde_fit": (colde.collator("fit"), colde),
        "colde_predict": (colde.collator("predict"), None),
        "ctpe_fit": (ctpe.collator("fit"), ctpe),
        "ctpe_predict": (ctpe.collator("predict"), None),
        "classifier": (LabelledCollator(graph.collator("predict"), ["a", "b"]), None),
    }


def loader_batches(collate, items: list, workers: int) -> list:
    loader = ResumableLoader(items, DistributedBatchSampler(len(items), 4, seed=3), collate_fn=collate,
                             num_workers=workers)
    return list(loader)


@pytest.mark.parametrize("name", ["graph_roberta_fit", "graph_roberta_predict", "docsplit_fit_mlm",
                                  "docsplit_validate", "docsplit_predict", "deca_fit", "deca_append_fit",
                                  "deca_predict", "deca_encoder_fit", "colde_fit", "colde_predict", "ctpe_fit",
                                  "ctpe_predict", "classifier"])
def test_every_method_batch_comes_out_of_a_worker_as_in_process(collators, name):
    collate, method = collators[name]
    items = documents()
    in_process, from_worker = loader_batches(collate, items, 0), loader_batches(collate, items, 1)
    assert len(in_process) == len(from_worker) == 3
    for i, (reference, batch) in enumerate(zip(in_process, from_worker)):
        assert_same(reference, batch, f"{name} batch {i}")
        assert one_storage(batch), name  # it crossed as one buffer
        assert_same(reference, BufferedBatch.pack(reference).unpack(), f"{name} batch {i} packed in-process")
        if method is not None and len(reference):
            losses = []
            for candidate in (reference, batch):  # a copy each: DECA's Doc2VecC trains in place in its loss
                model = copy.deepcopy(method)
                torch.manual_seed(0)
                losses.append(model.total_loss(model.losses(candidate)).detach())
            assert torch.equal(*losses), name


def test_dense_retrieval_batches_come_out_of_a_worker_as_in_process(collators):
    docs = documents()
    examples = [RetrievalExample(str(i // 2), f"query {i}", docs[i], [docs[(i + 3) % len(docs)]]) for i in range(8)]
    collate = QueryDocumentCollator(collators["graph_roberta_predict"][0])
    for reference, batch in zip(loader_batches(collate, examples, 0), loader_batches(collate, examples, 1),
                                strict=True):
        assert_same(reference, batch)
        assert one_storage(batch)
        assert batch.queries.graphs.is_query.all() and not batch.documents.graphs.is_query.any()  # kept the marks


def test_one_buffer_off_sends_the_batch_as_it_is(collators):
    collate, _ = collators["graph_roberta_fit"]
    items = documents()
    loader = ResumableLoader(items, DistributedBatchSampler(len(items), 4, seed=3), collate_fn=collate,
                             num_workers=1, one_buffer=False)
    assert not isinstance(loader.loader.collate_fn.collate_fn, BufferedCollate)
    batches = list(loader)
    assert not one_storage(batches[0])  # Graph-RoBERTa's ~dozen tensors, each in its own storage
    for reference, batch in zip(loader_batches(collate, items, 0), batches, strict=True):
        assert_same(reference, batch)


def test_a_one_storage_batch_reaches_a_device_in_one_copy(collators):
    collate, _ = collators["graph_roberta_fit"]
    batch = BufferedBatch.pack(collate(documents())).unpack()
    assert to_device_in_one_copy(batch, torch.device("cpu")) is None  # nothing to move
    assert to_device_in_one_copy(collate(documents()), torch.device("meta")) is None  # several storages
    big = torch.arange(100)
    assert to_device_in_one_copy(TokenBatch(big[:2], big[2:4]), torch.device("meta")) is None  # a small part
    datamodule = JSONLDataModule(paths=["unused.jsonl"])  # Lightning moves a batch with its DataModule's hook
    for moved in (to_device_in_one_copy(batch, torch.device("meta")),
                  datamodule.transfer_batch_to_device(batch, torch.device("meta"), 0)):
        assert all(t.device.type == "meta" for t in tensors_of(moved))
        assert [(t.dtype, t.shape) for t in tensors_of(moved)] == [(t.dtype, t.shape) for t in tensors_of(batch)]
        assert moved.skipped == batch.skipped
    several = collate(documents())  # several storages: moved as Lightning moves them
    moved = datamodule.transfer_batch_to_device(several, torch.device("meta"), 0)
    assert all(t.device.type == "meta" for t in tensors_of(moved))


class FirstLoss(Callback):
    def __init__(self) -> None:
        self.losses: list[torch.Tensor] = []

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx: int) -> None:
        self.losses.append(outputs["loss"].detach().clone())


@pytest.mark.parametrize("method", ["graph_roberta", "docsplit"])
def test_training_steps_give_the_same_losses_with_a_worker(tiny_encoder_dir, corpus_jsonl, tmp_path, method):
    losses = []
    for workers in (0, 1):
        L.seed_everything(0, verbose=False)
        model = GraphRoBERTa(EncoderSpec(tiny_encoder_dir), node_dim=16, passages=PassageSpec(max_passage_tokens=64),
                             passage_cache_dir=str(tmp_path / "passages")) if method == "graph_roberta" else \
            DocSplit(EncoderSpec(tiny_encoder_dir, max_length=64))
        recorder = FirstLoss()
        trainer = L.Trainer(accelerator="cpu", max_steps=2, logger=False, enable_checkpointing=False,
                            enable_progress_bar=False, enable_model_summary=False, limit_val_batches=0,
                            callbacks=[recorder])
        trainer.fit(model, datamodule=JSONLDataModule(paths=[corpus_jsonl], batch_size=4, num_workers=workers,
                                                      val_fraction=0.0, max_documents=12))
        losses.append(torch.stack(recorder.losses))
    assert len(losses[0]) == 2 and torch.equal(*losses), losses
