"""What a sentence-transformers model folder adds after the Hugging Face encoder: the modules that ``modules.json``
lists after pooling (``Dense``, ``Normalize``) and whether pooling counts a prompt's tokens.

The layout, as sentence-transformers writes it: ``modules.json`` lists the modules in order (``idx``, ``name``,
``path``, ``type``), e.g. ``sentence_transformers.models.Transformer`` at ``""`` (the folder itself),
``...Pooling`` at ``1_Pooling``, ``...Dense`` at ``2_Dense``, ``...Normalize`` at ``3_Normalize``. A Dense folder holds
``config.json`` (``in_features``, ``out_features``, ``bias``, ``activation_function``: a dotted ``torch.nn`` class
such as ``torch.nn.modules.linear.Identity``) and the weights of its ``linear`` layer (``linear.weight``, and
``linear.bias`` when ``bias`` is true) in ``model.safetensors`` (current releases) or ``pytorch_model.bin`` (older
ones, e.g. the INSTRUCTOR checkpoints). A Normalize module has no files: it scales each vector to unit L2 norm.
``1_Pooling/config.json`` may hold ``include_prompt``: ``false`` means the tokens of a prompt put before the text are
attended to but left out of the pooling (true when absent).

The INSTRUCTOR checkpoints (``hkunlp/instructor-base``, ``-large``, ``-xl``; Su et al. 2022) are such folders: a
``T5EncoderModel`` (``config.json``; ``pytorch_model.bin``; tokenizer files ``spiece.model``, ``tokenizer.json``,
``tokenizer_config.json``, ``special_tokens_map.json``), ``1_Pooling`` (mean of token states), ``2_Dense`` (a linear
map without bias from the T5 width to 768, in ``pytorch_model.bin``) and a ``Normalize`` module. Their pooling configs
predate ``include_prompt``; sentence-transformers leaves the instruction out of the pooling for those three hub names
by name, as INSTRUCTOR's own code does (it masks the instruction's leading positions out of the mean).
:data:`PROMPT_EXCLUDED_BY_NAME` does the same here.

Weights and configs are read as data: JSON, safetensors, or a ``torch.load`` restricted to tensors
(``weights_only=True``); an activation is looked up in a fixed table, never imported from the name the file gives.
"""

from __future__ import annotations

import json
import os

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from lit_docemb.errors import BadArgument

#: Hub names of the INSTRUCTOR checkpoints, whose pooling leaves the instruction out though their
#: ``1_Pooling/config.json`` does not say so (sentence-transformers treats these names the same way).
PROMPT_EXCLUDED_BY_NAME = ("hkunlp/instructor-base", "hkunlp/instructor-large", "hkunlp/instructor-xl")

#: The activations a Dense module may name (``activation_function``), by their dotted ``torch.nn`` path.
ACTIVATIONS: dict[str, type[nn.Module]] = {
    "torch.nn.modules.linear.Identity": nn.Identity,
    "torch.nn.modules.activation.Tanh": nn.Tanh,
    "torch.nn.modules.activation.ReLU": nn.ReLU,
    "torch.nn.modules.activation.GELU": nn.GELU,
    "torch.nn.modules.activation.Sigmoid": nn.Sigmoid,
}

MODULE_TYPE_PREFIX = "sentence_transformers.models."
DENSE_WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin")


def folder_file(name_or_path: str, filename: str) -> str | None:
    """The local path of ``filename`` inside a model folder or hub repository (downloaded into the hub cache for a
    hub name), or ``None`` when it has none."""
    if os.path.isdir(name_or_path):
        path = os.path.join(name_or_path, filename)
        return path if os.path.isfile(path) else None
    from transformers.utils import cached_file

    return cached_file(name_or_path, filename, _raise_exceptions_for_missing_entries=False)


def read_modules(name_or_path: str) -> list[dict] | None:
    """The entries of the folder's ``modules.json`` in order, or ``None`` when it has none (a plain Hugging Face
    folder)."""
    path = folder_file(name_or_path, "modules.json")
    if path is None:
        return None
    with open(path, encoding="utf-8") as file:
        modules = json.load(file)
    if not isinstance(modules, list) or not all(isinstance(entry, dict) and "type" in entry for entry in modules):
        raise BadArgument("encoder", f"{path}: expected a list of modules with a 'type' each (sentence-transformers "
                                     f"layout); download the folder again")
    return sorted(modules, key=lambda entry: entry.get("idx", 0))


def module_kind(entry: dict) -> str:
    """``Dense`` for ``sentence_transformers.models.Dense``; the full type for a module of another library."""
    kind = str(entry["type"])
    return kind.removeprefix(MODULE_TYPE_PREFIX) if kind.startswith(MODULE_TYPE_PREFIX) else kind


