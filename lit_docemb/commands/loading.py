"""What the commands share to load a run: the documents a command reads (JSONL or TSV), the run's method built
from its config(s) and ``--model...`` overrides (a baseline without a checkpoint), restored from a checkpoint and
optionally interpolated with its starting weights (WiSE-FT: :mod:`lit_docemb.commands.interpolate`).

One way to load a run, used by every command that reads one: :func:`run_of` names it (``--run_dir runs/x``: its
``config.yaml`` and ``checkpoints/last.ckpt``; or ``--config`` and ``--ckpt_path``), :func:`load_method` builds
its method (:func:`load_run_cli` its method, DataModule and trainer callbacks) and :func:`restore_run` restores
it through the method's own ``on_load_checkpoint``.

It loads torch and Lightning; ``python -m lit_docemb <command> --help`` still does not, since it reads the command's
signature from its source (:mod:`lit_docemb.commands.arguments`).
"""

from __future__ import annotations

import logging
import os
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import lightning as L
import torch
import yaml
from jsonargparse import ArgumentError
from lightning.pytorch.cli import LightningArgumentParser

import lit_docemb.data  # noqa: F401  (registers the DataModules)
import lit_docemb.methods  # noqa: F401  (registers the methods)
from lit_docemb.commands.cli import DocEmbCLI, one_line_parse_error, refuse_untrusted_arguments
from lit_docemb.commands.run_folder import last_checkpoint
from lit_docemb.commands.section_errors import SectionNaming, build_plainly, unwrapped_config_errors
from lit_docemb.commands.trust import load_yaml, refuse_untrusted
from lit_docemb.config_block import ConfigBlock
from lit_docemb.data.core.datamodule import DocumentDataModule
from lit_docemb.data.core.document import Document, Section
from lit_docemb.data.core.reading import ReadContext, read_lines, require_path
from lit_docemb.data.corpora.jsonl import read_jsonl
from lit_docemb.errors import ConfigError, require
from lit_docemb.methods.base import EmbeddingMethod
from lit_docemb.methods.checkpoints import read_checkpoint, restore_method
from lit_docemb.methods.retention import interpolated_state

log = logging.getLogger(__name__)

TSV_EXPECTED = "id<TAB>text or id<TAB>title<TAB>text per line (an optional header line of those names)"
TSV_HEADERS = (["id", "text"], ["id", "title", "text"])


# --- input ------------------------------------------------------------------------------------------------
def read_tsv(path: str | Path, context: ReadContext | None = None) -> list[Document]:
    """Documents of a TSV file: ``id<TAB>text`` or ``id<TAB>title<TAB>text`` (one untitled section). A line with
    another number of fields or an empty id is skipped and counted as ``"malformed_record"``."""
    context = ReadContext() if context is None else context
    path = require_path(path, "TSV documents", TSV_EXPECTED)
    documents = []
    for line_no, line in read_lines(path, context):
        line = line.rstrip("\r\n")
        if not line.strip():
            continue
        fields = line.split("\t")
        if line_no == 1 and [f.strip().lower() for f in fields] in TSV_HEADERS:
            continue
        if len(fields) not in (2, 3) or not fields[0].strip():
            context.malformed(f"{path}:{line_no}", f"{len(fields)} tab-separated fields", TSV_EXPECTED)
            continue
        title = fields[1] if len(fields) == 3 else ""
        documents.append(Document(fields[0].strip(), title=title, sections=[Section("", fields[-1])]))
    return documents


