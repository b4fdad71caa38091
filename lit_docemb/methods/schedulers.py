"""Learning-rate schedules of the methods, named in configs as ``lit_docemb.methods.<Name>``."""

from __future__ import annotations

from torch.optim.lr_scheduler import LambdaLR

from lit_docemb.errors import ConfigError


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
        key = "model.init_args.scheduler.init_args"  # the scheduler is built when training starts, not parsed
        for ok, name, requirement, value in (
                (warmup_fraction is None or 0 <= warmup_fraction < 1, "warmup_fraction", "in [0, 1) or null",
                 warmup_fraction),
                (warmup_steps >= 0, "warmup_steps", ">= 0", warmup_steps),
                (total_steps is None or total_steps >= 1, "total_steps", ">= 1 or null", total_steps),
                (0 <= final_fraction <= 1, "final_fraction", "in [0, 1]", final_fraction)):
            if not ok:
                raise ConfigError(f"{key}.{name}: must be {requirement}, got {value!r}")
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
