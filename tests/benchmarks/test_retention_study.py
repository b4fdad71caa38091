"""benchmarks/retention_study.py: the run length it gives a fit, and the steps it records."""

import lightning as L
import pytest
import torch
from benchmark_scripts import benchmark_module


@pytest.fixture(scope="module")
def study():
    with benchmark_module("retention_study") as module:
        yield module


class _Regression(L.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.layer = torch.nn.Linear(2, 1)

    def training_step(self, batch, batch_index):
        return self.layer(batch).pow(2).mean()

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.01)


def steps_trained(trainer_config: dict, batches_per_epoch: int) -> int:
    """The optimizer steps a Lightning fit makes under the study's ``max_epochs``/``max_steps``."""
    trainer = L.Trainer(max_epochs=trainer_config["max_epochs"], max_steps=trainer_config["max_steps"],
                        accelerator="cpu", logger=False, enable_checkpointing=False, enable_progress_bar=False,
                        enable_model_summary=False)
    trainer.fit(_Regression(), torch.utils.data.DataLoader(torch.randn(batches_per_epoch, 2), batch_size=1))
    return trainer.global_step


def test_quickstart_length_needs_two_epochs(study):
    """36 steps of the quickstart's 18-step epochs: one epoch (the 10-step study's limit) stops at 18."""
    one_epoch = study.method_config("DocSplit", max_steps=36, learning_rate=2e-5)["trainer"]
    two_epochs = study.method_config("DocSplit", max_steps=36, learning_rate=2e-5, max_epochs=2)["trainer"]
    assert (one_epoch["max_epochs"], two_epochs["max_epochs"], two_epochs["max_steps"]) == (1, 2, 36)
    assert steps_trained(one_epoch, batches_per_epoch=18) == 18
    assert steps_trained(two_epochs, batches_per_epoch=18) == 36
    assert steps_trained(two_epochs, batches_per_epoch=17) == 34  # a split with fewer training documents


def test_trained_steps_reads_the_checkpoint_last_links_to(study, tmp_path):
    (tmp_path / "epoch=1-step=36.ckpt").write_bytes(b"")
    (tmp_path / "last.ckpt").symlink_to("epoch=1-step=36.ckpt")
    (tmp_path / "plain").mkdir()
    (tmp_path / "plain" / "last.ckpt").write_bytes(b"")
    assert study.trained_steps(tmp_path / "last.ckpt") == 36
    assert study.trained_steps(tmp_path / "plain" / "last.ckpt") is None
