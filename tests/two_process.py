"""Running a test body on 2 CPU processes (gloo), results handed back to the main pytest process."""

from __future__ import annotations

import socket
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

WORLD = 2


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def init_gloo(rank: int, port: int, world: int = WORLD) -> None:
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world,
                            timeout=timedelta(seconds=60))


def save_result(result: dict, out_dir: str, rank: int) -> None:
    torch.save(result, Path(out_dir) / f"rank{rank}.pt")


def spawn(worker: Callable[[int, int, str], None], out_dir: Path, world: int = WORLD) -> list[dict]:
    """Runs ``worker(rank, port, out_dir)`` on ``world`` processes; each saves its result with
    :func:`save_result`; returns them in rank order (assert on them in the main process, so tests can fail)."""
    mp.spawn(worker, args=(free_port(), str(out_dir)), nprocs=world, join=True)
    return [torch.load(Path(out_dir) / f"rank{r}.pt", weights_only=False) for r in range(world)]
