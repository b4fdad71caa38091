"""A DocSplit that raises on one rank at one step: the distributed-failure test's fault injection."""

from __future__ import annotations

import time

import torch.distributed as dist

from lit_docemb.methods.docsplit import DocSplit


class FailingDocSplit(DocSplit):
    """Raises ``ValueError`` in ``losses`` on rank ``fail_rank`` at global step ``fail_step``; the other ranks
    are then inside the loss's gather, waiting for it."""

    fail_rank = 1
    fail_step = 2

    def losses(self, batch):
        if self.global_step == self.fail_step and dist.get_rank() == self.fail_rank:
            raise ValueError(f"injected failure on rank {self.fail_rank} at step {self.fail_step}")
        return super().losses(batch)


class HangingPeerDocSplit(FailingDocSplit):
    """Rank 0 blocks for 10 minutes at the failing step instead of entering the gather (as a rank stuck in an
    NCCL collective with a dead peer would): only a fail-fast mechanism can end it sooner."""

    def losses(self, batch):
        if self.global_step == self.fail_step and dist.get_rank() != self.fail_rank:
            time.sleep(600)
        return super().losses(batch)
