import pytest
import torch

from lit_docemb.methods import LinearWarmupDecay


def test_linear_warmup_decay_learning_rates():
    optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
    scheduler = LinearWarmupDecay(optimizer, warmup_steps=1, total_steps=5, final_fraction=0.2)
    rates = []
    for _ in range(6):
        rates.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        scheduler.step()
    assert rates == pytest.approx([0.5, 1.0, 0.8, 0.6, 0.4, 0.2])

