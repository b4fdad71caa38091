"""Lightning's DeepSpeed strategy on CPU processes, for tests only.

DeepSpeed itself runs on CPU (its CPU accelerator, gloo); Lightning's strategy refuses any accelerator but CUDA.
This subclass sets up the processes as DDP does and gives each one an indexed CPU device.
"""

from __future__ import annotations

import torch
from lightning.pytorch.strategies import DDPStrategy, DeepSpeedStrategy


class CPUDeepSpeedStrategy(DeepSpeedStrategy):
    """:class:`~lightning.pytorch.strategies.DeepSpeedStrategy` on ``processes`` CPU processes."""

    def __init__(self, stage: int = 2, processes: int = 2) -> None:
        super().__init__(stage=stage, parallel_devices=[torch.device("cpu", i) for i in range(processes)])

    def setup_environment(self) -> None:
        DDPStrategy.setup_environment(self)  # skips DeepSpeedStrategy's CUDA check
