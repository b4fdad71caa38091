"""The forms ``python -m lit_docemb export`` (:mod:`lit_docemb.commands.export`) writes: a method as a Hugging Face
folder or a sentence-transformers model.

* ``hf``: the token encoder (``config.json``, ``model.safetensors``, tokenizer files) that ``AutoModel`` /
  ``AutoTokenizer.from_pretrained(folder)`` load offline. For a hierarchical method this is its passage encoder
  only; the document-level aggregation lives in the sentence-transformers form.
* ``sentence-transformers``: a model whose ``encode(text)`` returns the same vector as ``embed`` (and the
  method's ``embed``) for that document: DocSplit (and DECA with a Hugging Face encoder) as a plain
  Transformer + Pooling model with the method's pooling and token budget (an encoder's instruction as the default
  prompt, its Dense / Normalize modules after the pooling); Graph-RoBERTa as
  :class:`~lit_docemb.export.modules.GraphDocumentModule`, which splits the text into passages and runs the graph
  encoder; CoLDE as :class:`~lit_docemb.export.modules.CoLDEDocumentModule`, which cuts the unsplit text into
  chunks and runs its data encoder (section/chunk embeddings, chunkwise attention and Bi-LSTM, or the mean of the
  ablations). These modules are classes of the
  installed ``lit_docemb`` package (nothing is read from the folder as code), but sentence-transformers >= 6 asks
  for ``trust_remote_code=True`` before importing any class outside its own namespace:
  ``SentenceTransformer(folder, trust_remote_code=True)``.

A text given to ``encode`` is one document: DocSplit and DECA embed ``title + "\\n\\n" + body`` when the method
embeds with titles (:func:`~lit_docemb.data.core.tokens.document_text`), so pass that string; Graph-RoBERTa reads
it as one untitled section (a multi-section document has passages cut at its section boundaries: embed it with
``embed`` from JSONL to keep them). CoLDE reads it as the document's text (it embeds no title; a multi-section
document is its sections' tokens in order, each section tokenized on its own, so ``embed`` from JSONL can differ
by the tokens at section joins).

Adding a method is one small class: a :class:`MethodExport` subclass registered for the method's class with
:func:`register_export` (the token encoder it writes in ``hf`` form and the sentence-transformers modules that
rebuild its document vector); what it reads of the method is that class's own arguments, never a guess at which
attributes a method happens to have. Methods without such a form (DECA's Doc2VecC, CTPE's CNN pair) raise
:class:`ExportError` naming ``embed`` instead.
"""

from __future__ import annotations

import tempfile
from abc import ABC, abstractmethod
from collections.abc import Callable
from pathlib import Path
from typing import Any

from torch import nn

from lit_docemb.errors import staged_write
from lit_docemb.export.modules import CoLDEDocumentModule, GraphDocumentModule
from lit_docemb.methods import (
    CTPE,
    DECA,
    CoLDE,
    DenseRetrieval,
    DocSplit,
    DocumentClassifier,
    GraphRoBERTa,
    MaskedLanguageModelling,
    SimCSE,
)
from lit_docemb.methods.base import EmbeddingMethod
from lit_docemb.methods.callbacks import current_umask
from lit_docemb.methods.deca_components import EncoderBackbone
from lit_docemb.models.encoder import HFEncoder, quiet_transformers_loading
from lit_docemb.models.sentence_transformers_folder import UnitNormalize

try:  # sentence-transformers is optional (pip install -e ".[export]")
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Dense, Normalize, Pooling, Transformer
except ImportError:  # pragma: no cover - exercised only without the extra
    SentenceTransformer = None

EMBED_INSTEAD = ("write its embeddings with `python -m lit_docemb embed --run_dir RUN --input docs.jsonl` instead "
                 "(into RUN/embeddings)")


class ExportError(ValueError):
    """The method has no Hugging Face / sentence-transformers form."""


def _require_sentence_transformers() -> None:
    if SentenceTransformer is None:
        raise ImportError("the sentence-transformers form needs sentence-transformers>=6: "
                          "pip install 'sentence-transformers>=6' (or pip install -e '.[export]')")


class MethodExport(ABC):
    """How a method's trained encoder is written out.

    Args:
        method: The trained method (weights loaded).
    """

    def __init__(self, method: EmbeddingMethod) -> None:
        self.method = method

    @abstractmethod
    def token_encoder(self) -> tuple[HFEncoder, Any]:
        """The Hugging Face encoder (and its tokenizer) that the ``hf`` form holds."""

    @abstractmethod
    def sentence_transformer_modules(self, scratch: Path) -> list[nn.Module]:
        """The sentence-transformers modules whose ``encode`` gives the method's document vectors (``scratch``: an
        empty folder to stage files in, deleted once the model is saved)."""

    def save_hf(self, folder: str | Path) -> Path:
        encoder, tokenizer = self.token_encoder()
        folder = Path(folder)
        encoder.backbone.save_pretrained(folder, safe_serialization=True)
        tokenizer.save_pretrained(folder)
        return folder

    def prompts(self) -> dict[str, str]:
        """The sentence-transformers prompts the model applies by default (``{"document": text}``; none here)."""
        return {}

    def save_sentence_transformer(self, folder: str | Path) -> Path:
        _require_sentence_transformers()
        prompts = self.prompts()
        with tempfile.TemporaryDirectory(prefix="lit_docemb_export_") as scratch:
            model = SentenceTransformer(modules=self.sentence_transformer_modules(Path(scratch)), device="cpu",
                                        prompts=prompts or None, default_prompt_name=next(iter(prompts), None))
            model.save(str(folder))
        return Path(folder)


