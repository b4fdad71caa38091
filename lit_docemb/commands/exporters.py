"""The forms ``python -m lit_docemb export`` (:mod:`lit_docemb.commands.export`) writes: a method as a Hugging Face
folder or a sentence-transformers model.

* ``hf``: the token encoder (``config.json``, ``model.safetensors``, tokenizer files) that ``AutoModel`` /
  ``AutoTokenizer.from_pretrained(folder)`` load offline. For a hierarchical method this is its passage encoder
  only; the document-level aggregation lives in the sentence-transformers form.
* ``sentence-transformers``: a model whose ``encode(text)`` returns the same vector as ``embed`` (and the
  method's ``embed``) for that document: DocSplit (and DECA with a Hugging Face encoder) as a plain
  Transformer + Pooling model with the method's pooling and token budget (an encoder's instruction as the default
  prompt, its Dense / Normalize modules after the pooling); Graph-RoBERTa as
  :class:`GraphDocumentModule`, which splits the text into passages and runs the graph encoder; CoLDE as
  :class:`CoLDEDocumentModule`, which cuts the unsplit text into chunks and runs its data encoder (section/chunk
  embeddings, chunkwise attention and Bi-LSTM, or the mean of the ablations). These modules are classes of the
  installed ``lit_docemb`` package (nothing is read from the folder as code), but sentence-transformers >= 6 asks
  for ``trust_remote_code=True`` before importing any class outside its own namespace:
  ``SentenceTransformer(folder, trust_remote_code=True)``.

A text given to ``encode`` is one document: DocSplit and DECA embed ``title + "\\n\\n" + body`` when the method
embeds with titles (:func:`~lit_docemb.data.tokens.document_text`), so pass that string; Graph-RoBERTa reads
it as one untitled section (a multi-section document has passages cut at its section boundaries: embed it with
``embed`` from JSONL to keep them). CoLDE reads it as the document's text (it embeds no title; a multi-section
document is its sections' tokens in order, each section tokenized on its own, so ``embed`` from JSONL can differ
by the tokens at section joins).

Adding a method is one small class: a :class:`MethodExport` subclass registered with :func:`register_export`
(the token encoder it writes in ``hf`` form and the sentence-transformers modules that rebuild its document
vector). Methods without such a form (DECA's Doc2VecC, CTPE's CNN pair) raise :class:`ExportError` naming
``embed`` instead.
"""

from __future__ import annotations

import json
import logging
import tempfile
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, ClassVar

from safetensors.torch import load_file, save_file
from torch import Tensor, nn

from lit_docemb.data.batches import PassageGraphBatch, SectionChunks, TokenBatch
from lit_docemb.data.document import Document, Section
from lit_docemb.methods import CTPE, DECA, CoLDE, DocSplit, GraphRoBERTa, MaskedLanguageModelling
from lit_docemb.methods.base import EmbeddingMethod
from lit_docemb.methods.callbacks import current_umask
from lit_docemb.models.colde import CoLDEEncoder
from lit_docemb.models.encoder import HFEncoder, quiet_transformers_loading, tokenizer_and_encoder
from lit_docemb.models.graph_document import GraphDocumentEncoder
from lit_docemb.models.sentence_transformers_folder import UnitNormalize
from lit_docemb.views.colde import SectionChunkCollator
from lit_docemb.views.graph_roberta import PassageGraphBuilder

log = logging.getLogger(__name__)

try:  # sentence-transformers is optional (pip install -e ".[export]")
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import (
        Dense,
        InputModule,
        Normalize,
        Pooling,
        Transformer,
    )
except ImportError:  # pragma: no cover - exercised only without the extra
    SentenceTransformer = None
    InputModule = nn.Module

EMBED_INSTEAD = ("write its embeddings with `python -m lit_docemb embed --config ... --ckpt_path ... --input "
                 "docs.jsonl --output DIR` instead")


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
    backbone = getattr(method, "backbone", None)
    if isinstance(backbone, EmbeddingMethod):
        return exporter(backbone)
    raise ExportError(f"{type(method).__name__} has no Hugging Face / sentence-transformers export; "
                      f"{EMBED_INSTEAD}")


