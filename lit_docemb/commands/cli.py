"""``python -m lit_docemb fit|validate|test|predict --config <yaml> ...``: LightningCLI in subclass mode.

Every :class:`~lit_docemb.methods.base.EmbeddingMethod` is a ``--model`` and every
:class:`~lit_docemb.data.datamodule.DocumentDataModule` a ``--data``; ``--help`` lists the known ones.
A config that cannot run (:class:`~lit_docemb.errors.ConfigError`: a missing data path, options that do not go
together) ends the command before training with ``error: <message naming the key>`` and status 2, like an
unknown key or a wrong type. A fit without ``--ckpt_path`` refuses a run folder that already holds a run
(:mod:`lit_docemb.commands.run_folder`). A fit keeps one wandb run id per run folder
(:mod:`lit_docemb.commands.loggers`) and writes
checkpoints atomically (:class:`~lit_docemb.methods.callbacks.AtomicCheckpointIO`, unless the config names another
CheckpointIO) and logs documents/s, tokens/s and peak memory
(:class:`~lit_docemb.methods.callbacks.Throughput`, unless the config has one).
``python -m lit_docemb slurm ...`` writes and submits a SLURM job (:mod:`lit_docemb.commands.slurm`); ``embed`` writes a
checkpoint's embeddings of a JSONL/TSV file (:mod:`lit_docemb.commands.embed`), ``export`` saves it in Hugging Face /
sentence-transformers form (:mod:`lit_docemb.commands.export`), ``figures`` draws a run's plots (:mod:`lit_docemb.commands.figures`).
``python -m lit_docemb evaluate --config ... --ckpt_path ...`` evaluates a checkpoint (:mod:`lit_docemb.commands.evaluate`).
"""

from __future__ import annotations

import importlib
import os
import re
import sys

import lightning as L
from lightning.fabric.plugins.environments import ClusterEnvironment, SLURMEnvironment
from lightning.pytorch.cli import LightningArgumentParser, LightningCLI
from lightning.pytorch.plugins.io import CheckpointIO

import lit_docemb.data  # noqa: F401  (registers the DataModules as known subclasses)
import lit_docemb.methods  # noqa: F401  (registers the methods)
from lit_docemb.commands.loggers import configure_wandb_loggers
from lit_docemb.commands.run_folder import check_fresh_fit
from lit_docemb.data.datamodule import DocumentDataModule
from lit_docemb.errors import ConfigError
from lit_docemb.methods.base import EmbeddingMethod
from lit_docemb.methods.callbacks import (
    AtomicCheckpointIO,
    SaveRunConfig,
    SlurmRequeue,
    Throughput,
)


def one_line_parse_error(message: str) -> str:
    """jsonargparse's report of a bad config (an unknown key, a wrong type), often a dozen lines about union
    subtypes, as one line that names the full key (``model.init_args.temprature``) and what is wrong with it."""
    lines = [line.strip() for line in message.splitlines() if line.strip()]
    keys = re.findall(r'Parser key "([^"]+)"', message)
    class_paths = re.findall(r"given class_path '([^']+)'", message)
    unknown = re.search(r"(?:Option|Key) '([^']+)' is not (?:accepted|expected)", message)
    if not keys and not unknown:
        return lines[0] if lines else message
    path = keys[:1] + (["init_args"] if class_paths and keys else []) + keys[1:]
    reasons = [line for line in lines if line.startswith(("Expected", "Value", "Invalid", "Import path", "Not a"))
               or "does not" in line or "not a valid" in line.lower()]
    if unknown:
        path.append(unknown.group(1))
        reason = f"unknown option of {class_paths[-1]}" if class_paths else "unknown option"
    else:
        reason = reasons[0] if reasons else lines[-1]
    hint = f" (options: --{keys[0]}.help {class_paths[-1].rsplit('.', 1)[-1]})" if class_paths and keys else ""
    return f"{'.'.join(path)}: {reason}{hint}"


class OneLineErrorParser(LightningArgumentParser):
    """LightningCLI's parser, reporting a bad config in one line naming the key instead of the usage text
    followed by jsonargparse's nested union errors (``--help`` still prints the usage; ``JSONARGPARSE_DEBUG=1``
    gives jsonargparse's full report)."""

    def error(self, message: str, ex: Exception | None = None):
        if not self.exit_on_error or os.environ.get("JSONARGPARSE_DEBUG"):  # raise / jsonargparse's own report
            return super().error(message, ex)
        self._logger.error(message)
        sys.stderr.write(f"error: {one_line_parse_error(message)}\n")
        self.exit(2)


class DocEmbCLI(LightningCLI):
    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("parser_class", OneLineErrorParser)
        kwargs.setdefault("save_config_callback", SaveRunConfig)
        kwargs.setdefault("save_config_kwargs", {"save_to_log_dir": False})
        super().__init__(EmbeddingMethod, DocumentDataModule, *args, subclass_mode_model=True,
                         subclass_mode_data=True, auto_configure_optimizers=False, **kwargs)

    def before_instantiate_classes(self) -> None:
        if self.subcommand == "fit":  # one run per folder, checked before anything is written
            check_fresh_fit(self.config.fit.trainer.default_root_dir, self.config.fit.ckpt_path)
            configure_wandb_loggers(self.config.fit.trainer)

    def instantiate_trainer(self, **kwargs) -> L.Trainer:
        plugins = kwargs.pop("plugins", self._get(self.config_init, "trainer", default={}).get("plugins"))
        plugins = [] if plugins is None else list(plugins) if isinstance(plugins, list) else [plugins]
        if not any(isinstance(plugin, CheckpointIO) for plugin in plugins):
            plugins.append(AtomicCheckpointIO())
        requeue = SLURMEnvironment.detect() and not any(isinstance(p, ClusterEnvironment) for p in plugins)
        if requeue:  # preemption handled by SlurmRequeue at a batch end, not inside Lightning's signal handler
            plugins.append(SLURMEnvironment(auto_requeue=False))
        trainer = super().instantiate_trainer(plugins=plugins, **kwargs)
        if requeue:
            trainer.callbacks.append(SlurmRequeue())
        if not any(isinstance(c, Throughput) for c in trainer.callbacks):  # documents/s, tokens/s, peak memory
            trainer.callbacks.append(Throughput())
        return trainer


#: Commands other than LightningCLI's fit/validate/test/predict: name -> module of ``lit_docemb.commands`` whose
#: ``main(argv)`` runs it (imported only when that command runs).
COMMANDS = {"evaluate": "evaluate", "embed": "embed", "export": "export", "figures": "figures", "slurm": "slurm",
            "dense-search": "dense_search", "candidates": "candidates", "matching": "matching"}


def main(args: list[str] | None = None) -> DocEmbCLI | None:
    argv = sys.argv[1:] if args is None else args
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")  # tokenisation runs in dataloader workers
    if argv[:1] and argv[0] in COMMANDS:
        module = importlib.import_module(f"lit_docemb.commands.{COMMANDS[argv[0]]}")
        (module.submit_main if argv[0] == "slurm" else module.main)(argv[1:])
        return None
    try:
        return DocEmbCLI(args=args)
    except ConfigError as err:  # found before training started: one line, as jsonargparse reports a bad key
        print(f"error: {err}", file=sys.stderr)
        raise SystemExit(2) from err
