"""One buffer per batch across the dataloader-worker boundary, and one copy per batch to the device.

A worker hands each tensor storage of a batch to the training process through a shared-memory file of its own
and a file-descriptor exchange: a Graph-RoBERTa batch of 16 documents is about 39 tensors, and receiving them
cost the training process about 6 ms per batch. :class:`BufferedCollate` wraps a collator so that the worker
copies every tensor of the batch into one contiguous byte buffer and sends that buffer with a small layout (the
batch with each tensor replaced by its place in the buffer); :meth:`BufferedBatch.unpack` rebuilds the typed
batch in the training process, every tensor a view into the buffer. The same walk of a batch serves
:func:`to_device_in_one_copy`: a batch whose tensors all view one storage reaches the device in one copy of
that storage, then is rebuilt as views into the device's copy.

The walk enters dataclass instances, lists, tuples and dicts (of exactly those types, or a named tuple); any
other object (a :class:`~lit_docemb.data.core.document.Document`, a string, ``None``) travels as it is, pickled with
the layout. Tensors come back with their dtype, shape and values, contiguous.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor
from torch.utils.data import get_worker_info

#: Byte alignment of every tensor in the buffer: a multiple of every dtype's size, so each slice can be viewed
#: as its dtype (and of a cache line).
ALIGNMENT_BYTES = 64


@dataclasses.dataclass(frozen=True)
class TensorSlot:
    """Where one tensor of a batch lies in its buffer.

    Attributes:
        offset_bytes: Start of the tensor in the buffer, a multiple of :data:`ALIGNMENT_BYTES`.
        dtype: The tensor's dtype.
        shape: The tensor's shape.
    """

    offset_bytes: int
    dtype: torch.dtype
    shape: tuple[int, ...]

    @property
    def size_bytes(self) -> int:
        return _numel(self.shape) * _element_size(self.dtype)

    def view(self, buffer: Tensor) -> Tensor:
        """The tensor as a view into ``buffer`` (a 1-D uint8 tensor)."""
        return buffer[self.offset_bytes:self.offset_bytes + self.size_bytes].view(self.dtype).view(self.shape)


def _numel(shape: tuple[int, ...]) -> int:
    count = 1
    for size in shape:
        count *= size
    return count


def _element_size(dtype: torch.dtype) -> int:
    return torch.empty(0, dtype=dtype).element_size()


def _is_named_tuple(value: Any) -> bool:
    return isinstance(value, tuple) and hasattr(value, "_fields")


def map_leaves(value: Any, leaf: type, function: Callable[[Any], Any]) -> Any:
    """``value`` with every instance of ``leaf`` it holds (in dataclass fields, lists, tuples, dict values) replaced
    by ``function(instance)``, in a fixed order (fields, items and values in order); anything else kept as it is.
    Containers are copied, never changed in place; a dataclass is copied with :func:`copy.copy` and its fields
    set (frozen ones included), so its own attributes outside the fields are kept."""
    if isinstance(value, leaf):
        return function(value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        out = copy.copy(value)
        for field in dataclasses.fields(value):
            object.__setattr__(out, field.name, map_leaves(getattr(value, field.name), leaf, function))
        return out
    if type(value) is list:
        return [map_leaves(item, leaf, function) for item in value]
    if type(value) is tuple:
        return tuple(map_leaves(item, leaf, function) for item in value)
    if _is_named_tuple(value):
        return type(value)(*(map_leaves(item, leaf, function) for item in value))
    if type(value) is dict:
        return {key: map_leaves(item, leaf, function) for key, item in value.items()}
    return value


def map_tensors(value: Any, function: Callable[[Tensor], Any]) -> Any:
    """``value`` with every tensor replaced by ``function(tensor)`` (see :func:`map_leaves`)."""
    return map_leaves(value, Tensor, function)


def tensors_of(value: Any) -> list[Tensor]:
    """The tensors a batch holds, in :func:`map_tensors`'s order."""
    found: list[Tensor] = []
    map_tensors(value, found.append)
    return found


