"""``python -m lit_docemb fit|validate|test|predict --config <yaml> ...``: LightningCLI in subclass mode.

Every :class:`~lit_docemb.methods.base.EmbeddingMethod` is a ``--model`` and every
:class:`~lit_docemb.data.core.datamodule.DocumentDataModule` a ``--data``; ``--help`` lists the known ones.
A config that cannot run (:class:`~lit_docemb.errors.ConfigError`: a missing data path, options that do not go
together) ends the command before training with ``error: <message naming the key>`` and status 2, like an
unknown key or a wrong type. ``--run_dir runs/x`` names the run folder: checkpoints, ``config.yaml``, the logger's
``save_dir`` and the wandb run's name follow it. A fit without ``--ckpt_path`` refuses a run folder that already holds a
run (:mod:`lit_docemb.commands.run_folder`). A fit keeps one wandb run id per run folder
(:mod:`lit_docemb.commands.loggers`) and writes
checkpoints atomically (:class:`~lit_docemb.methods.callbacks.AtomicCheckpointIO`, unless the config names another
CheckpointIO; a full disk ends the fit in one line naming the checkpoint and the last complete one, status 2) and
logs documents/s, tokens/s and peak memory
(:class:`~lit_docemb.methods.callbacks.Throughput`, unless the config has one).
``python -m lit_docemb slurm ...`` writes and submits a SLURM job (:mod:`lit_docemb.commands.slurm`); ``embed`` writes a
checkpoint's embeddings of a JSONL/TSV file (:mod:`lit_docemb.commands.embed`), ``export`` saves it in Hugging Face /
sentence-transformers form (:mod:`lit_docemb.commands.export`), ``figures`` draws a run's plots (:mod:`lit_docemb.commands.figures`).
``python -m lit_docemb evaluate --run_dir runs/x`` evaluates a run's checkpoint (:mod:`lit_docemb.commands.evaluate`).

Configs are data: a config instantiates only allow-listed classes (:mod:`lit_docemb.commands.trust`), checked
before anything is built. A checkpoint is weights and state: with ``--ckpt_path`` its stored hyper-parameters never
override the config (Lightning would merge them); how they differ is printed, and weights that do not fit the
configured model stop the command with the differing keys.
"""

from __future__ import annotations

import functools
import os
import re
import sys
import warnings
from pathlib import Path

import lightning as L
import yaml
from lightning.fabric.plugins.environments import ClusterEnvironment, SLURMEnvironment
from lightning.pytorch.callbacks import (BasePredictionWriter, DeviceStatsMonitor, LearningRateMonitor, ProgressBar,
                                         RichProgressBar)
from lightning.pytorch.cli import LightningArgumentParser, LightningCLI, _InstantiatorFn
from lightning.pytorch.plugins.io import CheckpointIO
from lightning.pytorch.utilities import rank_zero_info

import lit_docemb.data  # noqa: F401  (registers the DataModules as known subclasses)
import lit_docemb.methods  # noqa: F401  (registers the methods)
from lit_docemb.commands.console import tidy_loggers
from lit_docemb.commands.loggers import configure_wandb_loggers
from lit_docemb.commands.run_folder import apply_run_dir, check_fresh_fit, fill_run_folder, last_checkpoint
from lit_docemb.commands.section_errors import SectionNaming, build_plainly, unwrapped_config_errors
from lit_docemb.commands.trust import load_yaml, parse_yaml, refuse_untrusted
from lit_docemb.config_block import ConfigBlock, block_option
from lit_docemb.data.core.datamodule import DocumentDataModule
from lit_docemb.distributed import close_process_group
from lit_docemb.errors import ConfigError
from lit_docemb.eval.embedding_writers import PredictionWriter
from lit_docemb.methods.base import EmbeddingMethod
from lit_docemb.methods.callbacks import AtomicCheckpointIO, SaveRunConfig, SlurmRequeue, Throughput
from lit_docemb.methods.checkpoints import class_at, read_checkpoint
from lit_docemb.methods.progress import RateProgressBar
from lit_docemb.models.classical import DocumentRepresentation