def read_documents(path: str | Path, stats: Counter | None = None) -> list[Document]:
    """The non-empty documents of a ``.jsonl``/``.tsv`` file (optionally ``.gz``/``.bz2``/``.xz``), in file order;
    bad lines and empty documents are counted into ``stats``."""
    context = ReadContext(stats=Counter() if stats is None else stats)
    suffixes = [s.lower() for s in Path(path).suffixes if s.lower() not in (".gz", ".bz2", ".xz")]
    if suffixes[-1:] in ([".tsv"], [".tab"]):
        documents = read_tsv(path, context)
    elif suffixes[-1:] in ([".jsonl"], [".json"]):
        documents = read_jsonl(path, context)
    else:
        raise ValueError(f"--input {path}: name it .jsonl (lit_docemb JSONL) or .tsv ({TSV_EXPECTED})")
    kept = [d for d in documents if not d.is_empty()]
    if len(kept) < len(documents):
        context.stats["empty_document"] += len(documents) - len(kept)
    return kept


# --- the run's config -------------------------------------------------------------------------------------
#: Keys of a run's saved config.yaml that only a subcommand takes.
SUBCOMMAND_KEYS = {"ckpt_path", "weights_only"}


def without_subcommand_keys(path: str) -> str:
    """The config at ``path``, as YAML text without the keys only a subcommand takes (a run's saved config.yaml
    holds ``ckpt_path`` and ``weights_only``); the path itself when it has none."""
    config = load_yaml(path) or {}  # safe YAML, class paths checked (as DocEmbCLI checks them again)
    if not isinstance(config, dict) or not SUBCOMMAND_KEYS & config.keys():
        return path
    return yaml.safe_dump({k: v for k, v in config.items() if k not in SUBCOMMAND_KEYS}, sort_keys=False)


def run_cli(config: Sequence[str], overrides: Sequence[str] = ()):
    """The run's :class:`~lit_docemb.commands.cli.DocEmbCLI` (method, DataModule, trainer and its callbacks) as
    ``config`` and ``overrides`` build it, without running a subcommand."""
    configs = [arg for path in config for arg in ("--config", without_subcommand_keys(path))]
    return DocEmbCLI(args=[*configs, *overrides], run=False)


# --- the run a command reads -----------------------------------------------------------------------------
#: What a run folder holds that a command reads: the config a fit writes and its checkpoint.
RUN_CONFIG = "config.yaml"
RUN_CHECKPOINT = os.path.join("checkpoints", "last.ckpt")


@dataclass(frozen=True)
class Run:
    """What a command reads of a run: its config(s) (the run's ``config.yaml`` first), its checkpoint (None: the
    method as its config builds it, a baseline) and its folder (``--run_dir``; None when named by ``--config``)."""

    configs: list[str]
    ckpt_path: str | None = None
    folder: Path | None = None

    def output(self, name: str, root: str | Path | None = None) -> Path:
        """Where a command writes ``name`` by default: in the run folder, else in ``root`` (the config's
        ``trainer.default_root_dir``), else in the working folder."""
        base = self.folder if self.folder is not None else root
        return Path(base) / name if base is not None else Path(name)


def run_of(run_dir: str | None, config: Sequence[str] | None, ckpt_path: str | None,
           needs_checkpoint: bool = False) -> Run:
    """The run named by ``--run_dir`` (its ``config.yaml``, then any ``--config``; ``--ckpt_path``, else the run's
    last checkpoint) or by ``--config`` and ``--ckpt_path``; the checkpoint is checked readable before anything is
    built. A folder that is not a run folder, or no run named at all, is a one-line :class:`ConfigError`."""
    if run_dir is None:
        if not config:
            raise ConfigError("no run given: --run_dir runs/<run> (a run folder), or --config <the run's "
                              "config.yaml> with --ckpt_path <its checkpoint>")
        if needs_checkpoint and ckpt_path is None:
            raise ConfigError("--ckpt_path: a checkpoint is needed (or --run_dir runs/<run>, its last checkpoint)")
        return Run(list(config), checked_checkpoint(ckpt_path))
    folder = Path(run_dir).expanduser()
    if not folder.is_dir():
        raise ConfigError(f"--run_dir {run_dir}: no such folder; give a run folder (where fit --run_dir wrote "
                          f"{RUN_CONFIG} and {RUN_CHECKPOINT})")
    if not (folder / RUN_CONFIG).is_file():
        raise ConfigError(f"--run_dir {run_dir}: not a run folder: it has no {RUN_CONFIG} (the config a fit writes "
                          f"there)")
    if ckpt_path is None:
        ckpt_path = str(folder / RUN_CHECKPOINT) if (folder / RUN_CHECKPOINT).exists() else last_checkpoint(folder)
    if ckpt_path is None:
        raise ConfigError(f"--run_dir {run_dir}: not a run folder: it has no checkpoint ({RUN_CHECKPOINT}); "
                          f"a fit writes one there (or give --ckpt_path)")
    return Run([str(folder / RUN_CONFIG), *(config or [])], checked_checkpoint(ckpt_path), folder)


