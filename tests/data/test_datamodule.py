"""DocumentDataModule: split, counted empties, loaders; and real 2-process CPU DDP fits that record the ids each
rank trains on: exact-once coverage, equal step counts, and mid-epoch resume equal to an uninterrupted run.

Run as a script (``python tests/data/test_datamodule.py '<json>'``) it is the DDP training program: Lightning's
``strategy="ddp"`` relaunches the script for rank 1, so the fits run in subprocesses, never inside pytest.
"""

from __future__ import annotations

import faulthandler
import json
import math
import types
import subprocess
import sys
from collections import Counter
from pathlib import Path

import lightning as L
import pytest
import torch
from lightning.pytorch.callbacks import ModelCheckpoint
from lightning.pytorch.trainer.connectors.data_connector import _process_dataloader
from lightning.pytorch.trainer.states import RunningStage, TrainerFn
from torch import nn
from torch.utils.data import DataLoader

from lit_docemb.data.core.datamodule import DocumentDataModule
from lit_docemb.data.core.document import Document, Section, doc_index
from lit_docemb.data.core.sampling import DistributedBatchSampler, ResumableLoader
from lit_docemb.distributed import close_process_group
from lit_docemb.errors import ConfigError
from lit_docemb.losses import NTXentLoss

N_DOCUMENTS = 55  # 8 of them empty; seed 3 holds out 6: 41 train documents, 5 global steps of 8, then 1


def make_documents(n: int = N_DOCUMENTS) -> list[Document]:
    return [Document(f"doc{i:03d}", sections=[Section("", "" if i % 7 == 3 else f"Text of document {i}.")])
            for i in range(n)]


class ListDataModule(DocumentDataModule):
    """A DocumentDataModule over generated documents.

    Args:
        n_documents: How many documents to generate.
        **kwargs: See :class:`DocumentDataModule`.
    """

    def __init__(self, n_documents: int = N_DOCUMENTS, **kwargs) -> None:
        kwargs.setdefault("val_fraction", 0.2)
        super().__init__(**kwargs)
        self.n_documents = n_documents

    def load_documents(self) -> list[Document]:
        return make_documents(self.n_documents)


def doc_ids(ids: list[str]) -> torch.Tensor:
    return torch.tensor([doc_index(i) for i in ids], dtype=torch.long)


def collate_ids(documents: list[Document]) -> dict:
    return {"ids": [d.id for d in documents], "x": torch.tensor([[float(len(d.text))] for d in documents]).view(-1, 1)}


class RecordingModule(L.LightningModule):
    """A one-weight model that records, per rank, the ids of every batch it trains and validates on."""

    def __init__(self, out: str) -> None:
        super().__init__()
        self.out = out
        self.layer = nn.Linear(1, 1)
        self.train_records, self.val_records = [], []

    def collator(self, stage: str):
        return collate_ids

    def setup(self, stage: str) -> None:
        self.trainer.datamodule.connect(self.collator)

    def training_step(self, batch, batch_idx):
        features = torch.cat([batch["x"], torch.ones_like(batch["x"])], 1)  # (B, 2): a vector per document
        negatives = NTXentLoss()(features, features + 1, doc_ids(batch["ids"]))["negatives_per_anchor"]
        self.train_records.append([self.current_epoch, self.global_step, batch["ids"], float(negatives)])
        return self.layer(batch["x"] / 100).pow(2).sum() / max(len(batch["ids"]), 1)  # 0 rows: a zero loss

    def validation_step(self, batch, batch_idx):
        if not self.trainer.sanity_checking:
            self.val_records.append([self.current_epoch, batch["ids"]])

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.01)

    def on_fit_end(self):
        path = Path(self.out) / f"rank{self.global_rank}.json"
        path.write_text(json.dumps({"train": self.train_records, "val": self.val_records}))


def ddp_fit(config: dict) -> None:
    """One 2-process CPU DDP fit (the script's body; see the module docstring). A process still running after
    HANG_S prints every thread's stack and exits, so that a hang reaches the test's failure message (the
    relaunched rank runs this too) instead of a bare timeout."""
    faulthandler.dump_traceback_later(HANG_S, exit=True)
    callbacks = []
    if config.get("checkpoint_at"):
        callbacks.append(ModelCheckpoint(dirpath=config["out"], filename="mid",
                                         every_n_train_steps=config["checkpoint_at"], save_top_k=1))
    devices = config.get("devices", 2)
    trainer = L.Trainer(accelerator="cpu", devices=devices, strategy="ddp" if devices > 1 else "auto",
                        max_epochs=config.get("max_epochs", 2), accumulate_grad_batches=config.get("accumulate", 1),
                        max_steps=config.get("max_steps", -1), logger=False, enable_progress_bar=False,
                        enable_model_summary=False, enable_checkpointing=bool(callbacks), callbacks=callbacks,
                        use_distributed_sampler=config.get("use_distributed_sampler", True),
                        default_root_dir=config["out"])
    batches = {"global_batch_size": config["global_batch_size"]} if "global_batch_size" in config else {"batch_size": 4}
    datamodule = ListDataModule(**batches, num_workers=config.get("num_workers", 0), seed=3)
    trainer.fit(RecordingModule(config["out"]), datamodule=datamodule, ckpt_path=config.get("ckpt_path"))
    close_process_group()  # as the CLI does: a gloo group left up can abort the finished process at exit