def one_line_parse_error(message: str) -> str:
    """jsonargparse's report of a bad config (an unknown key, a wrong type), often a dozen lines about union
    subtypes, as one line that names the full key (``model.init_args.temprature``) and what is wrong with it."""
    lines = [line.strip().removeprefix("- ") for line in message.splitlines() if line.strip()]
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
        in_block = block_option(class_at(class_paths[-1]), unknown.group(1)) if class_paths else None
        reason += f"; it is {in_block}" if in_block else ""
    else:
        reason = reasons[0] if reasons else lines[-1]
        expected = [line for line in reasons if line.startswith("Expected") and "NoneType" not in line]
        given = [line.split(":", 1)[1].strip() for line in lines if line.startswith("Given value:")]
        if expected and given and "Got value" not in expected[0]:  # an optional value: the innermost union's report
            reason = f"{expected[0]}. Got value: {given[0]}"
        string = re.search(r"Expected a path but (.+) either not accessible or invalid", message)
        if string and "Expected a dot import path string" in message:  # a string where a class's block goes
            reason = f"got the string {string.group(1)!r} where a block of options is expected"
            if path[-1] == "encoder":  # the old flat key of the methods that take an EncoderSpec
                reason += f" (encoder: {{name: {string.group(1)}, pooling: ...}}: lit_docemb.models.EncoderSpec)"
    hint = f" (options: --{keys[0]}.help {class_paths[0].rsplit('.', 1)[-1]})" if class_paths and keys else ""
    return f"{'.'.join(path)}: {reason}{hint}"


class OneLineErrorParser(LightningArgumentParser):
    """LightningCLI's parser, reporting a bad config in one line naming the key instead of the usage text
    followed by jsonargparse's nested union errors (``--help`` still prints the usage; ``JSONARGPARSE_DEBUG=1``
    gives jsonargparse's full report). Options are never abbreviated: argparse would take ``--trainer.max_step``
    for ``--trainer.max_steps``, while a misspelt model or data option is refused."""

    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

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

    def add_arguments_to_parser(self, parser: LightningArgumentParser) -> None:
        parser.add_argument("--run_dir", type=str | None, default=None,
                            help="Run folder: checkpoints, config.yaml, the logger's save_dir and a wandb run's name "
                                 "(the folder's path below runs/, e.g. x) follow it; it replaces trainer.default_root_dir, "
                                 "trainer.logger.init_args.save_dir and trainer.logger.init_args.name")

    def parse_arguments(self, parser: LightningArgumentParser, args) -> None:
        """Parses as LightningCLI does, between two checks of what the config may instantiate
        (:func:`~lit_docemb.commands.trust.refuse_untrusted`): the config files and ``class_path`` options before
        jsonargparse imports anything they name, and the whole parsed config (shorthands and callables resolved)
        before anything is built."""
        argv = sys.argv[1:] if args is None else args
        refuse_untrusted_arguments(argv)
        with warnings.catch_warnings():  # our commands build their args themselves; Lightning's warning about it
            warnings.filterwarnings("ignore", "LightningCLI's args parameter")  # would print the whole config
            super().parse_arguments(parser, args)
        subcommand = self.config.get("subcommand")
        config = self.config[subcommand] if subcommand else self.config
        refuse_untrusted(config)
        fill_run_folder(config)  # {data.init_args.test_fold}: first, so that the run's name is of the filled folder
        apply_run_dir(config, argv)  # --run_dir: checkpoints, logger folder and run name

    def _add_instantiators(self) -> None:
        """Lightning's instantiators of the model and the DataModule, each naming a bad argument of the class it
        builds under its section (:class:`SectionNaming`)."""
        super()._add_instantiators()
        for key, base in (("model", EmbeddingMethod), ("data", DocumentDataModule)):
            naming = SectionNaming(_InstantiatorFn(cli=self, key=key), key, functools.partial(self.parsed_section, key))
            self.parser.add_instantiator(naming, base, subclasses=True, prepend=True)
        # a config block (encoder, passages) is built before the method: its bad argument is named under its method
        naming = SectionNaming(build_plainly, "model", functools.partial(self.parsed_section, "model"))
        self.parser.add_instantiator(naming, ConfigBlock, subclasses=True, prepend=True)
        # ClassicalBaseline's representation is built before the method: its bad argument is named under its own key
        self.parser.add_instantiator(SectionNaming(build_plainly, "model.init_args.representation"),
                                     DocumentRepresentation, subclasses=True, prepend=True)

    def parsed_section(self, key: str):
        """The parsed section ``key`` (``model``, ``data``) of the running subcommand."""
        return (self.config[self.config.subcommand] if self.config.get("subcommand") else self.config).get(key)

    def _parse_ckpt_path(self) -> None:
        """Lightning merges a checkpoint's stored hyper-parameters over the config here; lit_docemb does not (a
        checkpoint is weights and state, the config decides): :func:`checkpoint_differences` only records how they
        differ, reported once the model is built (:meth:`instantiate_classes`). ``--ckpt_path last`` is resolved
        here, to the newest intact checkpoint when ``last.ckpt`` is corrupt (:func:`last_checkpoint`)."""
        subcommand = self.config.get("subcommand")
        if subcommand and self.config[subcommand].get("ckpt_path") == "last":
            trainer = self.config[subcommand].get("trainer")
            resolved = last_checkpoint(trainer.get("default_root_dir") if trainer is not None else None)
            if resolved is not None:
                self.config[subcommand].ckpt_path = resolved
        self._checkpoint_differences = checkpoint_differences(self.config)

    def instantiate_classes(self) -> None:
        with unwrapped_config_errors():  # jsonargparse wraps a class's error in its own union report
            super().instantiate_classes()
        report_checkpoint_differences(self.model, *self._checkpoint_differences)

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
        trainer_config = self.config[self.subcommand].get("trainer") if self.subcommand else self.config.get("trainer")
        use_rate_progress_bar(trainer, (trainer_config or {}).get("callbacks"))
        tidy_loggers(trainer.loggers)
        drop_monitors_without_logger(trainer)
        if requeue:
            trainer.callbacks.append(SlurmRequeue())
        if not any(isinstance(c, Throughput) for c in trainer.callbacks):  # documents/s, tokens/s, peak memory
            trainer.callbacks.append(Throughput())
        if self.subcommand == "predict":  # predict logs nothing: no second logger folder or wandb run beside fit's
            trainer.loggers = []
        if self.subcommand == "predict" and not any(isinstance(c, BasePredictionWriter) for c in trainer.callbacks):
            trainer.callbacks.append(PredictionWriter(Path(trainer.default_root_dir) / "predictions"))
        if isinstance(self.datamodule, DocumentDataModule):  # what the corpus read and skipped, in the run folder
            self.datamodule.stats_dir = trainer.default_root_dir
        return trainer


