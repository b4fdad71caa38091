"""Learning-rate schedules of the methods, named in configs as ``lit_docemb.methods.<Name>``."""

from __future__ import annotations

from torch.optim.lr_scheduler import LambdaLR


class LinearWarmupDecay(LambdaLR):
    """Linear warm-up to the base learning rate, then linear decay to ``final_fraction`` of it.

    Args:
        optimizer: Wrapped optimizer.
        warmup_steps: Optimizer steps of linear warm-up from 0.
        total_steps: Steps of the whole run; ``None`` lets the method fill in
            ``trainer.estimated_stepping_batches`` when training starts (so it follows
            max_epochs/max_steps/accumulation; a resumed run keeps its checkpoint's).
        final_fraction: Learning-rate multiplier reached at ``total_steps``.
        warmup_fraction: Warm-up as a share of ``total_steps`` (the papers' "warm-up rate 0.1"); replaces
            ``warmup_steps`` when set.
    """

    def __init__(self, optimizer, warmup_steps: int = 0, total_steps: int | None = None,
                 final_fraction: float = 0.0, warmup_fraction: float | None = None) -> None:
        if warmup_fraction is not None and not 0 <= warmup_fraction < 1:
            raise ValueError(f"warmup_fraction must be in [0, 1), got {warmup_fraction}")
        self.warmup_steps = warmup_steps
        self.total_steps = total_steps
        self.final_fraction = final_fraction
        self.warmup_fraction = warmup_fraction
        super().__init__(optimizer, self.multiplier)

    def set_total_steps(self, total_steps: int) -> None:
        """Sets the run length once known and re-applies the current step's learning rate."""
        self.total_steps = total_steps
        for group, base in zip(self.optimizer.param_groups, self.base_lrs):
            group["lr"] = base * self.multiplier(self.last_epoch)

    def multiplier(self, step: int) -> float:
        warmup = self.warmup_steps
        if self.warmup_fraction is not None:
            warmup = round(self.warmup_fraction * self.total_steps) if self.total_steps else 0
        if step < warmup:
            return (step + 1) / (warmup + 1)
        if not self.total_steps or self.total_steps <= warmup:
            return 1.0
        progress = min(1.0, (step - warmup) / (self.total_steps - warmup))
        return 1.0 - (1.0 - self.final_fraction) * progress