# --- flat encoders: DocSplit, DECA with a Hugging Face encoder ----------------------------------------------
@register_export(DocSplit)
class FlatEncoderExport(MethodExport):
    """A method whose document vector is its Hugging Face encoder's pooled output over ``max_length`` tokens:
    Transformer + Pooling (no normalisation: ``embed`` returns unnormalised vectors; cosine is the similarity).
    An encoder's ``sentence_transformers_head`` follows as sentence-transformers' Dense / Normalize modules, and its
    ``instruction`` becomes the model's default prompt (``prompts: {document: ...}``), which ``encode`` puts before
    the text; left out of the mean, it is Pooling's ``include_prompt: false``, whose prompt length (the prompt
    tokenized alone, less a trailing special token) is the encoder's ``unpooled_positions``. That holds where the
    tokenizer puts nothing before a text (T5, INSTRUCTOR); with a [CLS] first, sentence-transformers would leave the
    [CLS] out of the mean as well, so such an encoder is refused.
    DocSplit with ``sentence_pooling`` (a document as its sentences' vectors added or averaged) has no such form."""

    def __init__(self, method: EmbeddingMethod) -> None:
        sentence_pooling = getattr(method, "hparams", {}).get("sentence_pooling", "none")
        if sentence_pooling != "none":
            raise ExportError(f"DocSplit with sentence_pooling {sentence_pooling!r} has no Hugging Face / "
                              f"sentence-transformers form: its document vector pools separately encoded sentences; "
                              f"{EMBED_INSTEAD}")
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
        return int(self.method.hparams.max_length)

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


EXPORTS[MaskedLanguageModelling] = FlatEncoderExport  # its encoder without the masked-LM head


@register_export(DECA)
class DECAExport(FlatEncoderExport):
    """DECA with a Hugging Face encoder ([CLS], its ``max_length``); its Doc2VecC backbone has no such form."""

    def __init__(self, method: DECA) -> None:
        if not hasattr(method, "encoder"):
            raise ExportError("DECA with its Doc2VecC backbone (Doc2VecCBackbone) has no Hugging Face / "
                              f"sentence-transformers form: its document vector is a mean of its own word vectors; "
                              f"{EMBED_INSTEAD}")
        super().__init__(method)

    def max_length(self) -> int:
        return self.method.max_length


def refuse_ctpe(method: CTPE) -> MethodExport:
    """CTPE's document is a pair of CNN vectors with its own similarity: no export."""
    raise ExportError("CTPE has no Hugging Face / sentence-transformers form: a document is a pair of CNN "
                      f"vectors (former, latter) scored with its own similarity (eq. 2); {EMBED_INSTEAD} "
                      "(it writes both vectors)")


EXPORTS[CTPE] = refuse_ctpe


# --- long-document input modules: a Hugging Face token encoder + the method's aggregation --------------------
class AggregatingModule(InputModule):
    """What :class:`GraphDocumentModule` and :class:`CoLDEDocumentModule` share: a Hugging Face token encoder saved
    in its own folder (``encoder_folder``, with its tokenizer) and the weights around it (``weights_file``,
    safetensors), loaded from the export folder; ``config.json`` holds the ``config_keys`` of ``__init__``."""

    encoder_folder: ClassVar[str]
    weights_file: ClassVar[str]
    save_in_root = True

    def load_aggregation(self, encoder_folder: str, weights: dict[str, Tensor] | None) -> None:
        """Loads ``weights`` (``None``: the ``weights_file`` beside ``encoder_folder``) into ``self.model``, whose
        ``encoder.*`` weights came with the Hugging Face folder; refuses weights that do not fit."""
        if weights is None:
            weights = load_file(str(Path(encoder_folder).parent / self.weights_file))
        missing, unexpected = self.model.load_state_dict(weights, strict=False)
        if unexpected or any(not k.startswith("encoder.") for k in missing):
            raise ValueError(f"{self.weights_file} does not fit: missing {missing}, unexpected {unexpected}")
        self.model.eval()

    @staticmethod
    def aggregation_weights(model: nn.Module) -> dict[str, Tensor]:
        """The weights saved in ``weights_file``: every one but the token encoder's."""
        return {k: v.detach().cpu().contiguous() for k, v in model.state_dict().items() if not k.startswith("encoder.")}

    def save(self, output_path: str, *args, safe_serialization: bool = True, **kwargs) -> None:
        output = Path(output_path)
        self.model.encoder.backbone.save_pretrained(output / self.encoder_folder, safe_serialization=True)
        self.tokenizer.save_pretrained(output / self.encoder_folder)
        save_file(self.aggregation_weights(self.model), str(output / self.weights_file))
        self.save_config(str(output))

    @classmethod
    def load(cls, model_name_or_path: str, subfolder: str = "", **kwargs) -> AggregatingModule:
        folder = Path(model_name_or_path) / subfolder
        if not folder.is_dir():
            raise FileNotFoundError(f"{folder}: a {cls.__name__} export is a local folder")
        config = json.loads((folder / cls.config_file_name).read_text())
        return cls(str(folder / cls.encoder_folder), **{k: config[k] for k in cls.config_keys if k in config})