def use_rate_progress_bar(trainer: L.Trainer, configured: list | object | None) -> None:
    """Replaces the Rich progress bar that Lightning adds by default with :class:`RateProgressBar` (whose rate is
    true for steps slower than 30 s), unless the config names a progress bar of its own.

    Args:
        trainer: The trainer just built.
        configured: The parsed config's ``trainer.callbacks`` (before instantiation: ``class_path`` namespaces;
            one, a list of them, or None).
    """
    configured = configured if isinstance(configured, list) else [configured]
    if any(_names_progress_bar(c.get("class_path") if hasattr(c, "get") else None) for c in configured):
        return
    for i, callback in enumerate(trainer.callbacks):
        if type(callback) is RichProgressBar:
            trainer.callbacks[i] = RateProgressBar()


#: Lightning callbacks that only write to the trainer's logger, and stop a run without one with a traceback.
LOGGER_MONITORS = (LearningRateMonitor, DeviceStatsMonitor)


def drop_monitors_without_logger(trainer: L.Trainer) -> None:
    """Takes the callbacks of :data:`LOGGER_MONITORS` out of a trainer without a logger (``--trainer.logger false``
    with a config that lists one), each said in one line: they have nowhere to write, and Lightning would stop the
    run with a traceback when training starts."""
    if trainer.loggers:
        return
    for monitor in [c for c in trainer.callbacks if isinstance(c, LOGGER_MONITORS)]:
        trainer.callbacks.remove(monitor)
        rank_zero_info(f"trainer.logger is false: the {type(monitor).__name__} of trainer.callbacks has nowhere to "
                       f"log and is left out")


def _names_progress_bar(class_path: str | None) -> bool:
    found = class_at(class_path)
    return isinstance(found, type) and issubclass(found, ProgressBar)


def refuse_untrusted_arguments(args: list[str]) -> None:
    """Checks the configs of a command line before jsonargparse reads them: each ``--config`` (a file, or YAML
    text as ``evaluate`` passes it) and each ``--<key>.class_path`` value."""
    args = [str(arg) for arg in args]
    for i, arg in enumerate(args):
        name, eq, value = arg.partition("=")
        if not eq:
            value = args[i + 1] if i + 1 < len(args) else ""
        if name in ("--config", "-c"):
            if _is_file(value):
                refuse_untrusted_pieces(load_yaml(value), Path(value).parent)
            elif value:
                refuse_untrusted(parse_yaml(value, "--config"))
        elif name.startswith("--") and name.endswith(("class_path", "class_path+")):
            refuse_untrusted({"class_path": value}, name[2:].rstrip("+").rsplit(".class_path", 1)[0])
        elif name.startswith("--") and eq and value.lstrip().startswith(("{", "[")):  # --key={class_path: ...}
            try:
                parsed = yaml.safe_load(value)
            except yaml.YAMLError:
                continue  # not YAML: jsonargparse reports the value
            refuse_untrusted(parsed, name[2:].rstrip("+"))