HANG_S = 240  # a fit takes about 9 s on 2 cores


def run_ddp(tmp_path: Path, name: str, **config) -> list[dict]:
    out = tmp_path / name
    out.mkdir()
    result = subprocess.run([sys.executable, __file__, json.dumps({"out": str(out), **config})],
                            capture_output=True, text=True, timeout=HANG_S + 60, cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-4000:]
    return [json.loads((out / f"rank{rank}.json").read_text()) for rank in range(config.get("devices", 2))]


def split_ids() -> tuple[list[str], list[str]]:
    datamodule = ListDataModule(seed=3)
    datamodule.setup("fit")
    return [d.id for d in datamodule.train_set], [d.id for d in datamodule.val_set]


# --- the DataModule in one process ---------------------------------------------------------------------------
def test_training_and_validation_loaders_keep_their_workers_between_epochs():
    """Each epoch's validation pass reuses its workers as training does (forking them anew cost DECA's MR run a
    tenth of its CPU time); the collators seed every batch, so what a worker made before does not change a batch."""
    datamodule = ListDataModule(seed=3, num_workers=2)
    datamodule.collate_fn = collate_ids
    datamodule.setup("fit")
    assert datamodule.train_dataloader().loader.persistent_workers
    assert datamodule.val_dataloader().loader.persistent_workers


def test_split_is_stable_disjoint_and_counts_empty_documents():
    datamodule = ListDataModule(seed=3)
    datamodule.setup("fit")
    train, val = split_ids()
    assert datamodule.stats["empty_document"] == sum(i % 7 == 3 for i in range(N_DOCUMENTS)) == 8
    assert len(train) + len(val) == N_DOCUMENTS - 8 and not set(train) & set(val)
    assert 0 < len(val) < len(train)
    assert [d.id for d in datamodule.all_set] == sorted(train + val)
    shuffled = ListDataModule(seed=3)
    shuffled.load_documents = lambda: make_documents()[::-1]
    shuffled.setup("fit")
    assert {d.id for d in shuffled.val_set} == set(val)  # held out by id, not by position
    capped = ListDataModule(seed=3, max_val_documents=2)
    capped.setup("fit")
    assert [d.id for d in capped.val_set] == val[:2] and [d.id for d in capped.train_set] == train


def test_loaders_use_the_methods_collator_and_see_every_document_once():
    datamodule = ListDataModule(seed=3, batch_size=4, num_workers=0)
    datamodule.setup("fit")
    datamodule.collate_fn = collate_ids
    train, val = split_ids()
    loader = datamodule.train_dataloader()
    assert isinstance(loader, ResumableLoader) and len(loader) == math.ceil(len(train) / 4)
    epoch0 = [i for batch in loader for i in batch["ids"]]
    loader.sampler.set_epoch(1)
    epoch1 = [i for batch in loader for i in batch["ids"]]
    assert Counter(epoch0) == Counter(epoch1) == Counter(train) and epoch0 != epoch1
    assert [i for batch in datamodule.val_dataloader() for i in batch["ids"]] == val  # in order, once
    datamodule.predict_split = "val"
    predict = datamodule.predict_dataloader()
    assert isinstance(predict, DataLoader) and [i for b in predict for i in b["ids"]] == val


class KeptIds:
    """A collator that reads a document's id alone and says so (``kept_item``); each batch says how many documents
    were read in the process that made it."""

    def __init__(self) -> None:
        self.met = []

    def kept_item(self, doc: Document | str) -> str:
        if isinstance(doc, Document):
            self.met.append(doc.id)
        return doc if isinstance(doc, str) else doc.id

    def __call__(self, items: list[str]) -> dict:
        return {"ids": list(items), "read": torch.tensor(len(self.met))}