# --- Graph-RoBERTa: passages -> graph ------------------------------------------------------------------------
class GraphDocumentModule(AggregatingModule):
    """A sentence-transformers input module running Graph-RoBERTa's document model on a whole text: the text is
    split into passages (:func:`~lit_docemb.data.text.chunk_passages`), each passage is tokenized and encoded,
    and the graph attention layers give the document node (:class:`~lit_docemb.models.graph_document.
    GraphDocumentEncoder`). Saved as ``config.json``, ``graph.safetensors`` (projection and graph layers) and
    ``passage_encoder/`` (a Hugging Face folder with its tokenizer).

    Args:
        passage_encoder: Folder of the Hugging Face passage encoder and tokenizer.
        pooling: Passage vector from ``"cls"`` or ``"mean"`` (the method's ``pooling``).
        node_dim: Size of the nodes.
        num_graph_layers: Graph attention layers.
        num_heads: Heads per graph layer.
        graph: ``"full"`` or ``"section"`` (a text is one section, so both connect its passages alike).
        words_per_passage: Passage size in words.
        max_passage_tokens: Tokens kept per passage.
        max_passages: Passages kept per document (the method's ``max_passages_inference``).
        passage_token_budget: Passages encoded per sub-batch, in padded tokens.
        head_init: The method's ``head_init`` (``"identity"``: passage nodes without ``tanh``).
        graph_weights: Weights of the projection and graph layers (``None``: read ``graph.safetensors`` from
            beside ``passage_encoder``).
    """

    config_keys: ClassVar[list[str]] = ["pooling", "node_dim", "num_graph_layers", "num_heads", "graph", "words_per_passage",
                   "max_passage_tokens", "max_passages", "passage_token_budget", "head_init"]
    encoder_folder = "passage_encoder"
    weights_file = "graph.safetensors"

    def __init__(self, passage_encoder: str, pooling: str = "cls", node_dim: int = 512, num_graph_layers: int = 2,
                 num_heads: int = 2, graph: str = "full", words_per_passage: int = 100, max_passage_tokens: int = 192,
                 max_passages: int = 100, passage_token_budget: int = 32768, head_init: str = "random",
                 graph_weights: dict[str, Tensor] | None = None) -> None:
        super().__init__()
        self.pooling, self.node_dim, self.num_graph_layers, self.num_heads = pooling, node_dim, num_graph_layers, \
            num_heads
        self.graph, self.words_per_passage, self.max_passage_tokens = graph, words_per_passage, max_passage_tokens
        self.max_passages, self.passage_token_budget, self.head_init = max_passages, passage_token_budget, head_init
        self.tokenizer, encoder = tokenizer_and_encoder(passage_encoder, pretrained=True, pooling=pooling)
        self.model = GraphDocumentEncoder(encoder, node_dim, num_graph_layers, num_heads, 0.0, passage_token_budget,
                                          head_init=head_init)
        self.load_aggregation(passage_encoder, graph_weights)
        self.builder = PassageGraphBuilder(self.tokenizer, words_per_passage, max_passage_tokens, graph)

    def preprocess(self, inputs: Sequence[str], prompt: str | None = None, **kwargs) -> dict[str, Any]:
        """Texts -> their passage graphs: passage tokens (P, T), passages per text (G,), and each text's edges."""
        texts = [(prompt or "") + text for text in inputs]
        documents = [Document(str(i), sections=[Section("", text)]) for i, text in enumerate(texts)]
        graphs = self.builder(self.builder.passages(documents, self.max_passages))
        return {"input_ids": graphs.passages.input_ids, "attention_mask": graphs.passages.attention_mask,
                "passage_counts": graphs.passage_counts, "edges": graphs.edges}

    def forward(self, features: dict[str, Any], **kwargs) -> dict[str, Any]:
        graphs = PassageGraphBatch(TokenBatch(features["input_ids"], features["attention_mask"]),
                                   features["passage_counts"], features["edges"])
        features["sentence_embedding"] = self.model(graphs)  # (G, node_dim)
        return features

    def get_embedding_dimension(self) -> int:
        return self.node_dim

    get_sentence_embedding_dimension = get_embedding_dimension