def refuse_untrusted_pieces(config, folder: Path, key: str = "") -> None:
    """Checks the YAML files a config names as values (``logger: ../trainer/wandb_logger.yaml``, a callback given
    as a path), which jsonargparse reads relative to the config's folder, before it imports what they name."""
    if isinstance(config, dict):
        for name, value in config.items():
            refuse_untrusted_pieces(value, folder, f"{key}.{name}" if key else str(name))
    elif isinstance(config, list):
        for i, value in enumerate(config):
            refuse_untrusted_pieces(value, folder, f"{key}[{i}]")
    elif isinstance(config, str) and config.endswith((".yaml", ".yml")) and _is_file(str(folder / config)):
        piece = folder / config
        refuse_untrusted(parse_yaml(piece.read_text(encoding="utf-8"), str(piece)), f"{key} ({config})")
        refuse_untrusted_pieces(parse_yaml(piece.read_text(encoding="utf-8"), str(piece)), piece.parent, key)


def _is_file(value: str) -> bool:
    """Whether a ``--config`` value names a file (it may also be YAML text, too long for a path)."""
    try:
        return "\n" not in value and Path(value).is_file()
    except OSError:
        return False


#: ``--ckpt_path`` values that Lightning resolves itself (``last`` only when the run folder has no ``last`` file).
LIGHTNING_CKPT_NAMES = ("last", "best", "hpc")


def checkpoint_differences(config) -> tuple[str, dict, dict[str, tuple]]:
    """(checkpoint path, {key: (checkpoint value, config value)}, {weight: shape}) of the subcommand's
    ``--ckpt_path``: how the checkpoint's stored hyper-parameters differ from the config's ``model.init_args``
    (plain values only; nothing in them is imported or built), and the shapes of its weights."""
    subcommand = config.get("subcommand")
    ckpt_path = config[subcommand].get("ckpt_path") if subcommand else None
    if not ckpt_path or str(ckpt_path) in LIGHTNING_CKPT_NAMES or str(ckpt_path).startswith("registry"):
        return "", {}, {}
    checkpoint = read_checkpoint(ckpt_path)  # an unreadable file stops here, naming it
    stored = checkpoint.get("hyper_parameters") or {}
    model = config[subcommand].get("model")
    init_args = model.get("init_args") if model is not None else None
    configured = init_args.as_dict() if hasattr(init_args, "as_dict") else dict(init_args or {})
    differences, flat = {}, _flat(configured)
    for key, value in _flat(stored).items():
        if key.split(".")[0].startswith("_") or key not in flat:
            continue
        if _plain(value) and _plain(flat[key]) and value != flat[key]:
            differences[f"model.init_args.{key}"] = (value, flat[key])
    shapes = {k: tuple(v.shape) for k, v in (checkpoint.get("state_dict") or {}).items() if hasattr(v, "shape")}
    return str(ckpt_path), differences, shapes


def _flat(mapping, prefix: str = "") -> dict:
    flat = {}
    for key, value in (mapping.items() if isinstance(mapping, dict) else []):
        if isinstance(value, dict):
            flat.update(_flat(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat


def _plain(value) -> bool:
    return value is None or isinstance(value, (bool, int, float, str)) or (
        isinstance(value, (list, tuple)) and all(_plain(v) for v in value))


def report_checkpoint_differences(model, ckpt_path: str, differences: dict, shapes: dict) -> None:
    """Stops (:class:`ConfigError`) when the checkpoint's weights do not fit the model the config built, naming
    the hyper-parameters that differ; otherwise prints the differences once, as the config's values are used."""
    if not ckpt_path:
        return
    built = {k: tuple(v.shape) for k, v in model.state_dict().items()} if model is not None else {}
    misfits = [k for k, shape in shapes.items() if k in built and built[k] != shape]
    listed = ", ".join(f"{k}={old!r} (config: {new!r})" for k, (old, new) in differences.items())
    if misfits:
        keys = listed or "no stored hyper-parameter"
        raise ConfigError(f"--ckpt_path {ckpt_path}: its weights do not fit the model of this config "
                          f"({len(misfits)} differ in shape, first {misfits[0]}: {shapes[misfits[0]]} vs "
                          f"{built[misfits[0]]}); the checkpoint was trained with {keys}: use its config's values")
    if differences:
        print(f"note: --ckpt_path {ckpt_path} was trained with {listed}; using the config's values",
              file=sys.stderr)


def run(argv: list[str], end_process_group: bool = True) -> DocEmbCLI:
    """``python -m lit_docemb fit|validate|test|predict ...`` (``argv`` from the subcommand on), called by
    :func:`lit_docemb.commands.main`, which reports a :data:`~lit_docemb.errors.ONE_LINE_ERRORS` error in one line.

    Args:
        argv: The subcommand and its options.
        end_process_group: End the process group in step on every rank
            (:func:`~lit_docemb.distributed.close_process_group`) before the interpreter ends it; ``grid`` keeps it
            for its next cell.
    """
    cli = DocEmbCLI(args=argv)
    if end_process_group:
        close_process_group()
    return cli