def default_output(run: Run, name: str, command: str) -> str:
    """``<run_dir>/<name>``, where a command writes by default when ``--output`` is not given; without a run
    folder (``--config``) a :class:`ConfigError` asking for ``--output``."""
    if run.folder is None:
        raise ConfigError(f"{command}: --output is needed with --config (or give --run_dir runs/<run>: the output "
                          f"then goes to runs/<run>/{name})")
    return str(run.folder / name)


def checked_checkpoint(ckpt_path: str | None) -> str | None:
    """``ckpt_path`` once it reads as a checkpoint (mapped, not loaded): a missing or unreadable file stops a
    command in one line before anything is built or read."""
    if ckpt_path is not None:
        read_checkpoint(ckpt_path, mmap=True)
    return None if ckpt_path is None else str(ckpt_path)


# --- the method -------------------------------------------------------------------------------------------
def _merge(base: dict, update: dict) -> dict:
    """``update`` over ``base``, dicts merged key by key; a new ``class_path`` replaces the old init_args. Keys given
    beside a ``class_path`` of ``base`` are its ``init_args`` (``--model.init_args.encoder.name X`` over a run's saved
    ``encoder: {class_path: ..., init_args: ...}``), as jsonargparse reads them."""
    if "class_path" in update and update.get("class_path") != base.get("class_path"):
        return dict(update)
    loose = {k: v for k, v in update.items() if k not in ("class_path", "init_args", "dict_kwargs")}
    if "class_path" in base and loose:
        update = {k: v for k, v in update.items() if k not in loose} | {
            "init_args": {**(update.get("init_args") or {}), **loose}}
    merged = dict(base)
    for key, value in update.items():
        merged[key] = _merge(base[key], value) if isinstance(value, dict) and isinstance(base.get(key), dict) \
            else value
    return merged


def config_overrides(overrides: Sequence[str], command: str, section: str = "model") -> dict:
    """The ``section`` updates of dotted overrides (``--model.init_args.encoder.name X`` or ``--model.init_args.
    encoder=X``; values read as YAML, as LightningCLI reads them). Only that section is read by ``command``, so an
    override of another section is a :class:`ConfigError` rather than silently unused."""
    update: dict = {}
    args = list(overrides)
    while args:
        arg = args.pop(0)
        key, eq, value = arg.partition("=")
        if not eq:
            if not args or args[0].startswith("--"):
                raise ConfigError(f"{arg}: a config override needs a value (--{section}.init_args.<key> VALUE)")
            value = args.pop(0)
        path = key[2:].split(".") if key.startswith("--") else []
        if path[:1] != [section]:
            raise ConfigError(f"{key}: {command} reads only the config's {section} section; override "
                              f"--{section}.init_args.<key> (or --{section}.class_path)")
        parsed = yaml.safe_load(value)
        node = update
        for part in path[1:-1]:
            node = node.setdefault(part, {})
        if len(path) == 1:
            node["class_path"] = parsed
        else:
            node[path[-1]] = parsed
    return update