@pytest.mark.parametrize("num_workers", [0, 1])
def test_a_collators_kept_items_are_read_once_in_the_process_and_served_every_epoch(num_workers):
    """A collator with ``kept_item`` (DECA's Doc2VecC collators) is served the compact form of its items: each
    document is read once per process (the main process, or the loader's persistent worker), every epoch sees every
    document in its own order, the same batches as reading them anew."""
    datamodule = ListDataModule(seed=3, batch_size=4, num_workers=num_workers)
    datamodule.setup("fit")
    collate = KeptIds()
    datamodule.collate_fn = collate
    train, _ = split_ids()
    loader = datamodule.train_dataloader()
    epochs, read = [], []
    for epoch in range(3):
        loader.sampler.set_epoch(epoch)
        batches = list(loader)
        epochs.append([i for batch in batches for i in batch["ids"]])
        read.append(int(batches[-1]["read"]))
    assert all(Counter(e) == Counter(train) for e in epochs) and epochs[0] != epochs[1]
    assert read == [len(train)] * 3  # all in the first epoch, none after
    datamodule.collate_fn = collate_ids  # no kept_item: the documents themselves
    plain = datamodule.train_dataloader()
    plain.sampler.set_epoch(1)
    assert [i for batch in plain for i in batch["ids"]] == epochs[1]


def test_drop_last_drops_only_the_partial_last_step_of_training():
    datamodule = ListDataModule(seed=3, batch_size=4, num_workers=0, drop_last=True)
    datamodule.setup("fit")
    datamodule.collate_fn = collate_ids
    train, val = split_ids()
    sizes = [len(batch["ids"]) for batch in datamodule.train_dataloader()]
    assert sizes == [4] * (len(train) // 4)
    assert [i for batch in datamodule.val_dataloader() for i in batch["ids"]] == val


def test_the_collator_comes_from_the_connected_method():
    datamodule = ListDataModule(num_workers=0)
    datamodule.setup("fit")
    with pytest.raises(RuntimeError, match=r"needs a collator: call datamodule.connect\(method.collator\)"):
        datamodule.train_dataloader()
    stages = []
    datamodule.connect(lambda stage: stages.append(stage) or collate_ids)
    assert set(next(iter(datamodule.train_dataloader()))) == {"ids", "x"}
    assert datamodule.predict_dataloader().collate_fn is collate_ids and stages == ["fit", "predict"]
    datamodule.collate_fn = list  # set directly, it wins
    assert isinstance(next(iter(datamodule.val_dataloader()))[0], Document) and stages == ["fit", "predict"]


def test_a_methods_setup_connects_a_datamodule_that_batches_with_its_collators_and_no_other(tiny_encoder_dir):
    """DocumentDataModule and embed's EmbedDataModule declare MethodBatches: the method's setup hands them its
    collators; another library's DataModule (its own collate_fn) is left as it is."""
    from lit_docemb.data.core.contract import MethodBatches
    from lit_docemb.eval.embedding_writers import EmbedDataModule
    from lit_docemb.methods import DocSplit
    from lit_docemb.models import EncoderSpec

    method = DocSplit(EncoderSpec(tiny_encoder_dir, max_length=32), mlm_weight=0.0)
    method.trainer = L.Trainer(accelerator="cpu", logger=False, enable_progress_bar=False)
    foreign = L.LightningDataModule()
    for datamodule in (ListDataModule(num_workers=0), EmbedDataModule(make_documents(4)), foreign):
        method.trainer.datamodule = datamodule
        method.setup("predict")
        assert isinstance(datamodule, MethodBatches) == (datamodule is not foreign)
        assert getattr(datamodule, "collator_factory", None) == (None if datamodule is foreign else method.collator)


@pytest.mark.parametrize("use_distributed_sampler", [True, False])
def test_lightning_keeps_our_loader_under_ddp(use_distributed_sampler):
    """With use_distributed_sampler=True Lightning rebuilds a DataLoader around a DistributedSampler (and would
    pass it where our sampler expects a document count); our loader is not a DataLoader, so it is kept."""
    trainer = L.Trainer(accelerator="cpu", devices=2, strategy="ddp", use_distributed_sampler=use_distributed_sampler,
                        logger=False)
    loader = ResumableLoader(list(range(10)), DistributedBatchSampler(10, 2), collate_fn=list)
    assert _process_dataloader(trainer, TrainerFn.FITTING, RunningStage.TRAINING, loader) is loader
    assert _process_dataloader(trainer, TrainerFn.FITTING, RunningStage.VALIDATING, loader) is loader
    plain = DataLoader(list(range(10)), batch_size=2)
    processed = _process_dataloader(trainer, TrainerFn.FITTING, RunningStage.TRAINING, plain)
    assert (processed is not plain) == use_distributed_sampler


# --- real DDP fits ------------------------------------------------------------------------------------------
def trained(records: list[dict], epoch: int | None = None) -> list[list]:
    return [[e, step, ids] for e, step, ids, *_ in records if epoch is None or e == epoch]


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory) -> list[dict]:
    """Two epochs on 2 CPU processes with 2 dataloader workers each."""
    return run_ddp(tmp_path_factory.mktemp("ddp"), "full", max_epochs=2, num_workers=2)


