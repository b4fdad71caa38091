"""DistributedBatchSampler and ResumableLoader: exact-once coverage over simulated ranks and real dataloader
workers, equal batch counts, per-epoch shuffling, mid-epoch resume, and the Lightning hooks that reach them."""

from __future__ import annotations

import math
from collections import Counter

import pytest
import torch
from lightning.fabric.utilities.data import _set_sampler_epoch
from lightning.fabric.utilities.types import _Stateful
from torch.utils.data import Dataset, get_worker_info

from lit_docemb.data.core import sampling
from lit_docemb.data.core.sampling import DistributedBatchSampler, ResumableLoader


class IdDataset(Dataset):
    """Item i is (id, worker that read it): shows which process did the reading."""

    def __init__(self, n: int) -> None:
        self.ids = [f"doc{i}" for i in range(n)]

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, i: int) -> tuple[str, int]:
        info = get_worker_info()
        return self.ids[i], -1 if info is None else info.id


def identity(items):
    return items


def rank_loaders(n: int, batch_size: int, world: int, num_workers: int = 0, **kwargs) -> list[ResumableLoader]:
    dataset = IdDataset(n)
    return [ResumableLoader(dataset, DistributedBatchSampler(n, batch_size, rank=r, world_size=world, **kwargs),
                            collate_fn=identity, num_workers=num_workers) for r in range(world)]


def ids_of(batches) -> list[list[str]]:
    return [[doc_id for doc_id, _ in batch] for batch in batches]


def sampler_batches(n, batch_size, world, epoch=0, **kwargs) -> list[list[list[int]]]:
    per_rank = []
    for r in range(world):
        sampler = DistributedBatchSampler(n, batch_size, rank=r, world_size=world, **kwargs)
        sampler.set_epoch(epoch)
        per_rank.append(list(sampler))
    return per_rank


@pytest.mark.parametrize("n", [0, 1, 3, 7, 8, 17, 40, 101])
@pytest.mark.parametrize("batch_size,world", [(1, 1), (4, 1), (1, 2), (4, 2), (3, 3), (5, 4)])
def test_every_index_once_and_equal_batch_counts(n, batch_size, world):
    per_rank = sampler_batches(n, batch_size, world, epoch=3)
    expected_batches = math.ceil(n / (world * batch_size))
    assert [len(batches) for batches in per_rank] == [expected_batches] * world
    assert all(len(DistributedBatchSampler(n, batch_size, rank=r, world_size=world)) == expected_batches
               for r in range(world))
    seen = Counter(i for batches in per_rank for batch in batches for i in batch)
    assert seen == Counter(range(n))
    for step in zip(*per_rank):  # one global step: B per rank, or as even as possible in the last one
        sizes = [len(batch) for batch in step]
        assert max(sizes) <= batch_size and max(sizes) - min(sizes) <= 1
        assert sizes == sorted(sizes, reverse=True)
    for step in list(zip(*per_rank))[:-1]:
        assert [len(batch) for batch in step] == [batch_size] * world


@pytest.mark.parametrize("n,batch_size,world", [(17, 4, 2), (16, 4, 2), (5, 4, 2), (40, 3, 3)])
def test_drop_last_keeps_only_full_global_steps(n, batch_size, world):
    per_rank = sampler_batches(n, batch_size, world, drop_last=True)
    full_steps = n // (world * batch_size)
    assert [len(batches) for batches in per_rank] == [full_steps] * world
    assert all(len(batch) == batch_size for batches in per_rank for batch in batches)
    seen = [i for batches in per_rank for batch in batches for i in batch]
    assert len(seen) == len(set(seen)) == full_steps * world * batch_size
    order = DistributedBatchSampler(n, batch_size, drop_last=True).order(0)
    assert set(seen) == set(order[: len(seen)].tolist())  # the dropped documents are the tail of the order


@pytest.mark.parametrize("n,batch_size", [(17, 2), (8, 4), (3, 4), (30, 3)])
def test_two_ranks_two_workers_see_every_document_once(n, batch_size):
    loaders = rank_loaders(n, batch_size, world=2, num_workers=2)
    per_rank = [list(loader) for loader in loaders]
    assert [len(batches) for batches in per_rank] == [math.ceil(n / (2 * batch_size))] * 2 == list(map(len, loaders))
    ids = Counter(doc_id for batches in ids_of(per_rank[0]) + ids_of(per_rank[1]) for doc_id in batches)
    assert ids == Counter(f"doc{i}" for i in range(n))
    workers = {worker for batches in per_rank for batch in batches for _, worker in batch}
    assert workers <= {0, 1}  # read in the workers, not in the main process (-1)
    if len(per_rank[0]) > 1:
        assert workers == {0, 1}  # batches go to the workers in turn


def test_epochs_reshuffle_and_seed_and_epoch_fix_the_order():
    def epoch_order(epoch, seed=0):
        return [i for batches in sampler_batches(50, 4, 2, epoch=epoch, seed=seed) for b in batches for i in b]

    assert epoch_order(0) == epoch_order(0)
    assert epoch_order(1) == epoch_order(1)
    assert len({tuple(epoch_order(e)) for e in range(5)}) == 5
    assert epoch_order(0, seed=1) != epoch_order(0) and epoch_order(1, seed=0) != epoch_order(0, seed=1)
    unshuffled = sampler_batches(10, 2, 2, epoch=4, shuffle=False)
    assert unshuffled == [[[0, 1], [4, 5], [8]], [[2, 3], [6, 7], [9]]]