def build_method(configs: Sequence[str | Path], overrides: Sequence[str] = (), command: str = "embed",
                 model: dict | None = None):
    """The method of a run's config(s) (the ``model`` section; later files win, then ``overrides``), built without
    its weights; a key the method's signature does not have is a one-line :class:`ConfigError`. ``model`` is a
    model section to start from (a checkpoint's stored class and hyper-parameters: ``candidates``)."""
    model = dict(model or {})
    for path in configs:
        config = load_yaml(path) or {}  # safe YAML, class paths checked before jsonargparse imports any
        if not isinstance(config, dict) or "model" not in config:
            raise ValueError(f"{path} has no 'model' section: pass the run's config.yaml (or the fit config)")
        model = _merge(model, config["model"])
    refuse_untrusted_arguments(list(overrides))  # class paths of overrides, before jsonargparse imports them
    model = _merge(model, config_overrides(overrides, command))
    parser = LightningArgumentParser(exit_on_error=False)
    parser.add_subclass_arguments(EmbeddingMethod, "model", required=True, fail_untyped=False)  # as LightningCLI
    try:
        parsed = parser.parse_object({"model": model})
    except ArgumentError as err:
        raise ConfigError(one_line_parse_error(str(err))) from None
    refuse_untrusted(parsed)  # callables resolved from strings, before anything is built
    seed_as_configured(configs)
    # a bad value of the method, or of a class or block nested in it, is one line naming its key, as in fit
    naming = SectionNaming(build_plainly, "model", lambda: parsed.model)
    for base in (EmbeddingMethod, ConfigBlock):
        parser.add_instantiator(naming, base, subclasses=True, prepend=True)
    instantiate = getattr(parser, "instantiate", None) or parser.instantiate_classes
    with unwrapped_config_errors():  # jsonargparse wraps a nested class's error in its own union report
        return instantiate(parsed).model


def build_datamodule(configs: Sequence[str | Path], overrides: Sequence[str] = (), command: str = "word-vectors"):
    """The DataModule of fit config(s) (the ``data`` section; later files win, then ``--data...`` overrides), built
    as LightningCLI builds it and not yet set up; a key its signature does not have is a one-line
    :class:`ConfigError`."""
    data: dict = {}
    for path in configs:
        config = load_yaml(path) or {}  # safe YAML, class paths checked before jsonargparse imports any
        if not isinstance(config, dict):
            raise ConfigError(f"--config {path}: not a YAML mapping (a fit config with a data section)")
        data = _merge(data, config.get("data") or {})
    refuse_untrusted_arguments(list(overrides))
    data = _merge(data, config_overrides(overrides, command, section="data"))
    if not data:
        raise ConfigError(f"--config: no data section in {', '.join(map(str, configs)) or 'no config'}; give a fit "
                          "config (configs/ctpe/arxiv.yaml) or --data <DataModule> --data.init_args.<key> VALUE")
    parser = LightningArgumentParser(exit_on_error=False)
    parser.add_subclass_arguments(DocumentDataModule, "data", required=True, fail_untyped=False)
    try:
        parsed = parser.parse_object({"data": data})
    except ArgumentError as err:
        raise ConfigError(one_line_parse_error(str(err))) from None
    refuse_untrusted(parsed)
    instantiate = getattr(parser, "instantiate", None) or parser.instantiate_classes
    return instantiate(parsed).data


def seed_as_configured(configs: Sequence[str | Path]) -> None:
    """Seeds the random generators with the configs' ``seed_everything`` (the last that sets an integer), as
    ``fit`` did before building the method: weights a config initialises at random (Graph-RoBERTa's and CoLDE's
    heads) are then the same draw every time the method is built."""
    seeds = [c["seed_everything"] for c in map(load_yaml, configs) if isinstance(c, dict)
             and isinstance(c.get("seed_everything"), int) and not isinstance(c.get("seed_everything"), bool)]
    if seeds:
        L.seed_everything(seeds[-1], verbose=False)


def encoder_name(method) -> str:
    """The encoder a method was built from (its ``encoder`` block's ``name``), else the method's class name."""
    spec = getattr(method, "encoder_spec", None)
    return str(spec.name) if spec is not None else type(method).__name__


