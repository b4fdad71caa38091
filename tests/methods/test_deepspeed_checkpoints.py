"""DeepSpeed checkpoint folders (``x.ckpt/latest`` + ``x.ckpt/<tag>/*_states.pt``) are read weights-only: a planted
optimizer-states file that would run code on unpickling is refused in one line, and its code never runs. Folders
that real ZeRO-2/3 runs write are read in tests/system/test_deepspeed_cpu.py against Lightning's converter."""

from __future__ import annotations

import os

import pytest
import torch

from lit_docemb.errors import ConfigError
from lit_docemb.methods.checkpoints import read_checkpoint


class RunsCode:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return os.system, (f"touch {self.marker}",)


def deepspeed_folder(root, optimizer_state) -> str:
    folder = root / "last.ckpt"
    (folder / "checkpoint").mkdir(parents=True)
    (folder / "latest").write_text("checkpoint")
    torch.save({"module": {"model.weight": torch.ones(2)}, "buffer_names": [], "param_shapes": [
        {"model.weight": torch.Size([2])}], "frozen_param_shapes": None, "shared_params": {},
        "frozen_param_fragments": None, "ds_version": "0.19.8", "global_step": 4, "epoch": 0},
               folder / "checkpoint" / "mp_rank_00_model_states.pt")
    torch.save(optimizer_state, folder / "checkpoint" / "zero_pp_rank_0_mp_rank_00_optim_states.pt")
    return str(folder)


def test_a_planted_optimizer_file_is_refused_without_running_it(tmp_path):
    marker = tmp_path / "ran"
    folder = deepspeed_folder(tmp_path, {"optimizer_state_dict": {"zero_stage": RunsCode(marker)}})
    assert read_checkpoint(folder, mmap=True)["global_step"] == 4  # the cheap check reads the model states only
    with pytest.raises(ConfigError) as refused:
        read_checkpoint(folder)
    message = str(refused.value)
    assert "posix.system" in message or "os.system" in message
    assert "--ckpt_path" in message and "\n" not in message and not marker.exists()


def test_a_latest_file_naming_a_folder_outside_the_checkpoint_is_refused(tmp_path):
    folder = deepspeed_folder(tmp_path, {})
    (tmp_path / "last.ckpt" / "latest").write_text("../../elsewhere")
    with pytest.raises(ConfigError, match="not a folder of the checkpoint"):
        read_checkpoint(folder)


def test_a_folder_without_its_states_files_is_an_unfinished_save(tmp_path):
    folder = deepspeed_folder(tmp_path, {})
    os.remove(os.path.join(folder, "checkpoint", "zero_pp_rank_0_mp_rank_00_optim_states.pt"))
    with pytest.raises(ConfigError, match="never finished"):
        read_checkpoint(folder, mmap=True)