@pytest.mark.slow
def test_ddp_fit_trains_every_document_once_per_epoch_with_equal_steps(uninterrupted):
    train, val = split_ids()
    steps = math.ceil(len(train) / 8)
    assert len(train) % 8 == 1  # the last global step has 1 document: rank 1 trains on an empty batch
    for epoch in range(2):
        per_rank = [trained(r["train"], epoch) for r in uninterrupted]
        assert [len(records) for records in per_rank] == [steps, steps]
        assert [step for _, step, _ in per_rank[0]] == [step for _, step, _ in per_rank[1]]
        assert Counter(i for records in per_rank for _, _, ids in records for i in ids) == Counter(train)
        assert per_rank[1][-1][2] == []
        validated = [[ids for e, ids in r["val"] if e == epoch] for r in uninterrupted]
        assert len(validated[0]) == len(validated[1]) == math.ceil(len(val) / 8)
        assert Counter(i for ranks in validated for ids in ranks for i in ids) == Counter(val)
    first, second = ([i for _, _, ids in trained(uninterrupted[0]["train"], e) for i in ids] for e in range(2))
    assert first != second  # reshuffled


@pytest.mark.slow
@pytest.mark.parametrize("stop_at", [8, 6], ids=["mid-epoch-1", "end-of-epoch-0"])
def test_ddp_resume_continues_exactly_where_the_checkpoint_stopped(uninterrupted, tmp_path, stop_at):
    """Stopped after ``stop_at`` steps (6 per epoch) and resumed: the two runs train exactly the batches, in the
    order, of the uninterrupted run -- the union is every document once per epoch, nothing repeated."""
    first = run_ddp(tmp_path, "first", max_steps=stop_at, checkpoint_at=stop_at, num_workers=2)
    checkpoint = tmp_path / "first" / "mid.ckpt"
    loader_state = torch.load(checkpoint, weights_only=False)["loops"]["fit_loop"]["state_dict"]["combined_loader"]
    assert loader_state[0]["documents"] == min((stop_at % 6 or 6) * 8, 41)
    second = run_ddp(tmp_path, "second", max_epochs=2, ckpt_path=str(checkpoint), num_workers=2)
    for rank in range(2):
        assert len(first[rank]["train"]) == stop_at
        assert first[rank]["train"] + second[rank]["train"] == uninterrupted[rank]["train"]


# --- a paper's batch over all devices --------------------------------------------------------------------------


def test_global_batch_size_divides_over_devices_and_accumulation_or_is_refused():
    datamodule = ListDataModule(global_batch_size=12)
    assert datamodule.batch_size == 12  # no trainer: one process takes the whole batch
    datamodule.trainer = types.SimpleNamespace(world_size=2, accumulate_grad_batches=3)
    assert datamodule.batch_size == 2
    datamodule.trainer = types.SimpleNamespace(world_size=5, accumulate_grad_batches=1)
    with pytest.raises(ConfigError, match=r"global_batch_size 12 does not divide over 5 device\(s\) x 1"):
        datamodule.batch_size
    with pytest.raises(ConfigError, match="batch_size .* and global_batch_size .* are both set: keep one"):
        ListDataModule(batch_size=4, global_batch_size=8)
    assert ListDataModule().batch_size == 16


@pytest.mark.slow
def test_a_global_batch_gives_two_processes_the_negatives_of_one(tmp_path):
    """The paper's batch of 8 on 2 CPU processes (4 documents each, gathered) scores every anchor against as many
    in-batch negatives as one process holding the 8: the step's documents are the same number."""
    one = run_ddp(tmp_path, "one", devices=1, global_batch_size=8, max_steps=3)
    two = run_ddp(tmp_path, "two", devices=2, global_batch_size=8, max_steps=3)
    assert [len(ids) for _, _, ids, _ in one[0]["train"]] == [8, 8, 8]
    assert [len(ids) for rank in two for _, _, ids, _ in rank["train"]] == [4] * 6
    assert [n for _, _, _, n in one[0]["train"]] == [n for _, _, _, n in two[0]["train"]] == [7.0] * 3


if __name__ == "__main__":
    ddp_fit(json.loads(sys.argv[1]))