@register_export(GraphRoBERTa)
class GraphRoBERTaExport(MethodExport):
    """Graph-RoBERTa: the passage encoder in ``hf`` form; :class:`GraphDocumentModule` for sentence-transformers."""

    def token_encoder(self) -> tuple[HFEncoder, Any]:
        return self.method.model.encoder, self.method.tokenizer

    def sentence_transformer_modules(self, scratch: Path) -> list[nn.Module]:
        hp = self.method.hparams
        folder = self.save_hf(scratch / "passage_encoder")
        graph = GraphDocumentModule.aggregation_weights(self.method.model)
        return [GraphDocumentModule(str(folder), hp.pooling, hp.node_dim, hp.num_graph_layers, hp.num_heads, hp.graph,
                                    hp.words_per_passage, hp.max_passage_tokens, hp.max_passages_inference,
                                    hp.passage_token_budget, hp.head_init, graph_weights=graph)]


# --- CoLDE: unsplit document -> chunks -> data encoder ----------------------------------------------------------
class CoLDEDocumentModule(AggregatingModule):
    """A sentence-transformers input module running CoLDE's data encoder on a whole text, as CoLDE embeds at
    evaluation (§4.2): the text, unsplit (one section), is cut into chunks of ``chunk_tokens`` tokens
    (:class:`~lit_docemb.views.colde.SectionChunkCollator`), each chunk gets the section and chunk
    embeddings (when ``augmentation``), is encoded and pooled, and the chunks are aggregated by the chunkwise
    attention and the Bi-LSTM (``aggregation: lstm``) or averaged (``mean``): the representation before the
    projection (:class:`~lit_docemb.models.colde.CoLDEEncoder`). Saved as ``config.json``, ``colde.safetensors``
    (structural embeddings, attention, LSTM) and ``chunk_encoder/`` (a Hugging Face folder with its tokenizer).

    Args:
        chunk_encoder: Folder of the Hugging Face chunk encoder and tokenizer.
        pooling: Chunk vector from ``"cls"`` or ``"mean"`` (the method's ``pooling``).
        chunk_tokens: Tokens per chunk, special tokens included.
        max_chunks_per_section: Chunks kept per text (``None``: all).
        chunk_embeddings: Chunk ids embedded.
        augmentation: Section and chunk embeddings are added to the input embeddings.
        aggregation: ``"lstm"`` or ``"mean"``.
        num_sections: Section ids embedded (the method's ``num_sections``).
        num_heads: Heads of the chunkwise attention.
        lstm_output_size: Bi-LSTM output size, both directions.
        chunk_token_budget: Chunks encoded per sub-batch, in padded tokens.
        head_init: The method's ``head_init`` (``"identity"``: the chunks' mean plus the Bi-LSTM branch).
        colde_weights: Weights besides the chunk encoder (``None``: read ``colde.safetensors`` from beside
            ``chunk_encoder``).
    """

    config_keys: ClassVar[list[str]] = ["pooling", "chunk_tokens", "max_chunks_per_section", "chunk_embeddings",
                                        "augmentation", "aggregation", "num_sections", "num_heads",
                                        "lstm_output_size", "chunk_token_budget", "head_init"]
    encoder_folder = "chunk_encoder"
    weights_file = "colde.safetensors"

    def __init__(self, chunk_encoder: str, pooling: str = "cls", chunk_tokens: int = 512,
                 max_chunks_per_section: int | None = None, chunk_embeddings: int = 512, augmentation: bool = True,
                 aggregation: str = "lstm", num_sections: int = 2, num_heads: int = 4, lstm_output_size: int = 512,
                 chunk_token_budget: int = 16384, head_init: str = "random",
                 colde_weights: dict[str, Tensor] | None = None) -> None:
        super().__init__()
        self.pooling, self.chunk_tokens, self.max_chunks_per_section = pooling, chunk_tokens, max_chunks_per_section
        self.chunk_embeddings, self.augmentation, self.aggregation = chunk_embeddings, augmentation, aggregation
        self.num_sections, self.num_heads, self.lstm_output_size = num_sections, num_heads, lstm_output_size
        self.chunk_token_budget, self.head_init = chunk_token_budget, head_init
        self.tokenizer, encoder = tokenizer_and_encoder(chunk_encoder, pretrained=True, pooling=pooling)
        self.model = CoLDEEncoder(encoder, augmentation, aggregation, num_sections, chunk_embeddings, num_heads,
                                  lstm_output_size, None, chunk_token_budget, head_init)
        self.load_aggregation(chunk_encoder, colde_weights)
        self.collator = SectionChunkCollator(self.tokenizer, 1, chunk_tokens, max_chunks_per_section)

    @staticmethod
    def aggregation_weights(model: nn.Module) -> dict[str, Tensor]:
        """CoLDE's data encoder besides its chunk encoder, without the projection (not used to embed)."""
        return {k: v for k, v in AggregatingModule.aggregation_weights(model).items()
                if not k.startswith("projection.")}

    def preprocess(self, inputs: Sequence[str], prompt: str | None = None, **kwargs) -> dict[str, Any]:
        """Texts -> their chunks (C, T) with section and chunk ids (C,) and chunks per text (G,)."""
        texts = [(prompt or "") + text for text in inputs]
        documents = [Document(str(i), sections=[Section("", text)]) for i, text in enumerate(texts)]
        batch = self.collator.batch(self.collator.rows(documents), [0] * len(documents))
        if batch.skipped:
            empty = sorted(set(range(len(texts))) - {int(i) for i in batch.ids})
            raise ValueError(f"CoLDE cannot represent a text without tokens (inputs {empty} of this batch)")
        sections = batch.sections
        return {"input_ids": sections.chunks.input_ids, "attention_mask": sections.chunks.attention_mask,
                "section_ids": sections.section_ids, "chunk_ids": sections.chunk_ids,
                "chunks_per_section": sections.chunks_per_section}

    def forward(self, features: dict[str, Any], **kwargs) -> dict[str, Any]:
        sections = SectionChunks(TokenBatch(features["input_ids"], features["attention_mask"]),
                                 features["section_ids"], features["chunk_ids"], features["chunks_per_section"])
        features["sentence_embedding"] = self.model(sections, [1] * len(sections)).sections  # (G, D_f)
        return features

    def get_embedding_dimension(self) -> int:
        return self.model.output_size

    get_sentence_embedding_dimension = get_embedding_dimension




