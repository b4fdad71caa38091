"""The only module of ``lit_docemb`` that imports ``torch.distributed``: collectives and the process group's
key-value store (the fail-fast message board of :class:`~lit_docemb.methods.guards.FailFast`).

Every function is the identity (or the obvious constant) with one process or without an initialised process
group, and reads rank and world size when it runs, never earlier: under LightningCLI the losses are built
before the process group exists, so a value captured in ``__init__`` would silently mean "one process".

Gathers accept a different number of rows per rank (sizes are gathered first and rows padded for the
collective); a different trailing shape raises a ``ValueError`` naming the shapes instead of hanging.
"""

from __future__ import annotations

import warnings

import torch
import torch.distributed as dist
import torch.distributed.nn.functional as dist_fn
from torch import Tensor


def is_distributed() -> bool:
    """Whether a process group is initialised in this process (read now)."""
    return dist.is_available() and dist.is_initialized()


def world_size() -> int:
    """Number of processes in the default group, 1 without an initialised process group."""
    return dist.get_world_size() if is_distributed() else 1


def rank() -> int:
    """Rank of this process in the default group, 0 without an initialised process group."""
    return dist.get_rank() if is_distributed() else 0


def gather_sizes(x: Tensor) -> list[int]:
    """Rows of ``x`` on every rank (one small all_gather). Raises ``ValueError`` naming the shapes when the
    trailing dimensions differ between ranks."""
    shape = torch.tensor(x.shape, dtype=torch.long, device=x.device)  # (ndim,)
    shapes = [torch.empty_like(shape) for _ in range(world_size())]
    dist.all_gather(shapes, shape)
    if any(not torch.equal(s[1:], shape[1:]) for s in shapes):
        raise ValueError(f"gather needs the same trailing shape on every rank, got "
                         f"{[tuple(s.tolist()) for s in shapes]} for ranks 0..{len(shapes) - 1}")
    return [int(s[0]) for s in shapes]


def row_layout(num_rows: int, device: torch.device | None = None) -> tuple[int, int]:
    """(index of this rank's first row, total rows) of a gather where this rank contributes ``num_rows``."""
    if world_size() == 1:
        return 0, num_rows
    sizes = gather_sizes(torch.empty(num_rows, device=device))
    return sum(sizes[: rank()]), sum(sizes)


def _pad_rows(x: Tensor, rows: int) -> Tensor:
    return torch.cat([x, x.new_zeros(rows - x.shape[0], *x.shape[1:])]) if rows > x.shape[0] else x


def gather_with_grad(x: Tensor) -> Tensor:
    """Concatenates ``x`` of all ranks along dim 0, gradient flowing back to every rank's ``x``.

    The backward of the gather sums, over ranks, the gradient each rank computed for a slice and hands it
    to the rank that owns the slice. Ranks may hold different numbers of rows (a batch that lost documents
    it could not use, a last partial batch): rows are padded to the largest count for the collective and
    the padding is cut off again, so it never reaches a loss. Identity with one process.

    Args:
        x: (N_r, ...) local tensor; N_r may differ between ranks, the trailing shape may not.

    Returns:
        (sum_r N_r, ...) rank 0's rows first, then rank 1's, ...
    """
    if world_size() == 1:
        return x
    sizes = gather_sizes(x)
    with warnings.catch_warnings():
        # torch >= 2.10 marks it deprecated in favour of the private _functional_collectives; it is the
        # public autograd gather whose backward (sum over ranks) we test on gloo.
        warnings.filterwarnings("ignore", message=r".*nn\.functional\.all_gather is deprecated", category=FutureWarning)
        parts = dist_fn.all_gather(_pad_rows(x, max(sizes)))
    return torch.cat([part[:n] for part, n in zip(parts, sizes)], dim=0)  # (sum N_r, ...)


@torch.no_grad()
def gather_no_grad(x: Tensor) -> Tensor:
    """Concatenates ``x`` (ids, labels) of all ranks along dim 0 without autograd; ranks may hold different
    numbers of rows. Identity with one process.

    Args:
        x: (N_r, ...) local tensor.

    Returns:
        (sum_r N_r, ...) rank 0's rows first.
    """
    if world_size() == 1:
        return x
    sizes = gather_sizes(x)
    padded = _pad_rows(x.contiguous(), max(sizes))
    parts = [torch.empty_like(padded) for _ in range(world_size())]
    dist.all_gather(parts, padded)
    return torch.cat([part[:n] for part, n in zip(parts, sizes)], dim=0)  # (sum N_r, ...)


@torch.no_grad()
def gather_objects(obj) -> list:
    """``[obj of rank 0, obj of rank 1, ...]`` for any picklable object (``[obj]`` with one process)."""
    if world_size() == 1:
        return [obj]
    parts = [None] * world_size()
    dist.all_gather_object(parts, obj)
    return parts


def default_store():
    """The default process group's key-value store (rank 0 hosts it), ``None`` with fewer than two processes."""
    if not is_distributed() or world_size() == 1:
        return None
    return dist.distributed_c10d._get_default_store()


def close_process_group(timeout_seconds: float = 120.0) -> None:
    """Ends the default process group in step on every rank (a no-op without one): a barrier, then its
    destruction. A process that exits with its group alive leaves the interpreter's shutdown to tear down the
    backend's threads while a peer may still be talking to them; with gloo that aborted a finished 2-process fit
    now and then ("terminate called without an active exception", status -6). Call it once every rank has
    returned normally: a rank that failed never reaches the barrier (gloo's waits ``timeout_seconds`` for it and
    names it).

    Args:
        timeout_seconds: How long gloo's barrier waits for the other ranks.
    """
    from datetime import timedelta

    if not is_distributed():
        return
    if dist.get_backend() == "gloo":
        dist.monitored_barrier(timeout=timedelta(seconds=timeout_seconds))
    else:
        dist.barrier()
    dist.destroy_process_group()