def test_loader_reshuffles_on_set_epoch_and_repeats_without():
    loader = rank_loaders(20, 3, world=1)[0]
    first, again = ids_of(loader), ids_of(loader)
    loader.sampler.set_epoch(1)
    assert again == first and ids_of(loader) != first


def test_rank_and_world_size_are_read_when_iterating(monkeypatch):
    sampler = DistributedBatchSampler(10, 2)  # built "before the process group exists"
    assert len(sampler) == 5
    monkeypatch.setattr(sampling.distributed, "world_size", lambda: 2)
    monkeypatch.setattr(sampling.distributed, "rank", lambda: 1)
    assert len(sampler) == 3
    assert [len(b) for b in sampler] == [2, 2, 1]
    assert list(sampler) == sampler_batches(10, 2, 2)[1]


@pytest.mark.parametrize("num_workers", [0, 2])
@pytest.mark.parametrize("n,batch_size,consumed", [(37, 3, 1), (37, 3, 4), (37, 3, 7), (10, 4, 2), (9, 4, 0)])
def test_resume_yields_exactly_the_remaining_batches(n, batch_size, consumed, num_workers):
    world, epoch = 2, 2
    full = []
    for loader in rank_loaders(n, batch_size, world, num_workers=num_workers):
        loader.sampler.set_epoch(epoch)
        full.append(ids_of(loader))
    states = []
    for loader in rank_loaders(n, batch_size, world, num_workers=num_workers):
        loader.sampler.set_epoch(epoch)
        iterator = iter(loader)
        for _ in range(consumed):
            next(iterator)  # workers have prefetched further by now
        states.append(loader.state_dict())
        del iterator
    assert states[0] == states[1]  # every rank is at the same place: rank 0's checkpoint serves all
    assert states[0]["epoch"] == epoch and states[0]["documents"] == min(consumed * world * batch_size, n)
    for rank, loader in enumerate(rank_loaders(n, batch_size, world, num_workers=num_workers)):
        loader.load_state_dict(states[0])
        loader.sampler.set_epoch(epoch)  # as Lightning does after loading: must not rewind
        assert ids_of(loader) == full[rank][consumed:]
        assert len(loader) == len(full[rank])  # a whole epoch, as Lightning expects
        loader.sampler.set_epoch(epoch + 1)
        assert len(ids_of(loader)) == len(full[rank])  # the next epoch is whole again


def test_state_after_a_whole_epoch_and_at_a_new_epoch():
    loader = rank_loaders(10, 2, world=2)[0]
    assert loader.state_dict()["documents"] == 0
    list(loader)
    assert loader.state_dict() == {"epoch": 0, "documents": 10, "num_documents": 10, "seed": 0,
                                        "documents_per_step": 4}
    loader.sampler.set_epoch(1)
    assert (loader.state_dict()["epoch"], loader.state_dict()["documents"]) == (1, 0)
    restored = rank_loaders(10, 2, world=2)[0]
    restored.load_state_dict({"epoch": 0, "documents": 10, "num_documents": 10, "seed": 0, "documents_per_step": 4})
    restored.sampler.set_epoch(0)
    assert list(restored) == []  # epoch 0 is over
    restored.sampler.set_epoch(1)
    assert len(list(restored)) == 3


def test_resume_on_another_number_of_devices_still_covers_the_epoch_once():
    n, batch_size, consumed = 41, 3, 2
    trained = []
    for loader in rank_loaders(n, batch_size, world=2):
        iterator = iter(loader)
        trained += [doc_id for _ in range(consumed) for doc_id, _ in next(iterator)]
    state = rank_loaders(n, batch_size, world=2)[0].state_dict() | {"documents": consumed * 2 * batch_size}
    for loader in rank_loaders(n, batch_size, world=3):
        loader.load_state_dict(state)
        trained += [doc_id for batch in ids_of(loader) for doc_id in batch]
    assert Counter(trained) == Counter(f"doc{i}" for i in range(n))


def test_resume_keeps_the_checkpoints_seed_and_rejects_another_corpus():
    source = rank_loaders(30, 2, world=1, seed=7)[0]
    iterator = iter(source)
    first = next(iterator)
    state = source.state_dict()
    rest = list(iterator)
    restored = rank_loaders(30, 2, world=1, seed=0)[0]
    restored.load_state_dict(state)
    assert list(restored) == rest and first not in rest
    with pytest.raises(ValueError, match="over 30 documents, this one has 31"):
        rank_loaders(31, 2, world=1)[0].load_state_dict(state)


def test_lightning_reaches_set_epoch_and_state():
    loader = rank_loaders(10, 2, world=1)[0]
    assert isinstance(loader, _Stateful)  # the fit loop saves and restores its state_dict
    _set_sampler_epoch(loader, 5)  # what FitLoop.on_advance_start calls
    assert loader.sampler.epoch == 5
    loader.worker_init_fn = identity  # seed_everything(workers=True) sets it; the DataLoader must get it
    assert loader.loader.worker_init_fn is identity


def test_empty_batches_reach_the_collator():
    seen = []
    loader = ResumableLoader(IdDataset(5), DistributedBatchSampler(5, 2, shuffle=False, rank=1, world_size=2),
                             collate_fn=lambda items: seen.append(len(items)) or items)
    assert list(loader) == [[("doc2", -1), ("doc3", -1)], []]  # the last global step holds 1 document for 2 ranks
    assert seen == [2, 0]


def test_order_is_a_torch_permutation_of_all_documents():
    order = DistributedBatchSampler(1000, 8).order(0)
    assert torch.equal(order.sort().values, torch.arange(1000)) and not torch.equal(order, torch.arange(1000))