def announce_baseline(method) -> None:
    """The one line that says a command scores a method without a checkpoint."""
    log.warning("no --ckpt_path: scoring %s as initialised (a baseline)", encoder_name(method))


# --- a trained method -------------------------------------------------------------------------------------
def model_overrides(overrides: Sequence[str]) -> list[str]:
    """The ``--model...`` overrides among ``overrides`` (``--key value`` or ``--key=value``)."""
    kept, args = [], list(overrides)
    while args:
        arg = args.pop(0)
        value = [] if "=" in arg or not args or args[0].startswith("--") else [args.pop(0)]
        if arg.startswith("--model"):
            kept += [arg, *value]
    return kept


def interpolate_method(method, configs: Sequence[str | Path], overrides: Sequence[str], alpha: float) -> None:
    """Gives ``method`` (its trained weights loaded) the weights ``(1 - alpha)·θ₀ + alpha·θ``, θ₀ those of the
    method as ``configs`` and ``overrides`` build it (:mod:`lit_docemb.commands.interpolate`)."""
    require(0.0 <= alpha <= 1.0, "--interpolate_alpha", "in [0, 1] (0 the starting weights, 1 the trained ones)",
            alpha)
    starting = build_method(configs, model_overrides(overrides), "interpolate").state_dict()
    method.load_state_dict(interpolated_state(method.state_dict(), starting, alpha))
    log.warning("weights interpolated: %.2f x trained + %.2f x as the config builds them", alpha, 1.0 - alpha)


def refuse_without_checkpoint(alpha: float | None, ckpt_path: str | None) -> None:
    """``--interpolate_alpha`` mixes a checkpoint with the starting weights: it needs ``--ckpt_path``."""
    if alpha is not None and ckpt_path is None:
        raise ConfigError("--interpolate_alpha needs --ckpt_path (the trained weights to mix with the starting ones)")


def load_method(run: Run, overrides: Sequence[str] = (), interpolate_alpha: float | None = None,
                command: str = "export"):
    """The run's method as its config(s) and ``overrides`` build it, restored from its checkpoint
    (:func:`restore_run`), in eval mode; without a checkpoint, the method as built (a baseline)."""
    refuse_without_checkpoint(interpolate_alpha, run.ckpt_path)
    method = build_method(run.configs, overrides, command)
    return restore_run(method, run, overrides, interpolate_alpha).eval()


def restore_run(method, run: Run, overrides: Sequence[str] = (), interpolate_alpha: float | None = None):
    """``method`` as the run's checkpoint left it: the method's own ``on_load_checkpoint`` first (DECA's and CTPE's
    vocabularies, which size their tables), then its weights (:func:`~lit_docemb.methods.checkpoints.
    restore_method`), interpolated with the starting weights by ``interpolate_alpha`` when given; without a
    checkpoint, ``method`` as built, announced as a baseline. Every command restores a run here."""
    refuse_without_checkpoint(interpolate_alpha, run.ckpt_path)
    if run.ckpt_path is None:
        announce_baseline(method)
        return method
    restore_method(method, run.ckpt_path)
    if interpolate_alpha is not None:
        interpolate_method(method, run.configs, overrides, interpolate_alpha)
    return method


def load_run_cli(run: Run, overrides: Sequence[str] = ()):
    """The run's :class:`~lit_docemb.commands.cli.DocEmbCLI` (method not yet restored: :func:`restore_run`,
    DataModule, trainer callbacks) as its config(s) and ``overrides`` build it."""
    return run_cli(run.configs, overrides)


def torch_device(accelerator: str = "auto") -> str:
    """The torch device of a one-process command: ``auto`` is ``cuda`` when a GPU is visible, else ``cpu``;
    ``gpu`` is ``cuda``; any other value (``cpu``, ``cuda:1``, ``mps``) is used as given.

    Args:
        accelerator: The ``--accelerator`` value.
    """
    if accelerator == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    return "cuda" if accelerator == "gpu" else accelerator
