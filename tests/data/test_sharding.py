"""Sharding over real corpus fixtures: 2 ranks x 2 dataloader workers through each DataModule's own training
loader see every document of the corpus exactly once per epoch, in as many batches on each rank.

The corpora are files in their published layouts written here (invented sentences): the OpenWebText release
(xz tar archives, streamed into the Arrow document cache), a local Hugging Face parquet copy of it (rows read
on access), and lit_docemb JSONL (an in-memory list). The ranks are simulated in one process by fixing the rank
and world size the batch sampler reads (it runs in the main process); the workers are real processes.
"""

from __future__ import annotations

import json
import lzma
from collections import Counter

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from corpus_files import tar_bytes, write_release
from torch.utils.data import get_worker_info

from lit_docemb import distributed
from lit_docemb.data.corpora.jsonl import JSONLDataModule
from lit_docemb.data.corpora.openwebtext import OpenWebTextDataModule
from lit_docemb.data.corpora.openwebtext_formats import iter_openwebtext
from lit_docemb.data.core.reading import ReadContext

N_PAGES = 37


def page(index: int) -> str:
    return f"Page {index} describes a lantern of {index % 5 + 2} colours.\n\nIt was found behind shelf {index}."


def openwebtext_release(tmp_path):
    """The release layout with two more subset archives of invented pages (41 non-empty documents)."""
    folder = tmp_path / "openwebtext"
    write_release(folder)
    for subset, indices in (("3", range(0, 20)), ("4", range(20, N_PAGES))):
        members = {f"{i:07d}-{i:04x}.txt": page(i).encode() for i in indices}
        (folder / f"urlsf_subset00-{subset}_data.xz").write_bytes(lzma.compress(tar_bytes(members)))
    ids = [d.id for d in iter_openwebtext(str(folder), context=ReadContext())]
    assert len(ids) == N_PAGES + 4
    return OpenWebTextDataModule(source=str(folder), cache_dir=str(tmp_path / "cache")), ids


def openwebtext_parquet(tmp_path):
    pq.write_table(pa.table({"text": [page(i) for i in range(N_PAGES)]}), tmp_path / "owt.parquet")
    module = OpenWebTextDataModule(source=str(tmp_path / "owt.parquet"), cache_dir=str(tmp_path / "cache"))
    return module, [f"owt:{i}" for i in range(N_PAGES)]


def jsonl(tmp_path):
    path = tmp_path / "docs.jsonl"
    path.write_text("".join(json.dumps({"id": f"d{i}", "text": page(i)}) + "\n" for i in range(N_PAGES)))
    return JSONLDataModule(paths=[str(path)]), [f"d{i}" for i in range(N_PAGES)]


def ids_and_worker(documents) -> tuple[list[str], int]:
    """Collator run in a worker: the batch's ids and which worker built it."""
    return [d.id for d in documents], get_worker_info().id


@pytest.mark.parametrize("corpus", [openwebtext_release, openwebtext_parquet, jsonl])
def test_two_ranks_two_workers_see_the_corpus_once_per_epoch(tmp_path, monkeypatch, corpus):
    datamodule, corpus_ids = corpus(tmp_path)
    datamodule.batch_size, datamodule.num_workers, datamodule.val_fraction = 3, 2, 0.0
    datamodule.collate_fn = ids_and_worker
    datamodule.setup("fit")
    monkeypatch.setattr(distributed, "world_size", lambda: 2)
    orders = []
    for epoch in range(2):
        per_rank = []
        for rank in range(2):
            monkeypatch.setattr(distributed, "rank", lambda rank=rank: rank)
            loader = datamodule.train_dataloader()
            loader.sampler.set_epoch(epoch)
            per_rank.append(list(loader))
            assert len(per_rank[rank]) == len(loader) == -(-len(corpus_ids) // 6)
        seen = [doc_id for batches in per_rank for ids, _ in batches for doc_id in ids]
        assert Counter(seen) == Counter(corpus_ids)  # every document once: no repeat, no loss
        assert {worker for batches in per_rank for _, worker in batches} == {0, 1}
        orders.append(seen)
    assert orders[0] != orders[1]  # reshuffled every epoch