class BufferedBatch:
    """A batch as one contiguous uint8 buffer and a layout: what a dataloader worker sends.

    The DataLoader's pin-memory thread calls :meth:`pin_memory` (one pinned copy of the buffer); a
    :class:`~lit_docemb.data.core.sampling.ResumableLoader` calls :meth:`unpack` as it returns the batch; Lightning's
    batch transfer calls :meth:`to` on one it receives as it is (a plain ``DataLoader``), which copies the buffer to
    the device once and rebuilds the batch there.

    Args:
        buffer: (N,) uint8 bytes of every tensor of the batch.
        layout: The batch with each tensor replaced by its :class:`TensorSlot`.
        length: ``len()`` of the batch (documents), ``None`` when it has none.
    """

    def __init__(self, buffer: Tensor, layout: Any, length: int | None) -> None:
        self.buffer = buffer
        self.layout = layout
        self.length = length

    @classmethod
    def pack(cls, batch: Any) -> BufferedBatch:
        """Copies every tensor of ``batch`` (CPU tensors) into one new buffer (in a dataloader worker, in shared
        memory)."""
        slots: list[tuple[TensorSlot, Tensor]] = []
        end = 0

        def place(tensor: Tensor) -> TensorSlot:
            nonlocal end
            start = -(-end // ALIGNMENT_BYTES) * ALIGNMENT_BYTES
            slot = TensorSlot(start, tensor.dtype, tuple(tensor.shape))
            slots.append((slot, tensor))
            end = start + slot.size_bytes
            return slot

        layout = map_tensors(batch, place)
        buffer = torch.empty(0, dtype=torch.uint8)
        if get_worker_info() is not None:  # in a worker: allocated in shared memory, so sending it copies nothing
            buffer.set_(torch.UntypedStorage._new_shared(end))
        else:
            buffer.resize_(end)
        for slot, tensor in slots:
            slot.view(buffer).copy_(tensor.detach())
        try:
            length = len(batch)
        except TypeError:
            length = None
        return cls(buffer, layout, length)

    def unpack(self) -> Any:
        """The batch, its tensors views into this buffer (on the buffer's device)."""
        return _rebuild(self.layout, self.buffer)

    def pin_memory(self) -> BufferedBatch:
        return BufferedBatch(self.buffer.pin_memory(), self.layout, self.length)

    def to(self, device: torch.device | str, non_blocking: bool = False) -> Any:
        """The batch on ``device``: the buffer copied there once, every tensor a view into that copy."""
        return _rebuild(self.layout, self.buffer.to(device, non_blocking=non_blocking))

    def __len__(self) -> int:
        if self.length is None:
            raise TypeError(f"the buffered batch has no len(): its {type(self.layout).__name__} has none")
        return self.length


def _rebuild(layout: Any, buffer: Tensor) -> Any:
    """``layout`` with every :class:`TensorSlot` replaced by its view into ``buffer``."""
    return map_leaves(layout, TensorSlot, lambda slot: slot.view(buffer))


class BufferedCollate:
    """A collator whose batches leave the worker as one :class:`BufferedBatch` (picklable when ``collate`` is).

    Args:
        collate: The method's collator: dataset items → batch.
    """

    def __init__(self, collate: Callable[[list], Any]) -> None:
        self.collate = collate

    def __call__(self, items: list) -> BufferedBatch:
        return BufferedBatch.pack(self.collate(items))


def unpack(batch: Any) -> Any:
    """The typed batch of a :class:`BufferedBatch`; any other batch as it is."""
    return batch.unpack() if isinstance(batch, BufferedBatch) else batch


def to_device_in_one_copy(batch: Any, device: torch.device, non_blocking: bool = False) -> Any | None:
    """``batch`` on ``device`` with one copy, when every tensor it holds is a view of one CPU storage (a batch
    rebuilt by :meth:`BufferedBatch.unpack`): the storage is copied once and each tensor rebuilt on the copy with
    its offset, shape and strides. ``None`` when that does not apply (tensors in several storages or already off
    the CPU, a storage larger than the batch's tensors, no tensor, or ``device`` the CPU), for the caller's usual
    transfer."""
    if isinstance(batch, BufferedBatch):
        return batch.to(device, non_blocking=non_blocking)
    device = torch.device(device)
    tensors = tensors_of(batch)
    if device.type == "cpu" or not tensors or any(t.device.type != "cpu" for t in tensors):
        return None
    storage = tensors[0].untyped_storage()
    if any(t.untyped_storage().data_ptr() != storage.data_ptr() for t in tensors[1:]):
        return None
    if storage.nbytes() > sum(t.numel() * t.element_size() + ALIGNMENT_BYTES for t in tensors):
        return None  # views of a larger storage: copying it whole would move more than the batch
    whole = torch.empty(0, dtype=torch.uint8).set_(storage)  # (bytes,) the storage as one tensor
    copied = whole.to(device, non_blocking=non_blocking).untyped_storage()

    def rebuild(tensor: Tensor) -> Tensor:
        return torch.empty(0, dtype=tensor.dtype, device=device).set_(
            copied, tensor.storage_offset(), tensor.shape, tensor.stride())

    return map_tensors(batch, rebuild)