#: Method class -> its export (a MethodExport class, or a function raising ExportError for a method that has
#: none); looked up along the method's class hierarchy.
EXPORTS: dict[type, Callable[[EmbeddingMethod], MethodExport]] = {}


def register_export(method_class: type) -> Callable[[type[MethodExport]], type[MethodExport]]:
    """Class decorator: ``@register_export(CoLDE) class CoLDEExport(MethodExport): ...``."""
    def register(export_class: type[MethodExport]) -> type[MethodExport]:
        EXPORTS[method_class] = export_class
        return export_class
    return register


def exporter(method: EmbeddingMethod) -> MethodExport:
    """The export of ``method`` (a fine-tuning wrapper exports its ``backbone``), or :class:`ExportError`."""
    for cls in type(method).__mro__:
        if cls in EXPORTS:
            return EXPORTS[cls](method)
    raise ExportError(f"{type(method).__name__} has no Hugging Face / sentence-transformers export; "
                      f"{EMBED_INSTEAD}")


def backbone_export(method: DocumentClassifier | DenseRetrieval) -> MethodExport:
    """A fine-tuning wrapper's export is its backbone's (the fine-tuned encoder, without the wrapper's head)."""
    return exporter(method.backbone)


EXPORTS[DocumentClassifier] = EXPORTS[DenseRetrieval] = backbone_export


# --- flat encoders: DocSplit, MaskedLanguageModelling, SimCSE, DECA with a Hugging Face encoder ---------------
@register_export(MaskedLanguageModelling)  # its encoder without the masked-LM head
@register_export(SimCSE)
class FlatEncoderExport(MethodExport):
    """A method whose document vector is its Hugging Face encoder's pooled output over ``max_length`` tokens:
    Transformer + Pooling (no normalisation: ``embed`` returns unnormalised vectors; cosine is the similarity).
    An encoder's ``sentence_transformers_head`` follows as sentence-transformers' Dense / Normalize modules, and its
    ``instruction`` becomes the model's default prompt (``prompts: {document: ...}``), which ``encode`` puts before
    the text; left out of the mean, it is Pooling's ``include_prompt: false``, whose prompt length (the prompt
    tokenized alone, less a trailing special token) is the encoder's ``unpooled_positions``. That holds where the
    tokenizer puts nothing before a text (T5, INSTRUCTOR); with a [CLS] first, sentence-transformers would leave the
    [CLS] out of the mean as well, so such an encoder is refused."""

    def __init__(self, method: EmbeddingMethod) -> None:
        encoder = method.encoder
        if encoder.instruction_tokens and not encoder.instruction_in_pooling and encoder.instruction_position:
            raise ExportError(f"{type(method).__name__} with an instruction after a [CLS] token and left out of the "
                              f"mean has no sentence-transformers form (its prompt pooling would leave the [CLS] out "
                              f"too); {EMBED_INSTEAD}")
        super().__init__(method)

    def prompts(self) -> dict[str, str]:
        instruction = self.method.encoder.instruction
        return {"document": instruction} if instruction else {}

    def token_encoder(self) -> tuple[HFEncoder, Any]:
        return self.method.encoder, self.method.tokenizer

    def max_length(self) -> int:
        return int(self.method.encoder_spec.max_length)

    def sentence_transformer_modules(self, scratch: Path) -> list[nn.Module]:
        folder = self.save_hf(scratch / "encoder")
        encoder, _ = self.token_encoder()
        transformer = Transformer(str(folder), max_seq_length=self.max_length())
        pooling = Pooling(encoder.hidden_size, pooling_mode=encoder.pooling,
                          include_prompt=encoder.instruction_in_pooling)
        return [transformer, pooling, *map(sentence_transformers_layer, encoder.head)]


def sentence_transformers_layer(layer: nn.Module) -> nn.Module:
    """sentence-transformers' module of one layer of an encoder's ``sentence_transformers_head``."""
    if isinstance(layer, UnitNormalize):
        return Normalize()
    linear = layer.linear
    return Dense(linear.in_features, linear.out_features, bias=linear.bias is not None,
                 activation_function=layer.activation, init_weight=linear.weight.detach().clone(),
                 init_bias=None if linear.bias is None else linear.bias.detach().clone())


