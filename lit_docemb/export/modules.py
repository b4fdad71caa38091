"""The ``nn.Module``s that a sentence-transformers export of a long-document method names by class path in its
``modules.json``: :class:`GraphDocumentModule` (Graph-RoBERTa) and :class:`CoLDEDocumentModule` (CoLDE), each a
Hugging Face token encoder plus the method's aggregation (:class:`AggregatingModule`). They are classes of the
installed package (nothing is read from the folder as code); ``SentenceTransformer(folder, trust_remote_code=True)``
loads them. The forms that write them: :mod:`lit_docemb.export.forms`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

from safetensors.torch import load_file, save_file
from torch import Tensor, nn

from lit_docemb.data.core.batches import PassageGraphBatch, SectionChunks, TokenBatch
from lit_docemb.data.core.document import Document, Section
from lit_docemb.data.core.passage_spec import PassageSpec
from lit_docemb.models.colde import CoLDEEncoder
from lit_docemb.models.encoder import tokenizer_and_encoder
from lit_docemb.models.graph_document import GraphDocumentEncoder
from lit_docemb.views.colde import SectionChunkCollator
from lit_docemb.views.graph_roberta import PassageGraphBuilder

try:  # sentence-transformers is optional (pip install -e ".[export]")
    from sentence_transformers.sentence_transformer.modules import InputModule
except ImportError:  # pragma: no cover - exercised only without the extra
    InputModule = nn.Module


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

    def save(self, output_path: str, *args, **kwargs) -> None:
        """Writes the folder ``load`` reads, always as safetensors (sentence-transformers' ``safe_serialization``
        and other keywords it passes to every module are not used)."""
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
        unknown = sorted(set(config) - set(cls.config_keys))
        if unknown:  # read as defaults, they would embed otherwise than the method
            raise ValueError(f"{folder / cls.config_file_name}: keys {unknown} are not {cls.__name__}'s "
                             f"({cls.config_keys}); export the run again with this version of lit_docemb")
        return cls(str(folder / cls.encoder_folder), **{k: config[k] for k in cls.config_keys if k in config})


# --- Graph-RoBERTa: passages -> graph ------------------------------------------------------------------------
class GraphDocumentModule(AggregatingModule):
    """A sentence-transformers input module running Graph-RoBERTa's document model on a whole text: the text is
    split into passages as the method's ``passages`` block says (:class:`~lit_docemb.data.core.passage_spec.
    PassageSpec`, up to its ``max_passages_inference``), each passage is tokenized and encoded,
    and the graph attention layers give the document node (:class:`~lit_docemb.models.graph_document.
    GraphDocumentEncoder`), for a text of one passage too. ``encode_query`` embeds each text as the method embeds
    its queries, a single-node graph (§3.3: its initial node, no graph layers). Saved as ``config.json`` (the
    ``passages`` block as plain data among the other arguments), ``graph.safetensors`` (projection and graph layers)
    and ``passage_encoder/`` (a Hugging Face folder with its tokenizer).

    Args:
        passage_encoder: Folder of the Hugging Face passage encoder and tokenizer.
        pooling: Passage vector from ``"cls"`` or ``"mean"`` (the method's ``pooling``).
        node_dim: Size of the nodes.
        num_graph_layers: Graph attention layers.
        num_heads: Heads per graph layer.
        passages: The method's passage spec, or its arguments as a dict (a text is one untitled section, so both
            graphs connect its passages alike and ``title_passage`` adds none).
        passage_token_budget: Passages encoded per sub-batch, in padded tokens.
        head_init: The method's ``head_init`` (``"identity"``: passage nodes without ``tanh``).
        graph_weights: Weights of the projection and graph layers (``None``: read ``graph.safetensors`` from
            beside ``passage_encoder``).
    """

    config_keys: ClassVar[list[str]] = ["pooling", "node_dim", "num_graph_layers", "num_heads", "passages",
                                        "passage_token_budget", "head_init"]
    encoder_folder = "passage_encoder"
    weights_file = "graph.safetensors"

    def __init__(self, passage_encoder: str, pooling: str = "cls", node_dim: int = 512, num_graph_layers: int = 2,
                 num_heads: int = 2, passages: PassageSpec | dict | None = None, passage_token_budget: int = 32768,
                 head_init: str = "random", graph_weights: dict[str, Tensor] | None = None) -> None:
        super().__init__()
        self.pooling, self.node_dim, self.num_graph_layers, self.num_heads = pooling, node_dim, num_graph_layers, \
            num_heads
        self.spec = PassageSpec.of(passages or {})
        self.passages = self.spec.arguments()  # config.json's plain form
        self.passage_token_budget, self.head_init = passage_token_budget, head_init
        self.tokenizer, encoder = tokenizer_and_encoder(passage_encoder, pretrained=True, pooling=pooling)
        self.model = GraphDocumentEncoder(encoder, node_dim, num_graph_layers, num_heads, 0.0, passage_token_budget,
                                          head_init=head_init)
        self.load_aggregation(passage_encoder, graph_weights)
        self.builder = PassageGraphBuilder(self.tokenizer, self.spec)

    def preprocess(self, inputs: Sequence[str], prompt: str | None = None, task: str | None = None,
                   **kwargs) -> dict[str, Any]:
        """Texts -> their passage graphs: passage tokens (P, T), passages per text (G,), each text's edges, and
        whether they are queries: with ``task="query"`` (sentence-transformers' ``encode_query``) each text is a
        single-node graph, its initial node (§3.3); otherwise (``encode``, ``encode_document``) a document graph."""
        texts = [(prompt or "") + text for text in inputs]
        documents = [Document(str(i), sections=[Section("", text)]) for i, text in enumerate(texts)]
        graphs = self.builder(self.builder.passages(documents, self.spec.max_passages_inference),
                              [task == "query"] * len(texts))
        return {"input_ids": graphs.passages.input_ids, "attention_mask": graphs.passages.attention_mask,
                "passage_counts": graphs.passage_counts, "edges": graphs.edges, "is_query": graphs.is_query}

    def forward(self, features: dict[str, Any], **kwargs) -> dict[str, Any]:
        graphs = PassageGraphBatch(TokenBatch(features["input_ids"], features["attention_mask"]),
                                   features["passage_counts"], features["edges"], features.get("is_query"))
        features["sentence_embedding"] = self.model(graphs)  # (G, node_dim)
        return features

    def get_embedding_dimension(self) -> int:
        return self.node_dim

    get_sentence_embedding_dimension = get_embedding_dimension


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