def after_pooling(modules: list[dict]) -> list[dict]:
    """The entries that follow the Pooling module (all of them after the first when there is none)."""
    kinds = [module_kind(entry) for entry in modules]
    start = kinds.index("Pooling") + 1 if "Pooling" in kinds else 1
    return modules[start:]


def pooling_includes_prompt(name_or_path: str, modules: list[dict] | None) -> bool:
    """Whether the folder's pooling counts a prompt's tokens: its ``1_Pooling/config.json`` ``include_prompt``
    (true when absent or when the folder has no Pooling module), false for :data:`PROMPT_EXCLUDED_BY_NAME`."""
    if name_or_path in PROMPT_EXCLUDED_BY_NAME:
        return False
    pooling = [entry for entry in modules or [] if module_kind(entry) == "Pooling"]
    if not pooling:
        return True
    path = folder_file(name_or_path, os.path.join(pooling[0].get("path", "1_Pooling"), "config.json"))
    if path is None:
        return True
    with open(path, encoding="utf-8") as file:
        return bool(json.load(file).get("include_prompt", True))


class DenseLayer(nn.Module):
    """sentence-transformers' Dense module: ``activation(linear(x))`` on the pooled vector (B, D_in) -> (B, D_out).

    Args:
        in_features: Width of the pooled vector.
        out_features: Width of the output.
        bias: Whether the linear map has a bias.
        activation_function: Dotted ``torch.nn`` class of the activation (:data:`ACTIVATIONS`).
    """

    def __init__(self, in_features: int, out_features: int, bias: bool = True,
                 activation_function: str = "torch.nn.modules.activation.Tanh") -> None:
        super().__init__()
        if activation_function not in ACTIVATIONS:
            raise BadArgument("encoder", f"Dense activation {activation_function!r} is not one of "
                                         f"{', '.join(ACTIVATIONS)}")
        self.linear = nn.Linear(in_features, out_features, bias=bias)
        self.activation = ACTIVATIONS[activation_function]()

    def forward(self, pooled: Tensor) -> Tensor:
        return self.activation(self.linear(pooled))


class UnitNormalize(nn.Module):
    """sentence-transformers' Normalize module: each vector scaled to unit L2 norm (B, D) -> (B, D)."""

    def forward(self, pooled: Tensor) -> Tensor:
        return F.normalize(pooled, p=2, dim=-1)


def load_dense(name_or_path: str, folder: str) -> DenseLayer:
    """The Dense module stored in ``folder`` (e.g. ``2_Dense``) of the model ``name_or_path``, its weights loaded."""
    config_path = folder_file(name_or_path, os.path.join(folder, "config.json"))
    if config_path is None:
        raise BadArgument("encoder", f"{os.path.join(name_or_path, folder, 'config.json')} is missing (modules.json "
                                     f"lists a Dense module there); download the whole model folder")
    with open(config_path, encoding="utf-8") as file:
        config = json.load(file)
    keys = ("in_features", "out_features", "bias", "activation_function")
    dense = DenseLayer(**{key: config[key] for key in keys if key in config})
    for filename in DENSE_WEIGHT_FILES:
        path = folder_file(name_or_path, os.path.join(folder, filename))
        if path is not None:
            break
    else:
        raise BadArgument("encoder", f"{os.path.join(name_or_path, folder)} has no weights file "
                                     f"({' or '.join(DENSE_WEIGHT_FILES)}) beside its config.json; download the "
                                     f"whole model folder")
    if path.endswith(".safetensors"):
        from safetensors.torch import load_file

        weights = load_file(path)
    else:
        weights = torch.load(path, map_location="cpu", weights_only=True)
    try:
        dense.load_state_dict(weights)
    except RuntimeError as err:
        problem = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise BadArgument("encoder", f"{path} does not fit the Dense module of its config.json "
                                     f"({problem})") from None
    return dense


def head_after_pooling(name_or_path: str, modules: list[dict]) -> nn.Sequential:
    """The Dense and Normalize modules that ``modules.json`` lists after pooling, in order; another module there
    (one sentence-transformers defines that this package does not, or one of another library) is refused."""
    layers: list[nn.Module] = []
    for entry in after_pooling(modules):
        kind = module_kind(entry)
        if kind == "Dense":
            layers.append(load_dense(name_or_path, str(entry.get("path", ""))))
        elif kind == "Normalize":
            layers.append(UnitNormalize())
        else:
            raise BadArgument("sentence_transformers_head", f"{name_or_path}: module {entry['type']!r} after "
                                                            f"pooling is not read here (Dense and Normalize only): "
                                                            f"set it to false")
    return nn.Sequential(*layers)