@register_export(DocSplit)
class DocSplitExport(FlatEncoderExport):
    """DocSplit as a flat encoder; with ``sentence_pooling`` (a document as its sentences' vectors added or
    averaged) it has no such form."""

    def __init__(self, method: DocSplit) -> None:
        sentence_pooling = method.hparams.sentence_pooling
        if sentence_pooling != "none":
            raise ExportError(f"DocSplit with sentence_pooling {sentence_pooling!r} has no Hugging Face / "
                              f"sentence-transformers form: its document vector pools separately encoded sentences; "
                              f"{EMBED_INSTEAD}")
        super().__init__(method)


@register_export(DECA)
class DECAExport(FlatEncoderExport):
    """DECA with a Hugging Face encoder ([CLS], its ``max_length``); its Doc2VecC backbone has no such form."""

    def __init__(self, method: DECA) -> None:
        if not isinstance(method.backbone_spec, EncoderBackbone):
            raise ExportError(f"DECA with its Doc2VecC backbone ({type(method.backbone_spec).__name__}) has no "
                              "Hugging Face / sentence-transformers form: its document vector is a mean of its word "
                              f"vectors; {EMBED_INSTEAD}")
        super().__init__(method)

    def max_length(self) -> int:
        return self.method.max_length


def refuse_ctpe(method: CTPE) -> MethodExport:
    """CTPE's document is a pair of CNN vectors with its own similarity: no export."""
    raise ExportError("CTPE has no Hugging Face / sentence-transformers form: a document is a pair of CNN "
                      f"vectors (former, latter) scored with its own similarity (eq. 2); {EMBED_INSTEAD} "
                      "(it writes both vectors)")


EXPORTS[CTPE] = refuse_ctpe



@register_export(GraphRoBERTa)
class GraphRoBERTaExport(MethodExport):
    """Graph-RoBERTa: the passage encoder in ``hf`` form; :class:`GraphDocumentModule` for sentence-transformers."""

    def token_encoder(self) -> tuple[HFEncoder, Any]:
        return self.method.model.encoder, self.method.tokenizer

    def sentence_transformer_modules(self, scratch: Path) -> list[nn.Module]:
        hp = self.method.hparams
        folder = self.save_hf(scratch / "passage_encoder")
        graph = GraphDocumentModule.aggregation_weights(self.method.model)
        return [GraphDocumentModule(str(folder), self.method.encoder_spec.pooling, hp.node_dim, hp.num_graph_layers,
                                    hp.num_heads, self.method.passage_spec, hp.passage_token_budget, hp.head_init,
                                    graph_weights=graph)]


@register_export(CoLDE)
class CoLDEExport(MethodExport):
    """CoLDE: the chunk encoder in ``hf`` form (without the section/chunk embeddings, which sit outside it);
    :class:`CoLDEDocumentModule` for sentence-transformers."""

    def token_encoder(self) -> tuple[HFEncoder, Any]:
        return self.method.model.encoder, self.method.tokenizer

    def sentence_transformer_modules(self, scratch: Path) -> list[nn.Module]:
        hp = self.method.hparams
        folder = self.save_hf(scratch / "chunk_encoder")
        return [CoLDEDocumentModule(str(folder), self.method.encoder_spec.pooling, hp.chunk_tokens,
                                    hp.max_chunks_per_section, hp.chunk_embeddings, hp.augmentation, hp.aggregation,
                                    hp.num_sections, hp.num_heads, hp.lstm_output_size, hp.chunk_token_budget,
                                    hp.head_init,
                                    colde_weights=CoLDEDocumentModule.aggregation_weights(self.method.model))]


def export_method(method: EmbeddingMethod, output_dir: str | Path, output_format: str = "sentence-transformers") -> Path:
    """Writes ``method`` to ``output_dir`` in ``"hf"`` or ``"sentence-transformers"`` form, staged in a folder
    beside it and moved there whole (:func:`~lit_docemb.errors.staged_write`: a full disk leaves nothing new in
    ``output_dir``)."""
    if output_format not in ("hf", "sentence-transformers"):
        raise ValueError(f"format must be 'hf' or 'sentence-transformers', got {output_format!r}")
    export_ = exporter(method)
    method.eval()
    output_dir = Path(output_dir)
    output_dir.parent.mkdir(parents=True, exist_ok=True)
    with staged_write(output_dir, kept=f"{output_dir} is as it was") as staged:
        with quiet_transformers_loading():  # its save bars and the report of the unused pooler it leaves out
            (export_.save_hf if output_format == "hf" else export_.save_sentence_transformer)(staged)
        follow_umask(staged)
    return output_dir


def follow_umask(folder: str | Path) -> None:
    """Adds to the files and folders under ``folder`` the permissions the process umask allows (``0o666`` for a
    file, ``0o777`` for a folder, less the umask), as every other output has: a writer that stages through
    ``tempfile.mkstemp`` (the ``model.safetensors`` of an export) leaves a private ``0o600`` file otherwise."""
    mask = current_umask()
    for path in [Path(folder), *Path(folder).rglob("*")]:
        if not path.is_symlink():
            allowed = (0o777 if path.is_dir() else 0o666) & ~mask
            path.chmod(path.stat().st_mode & 0o7777 | allowed)
