"""The Hugging Face encoder a method trains, as one typed config block: ``model.init_args.encoder``.

DocSplit, Graph-RoBERTa, CoLDE and MaskedLanguageModelling each take one :class:`EncoderSpec` as their ``encoder``
argument (DECA's :class:`~lit_docemb.methods.deca_components.EncoderBackbone` as its own), so the encoder's options
are written and documented here once::

    model:
      class_path: lit_docemb.methods.DocSplit
      init_args:
        encoder:
          name: bert-base-uncased
          pooling: cls
          max_length: 512

jsonargparse reads the block as the class's arguments (``class_path`` may be left out: it is the only class the
argument takes) and a command line overrides one of them as ``--model.init_args.encoder.pooling mean``. The block's
``max_length`` is how many tokens one input of the encoder holds where a method gives it whole texts (DocSplit's
views, MaskedLanguageModelling's and SimCSE's documents); Graph-RoBERTa and CoLDE cut documents into passages and
chunks of their own length (``passages.max_passage_tokens``, ``chunk_tokens``) and refuse a ``max_length`` other than
the default, naming that key.

A method saves the block in its hyperparameters as plain data (:meth:`EncoderSpec.hyperparameters`, the
``class_path`` / ``init_args`` form LightningCLI writes), never as the object, so checkpoints stay weights-only
(:class:`~lit_docemb.config_block.ConfigBlock`, which Graph-RoBERTa's ``passages`` block shares).
"""

from __future__ import annotations

import inspect

from transformers import PreTrainedTokenizerBase

from lit_docemb.config_block import ConfigBlock
from lit_docemb.errors import BadArgument
from lit_docemb.models.encoder import HFEncoder, Pooling, tokenizer_and_encoder

#: The config key of the block, under ``model.init_args``: errors name ``encoder.<argument>``.
KEY = "encoder"

#: :class:`HFEncoder`'s names of the arguments its errors name, and the block's.
ENCODER_ARGUMENTS = {"encoder": "name", "packed": "packed", "first_token_global_attention":
                     "first_token_global_attention", "instruction": "instruction",
                     "instruction_in_pooling": "instruction_in_pooling",
                     "sentence_transformers_head": "sentence_transformers_head"}


class EncoderSpec(ConfigBlock):
    """A Hugging Face encoder (BERT, RoBERTa, Longformer, BigBird, T5's encoder...) with its tokenizer, and how it
    turns tokens into one vector; :meth:`build` makes the :class:`~lit_docemb.models.encoder.HFEncoder`.

    Args:
        name: Local folder or hub name of the encoder with its tokenizer, or ``package:<module>`` for a model
            shipped in an installed Python package.
        pretrained: Start from the checkpoint's weights; ``False`` trains its architecture from scratch.
        pooling: The vector of an input: the ``"cls"`` (first) token's state or the ``"mean"`` of token states.
        max_length: Tokens of one input, the instruction's included (texts get ``max_length`` minus its tokens):
            512 for BERT, 4,096 for Longformer in the papers. Methods that split documents into passages or chunks
            set their length with their own key and refuse this one.
        compile: Compile the transformer with ``torch.compile`` (see ``HFEncoder``'s ``compile``).
        packed: Encode without padding (see ``HFEncoder``'s ``packed``): the same embeddings and gradients, less
            compute on a GPU; BERT-family encoders only, no dropout on attention probabilities.
        first_token_global_attention: Longformer: global attention on the first ([CLS]) token (see ``HFEncoder``).
            The papers do not say; their Longformer configs read it as Longformer's own classifiers do (``true``).
        instruction: Text put before every input, for encoders trained with task instructions or prefixes (see
            ``HFEncoder``'s ``instruction``); it counts against the method's token length (texts get that length
            minus its tokens). ``""``: none. The INSTRUCTOR baseline (configs/baselines/hkunlp/) sets INSTRUCTOR's
            classification-style instruction. DocSplit only.
        instruction_in_pooling: Whether the instruction's tokens enter the mean (``None``: as the encoder's folder
            says; INSTRUCTOR: not; see ``HFEncoder``). Only with an ``instruction``.
        sentence_transformers_head: Apply the Dense / Normalize modules the encoder's sentence-transformers folder
            lists after pooling (INSTRUCTOR: 768-dimensional Dense, unit length); see ``HFEncoder``. DocSplit only.

    A method that cannot use an option refuses it when set (:meth:`refuse`), naming the key.
    """

    key = KEY
    class_path = "lit_docemb.models.EncoderSpec"

    def __init__(
        self,
        name: str,
        pretrained: bool = True,
        pooling: Pooling = "cls",
        max_length: int = 512,
        compile: bool = False,
        packed: bool = False,
        first_token_global_attention: bool = False,
        instruction: str = "",
        instruction_in_pooling: bool | None = None,
        sentence_transformers_head: bool = False,
    ) -> None:
        self.name, self.pretrained, self.pooling, self.max_length = name, pretrained, pooling, max_length
        self.compile, self.packed, self.first_token_global_attention = compile, packed, first_token_global_attention
        self.instruction, self.instruction_in_pooling = instruction, instruction_in_pooling
        self.sentence_transformers_head = sentence_transformers_head

    def refuse(self, method: str, *arguments: str, instead: dict[str, str] | None = None) -> None:
        """Raises :class:`~lit_docemb.errors.BadArgument` (``encoder.<argument>``) at the first of ``arguments``
        set to other than its default: options ``method`` does not use; ``instead`` names, per argument, the
        method's own key that does its work."""
        defaults = inspect.signature(type(self)).parameters
        for name in arguments:
            if getattr(self, name) != defaults[name].default:
                use = f" ({method} reads {instead[name]})" if instead and name in instead else ""
                raise BadArgument(self.key_of(name), f"{method} does not use it, got {getattr(self, name)!r}: leave it "
                                                   f"at {defaults[name].default!r}{use}")

    def build(self, max_tokens: int | None = None, argument: str | None = None, with_mlm_head: bool = False,
              mlm_argument: str = "with_mlm_head") -> tuple[PreTrainedTokenizerBase, HFEncoder]:
        """The tokenizer and the :class:`~lit_docemb.models.encoder.HFEncoder`, checked to hold ``max_tokens``.

        Args:
            max_tokens: Longest input the method gives the encoder (instruction included); ``None``: the block's
                ``max_length``.
            argument: The method's config key of ``max_tokens``, named when the encoder cannot hold it (``None``:
                ``encoder.max_length``).
            with_mlm_head: Also build the masked-LM head.
            mlm_argument: The method's config key that asks for the head, named when the encoder has none.
        """
        if max_tokens is None:
            max_tokens, argument = self.max_length, self.key_of("max_length")
        try:
            return tokenizer_and_encoder(
                self.name, max_tokens, argument, mlm_argument=mlm_argument, pretrained=self.pretrained,
                pooling=self.pooling, with_mlm_head=with_mlm_head, compile=self.compile, packed=self.packed,
                first_token_global_attention=self.first_token_global_attention, instruction=self.instruction,
                instruction_in_pooling=self.instruction_in_pooling,
                sentence_transformers_head=self.sentence_transformers_head)
        except BadArgument as err:
            if err.argument not in ENCODER_ARGUMENTS:
                raise
            raise BadArgument(self.key_of(ENCODER_ARGUMENTS[err.argument]), err.problem) from None

    def __repr__(self) -> str:
        changed = ", ".join(f"{k}={v!r}" for k, v in self.arguments().items() if k != "name")
        return f"EncoderSpec({self.name!r}{', ' if changed else ''}{changed})"
