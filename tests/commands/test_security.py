"""Security (issue 11, item 6): no pickled code is executed when checkpoints and caches are loaded, no remote model
code runs, and secrets from the environment never land in a run's files."""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]
SENTINELS = {"WANDB_API_KEY": "wandbsecret" + "7f3a9c" * 5 + "1234", "HF_TOKEN": "hf_secretTOKEN0f9e8d7c6b5a",
             "HUGGING_FACE_HUB_TOKEN": "hf_otherSECRET1a2b3c4d5e"}


def code_only(source: str) -> str:
    """``source`` with its docstrings blanked: they may tell users how to load something, which is not a call."""
    lines = source.splitlines()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            for i in range(node.lineno - 1, node.end_lineno):
                lines[i] = ""
    return "\n".join(lines)


def test_loaders_never_unpickle_code():
    """Every ``torch.load`` of the package passes ``weights_only=True`` (as do Lightning's loads of local
    checkpoints under torch >= 2.6), no cache is a pickle, ``np.load`` never allows pickles and no model is loaded
    with remote code."""
    offenders = []
    for path in sorted((ROOT / "lit_docemb").rglob("*.py")):
        source = code_only(path.read_text())
        for call in re.finditer(r"(torch\.load|load_from_checkpoint)\(([^()]|\([^()]*\))*\)", source):
            if "weights_only=True" not in call.group(0):
                offenders.append(f"{path.name}: {call.group(0)[:80]}")
        for pattern in (r"\bpickle\.loads?\(", r"allow_pickle\s*=\s*True", r"trust_remote_code\s*=\s*True",
                        r"weights_only\s*=\s*False"):
            offenders += [f"{path.name}: {m.group(0)}" for m in re.finditer(pattern, source)]
    assert not offenders, offenders


def test_model_folder_asking_for_remote_code_does_not_run_it(tiny_encoder_dir, tmp_path):
    """A model folder whose config points at its own Python code (``auto_map``) is loaded as the standard
    architecture of its ``model_type``; the folder's code is never imported."""
    from lit_docemb.models import HFEncoder

    folder = tmp_path / "model"
    folder.mkdir()
    for item in Path(tiny_encoder_dir).iterdir():
        (folder / item.name).write_bytes(item.read_bytes())
    marker = tmp_path / "remote_code_ran"
    (folder / "modeling_evil.py").write_text(f"open({str(marker)!r}, 'w').write('ran')\n"
                                             "from transformers import BertModel as EvilModel\n")
    config = json.loads((folder / "config.json").read_text())
    config["auto_map"] = {"AutoModel": "modeling_evil.EvilModel", "AutoModelForMaskedLM": "modeling_evil.EvilModel"}
    (folder / "config.json").write_text(json.dumps(config))
    try:
        encoder = HFEncoder(str(folder), pooling="mean")
    except ValueError as err:  # transformers may refuse instead: also without running the code
        assert "trust_remote_code" in str(err)
    else:
        assert type(encoder.model).__module__.startswith("transformers.")
    assert not marker.exists()


@pytest.mark.slow
def test_secrets_from_the_environment_never_reach_the_run_folder(tiny_encoder_dir, corpus_jsonl, tmp_path):
    """A tiny fit with the CSV and the (offline) wandb loggers, checkpoints and the saved config, run with
    ``WANDB_API_KEY``, ``HF_TOKEN`` and ``HUGGING_FACE_HUB_TOKEN`` set: no file under the run folder, and nothing the
    run prints, holds any of them."""
    run = tmp_path / "run"
    config = tmp_path / "loggers.yaml"
    config.write_text(
        "trainer:\n  logger:\n"
        f"    - class_path: lightning.pytorch.loggers.CSVLogger\n      init_args:\n        save_dir: {run}\n"
        f"    - class_path: lightning.pytorch.loggers.WandbLogger\n      init_args:\n        save_dir: {run}\n"
        "        offline: true\n        project: secrets-test\n")
    cmd = [sys.executable, "-m", "lit_docemb", "fit", "--config", str(config),
           "--model=lit_docemb.methods.DocSplit", f"--model.encoder.name={tiny_encoder_dir}", "--model.encoder.max_length=32",
           "--data=lit_docemb.data.JSONLDataModule", f"--data.paths=[{corpus_jsonl}]", "--data.batch_size=2",
           "--data.num_workers=0", "--data.max_documents=8", "--trainer.accelerator=cpu", "--trainer.devices=1",
           "--trainer.max_steps=2", "--trainer.limit_val_batches=1", "--trainer.enable_progress_bar=false",
           "--trainer.log_every_n_steps=1",
           f"--trainer.default_root_dir={run}", "--trainer.callbacks+=lit_docemb.methods.callbacks.RunCheckpoint"]
    own = {k: v for k, v in os.environ.items() if k != "WANDB_SERVICE"}  # its own wandb service, as a user's fit
    env = {**own, **SENTINELS, "WANDB_MODE": "offline", "WANDB_DIR": str(run)}
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    files = [p for p in run.rglob("*") if p.is_file()]
    names = {p.name for p in files}
    assert {"config.yaml", "last.ckpt", "metrics.csv", "hparams.yaml"} <= names, names
    assert any(p.suffix == ".wandb" for p in files), names  # the offline wandb run was written
    for secret in SENTINELS.values():
        leaked = [str(p.relative_to(run)) for p in files if secret.encode() in p.read_bytes()]
        assert not leaked, leaked
        assert secret not in result.stdout + result.stderr
    checkpoint = torch.load(run / "checkpoints" / "last.ckpt", map_location="cpu", weights_only=True)
    assert checkpoint["global_step"] == 2  # loads without unpickling code