@register_export(CoLDE)
class CoLDEExport(MethodExport):
    """CoLDE: the chunk encoder in ``hf`` form (without the section/chunk embeddings, which sit outside it);
    :class:`CoLDEDocumentModule` for sentence-transformers."""

    def token_encoder(self) -> tuple[HFEncoder, Any]:
        return self.method.model.encoder, self.method.tokenizer

    def sentence_transformer_modules(self, scratch: Path) -> list[nn.Module]:
        hp = self.method.hparams
        folder = self.save_hf(scratch / "chunk_encoder")
        return [CoLDEDocumentModule(str(folder), hp.pooling, hp.chunk_tokens, hp.max_chunks_per_section,
                                    hp.chunk_embeddings, hp.augmentation, hp.aggregation, hp.num_sections,
                                    hp.num_heads, hp.lstm_output_size, hp.chunk_token_budget,
                                    hp.head_init,
                                    colde_weights=CoLDEDocumentModule.aggregation_weights(self.method.model))]


def export_method(method: EmbeddingMethod, output_dir: str | Path, output_format: str = "sentence-transformers") -> Path:
    """Writes ``method`` to ``output_dir`` in ``"hf"`` or ``"sentence-transformers"`` form."""
    if output_format not in ("hf", "sentence-transformers"):
        raise ValueError(f"format must be 'hf' or 'sentence-transformers', got {output_format!r}")
    export_ = exporter(method)
    method.eval()
    with quiet_transformers_loading():  # its save bars and the report of the unused pooler it leaves out
        folder = export_.save_hf(output_dir) if output_format == "hf" else export_.save_sentence_transformer(output_dir)
    follow_umask(folder)
    return folder


def follow_umask(folder: str | Path) -> None:
    """Adds to the files and folders under ``folder`` the permissions the process umask allows (``0o666`` for a
    file, ``0o777`` for a folder, less the umask), as every other output has: a writer that stages through
    ``tempfile.mkstemp`` (the ``model.safetensors`` of an export) leaves a private ``0o600`` file otherwise."""
    mask = current_umask()
    for path in [Path(folder), *Path(folder).rglob("*")]:
        if not path.is_symlink():
            allowed = (0o777 if path.is_dir() else 0o666) & ~mask
            path.chmod(path.stat().st_mode & 0o7777 | allowed)
