"""How Graph-RoBERTa reads a document, as one typed config block: ``model.init_args.passages``.

A document becomes passages of about ``words_per_passage`` words (:func:`~lit_docemb.data.core.text.chunk_passages`),
each tokenized to at most ``max_passage_tokens`` tokens, the first ``max_passages`` of them in training and
``max_passages_inference`` when embedding, joined by the ``graph``'s edges. The passage cache
(:class:`~lit_docemb.data.caches.passage_cache.PassageCache`), the graph builder
(:class:`~lit_docemb.views.graph_roberta.PassageGraphBuilder`), the method
(:class:`~lit_docemb.methods.GraphRoBERTa`) and the exported model
(:class:`~lit_docemb.export.modules.GraphDocumentModule`, whose ``config.json`` holds the block) all read the one
:class:`PassageSpec`, so each setting is written, documented and checked here once::

    model:
      class_path: lit_docemb.methods.GraphRoBERTa
      init_args:
        encoder: {name: roberta-base}
        passages:
          words_per_passage: 100
          max_passages: 50
          graph: full

jsonargparse reads the block as the class's arguments (``class_path`` may be left out) and a command line overrides
one of them as ``--model.init_args.passages.words_per_passage 6``; a bad value is one error line naming
``model.init_args.passages.<key>``. How the passages are encoded (``passage_token_budget``, ``bucket_passages``) and
where they are cached stay the method's own arguments: they change the cost, never the passages.
"""

from __future__ import annotations

from typing import Literal

from lit_docemb.config_block import ConfigBlock
from lit_docemb.errors import require

GraphType = Literal["full", "section"]


class PassageSpec(ConfigBlock):
    """How a document becomes Graph-RoBERTa's passages and their graph (seed paper 000, §2.1 and §3.1).

    Args:
        words_per_passage: Passage size in words (paper: about 100).
        max_passage_tokens: Tokens kept per passage, special tokens included (the passage encoder must hold them).
        max_passages: Passages kept per document in training (paper: 50); at least 2, to split a document in two.
        max_passages_inference: Passages kept per document when embedding (paper: 100), in validation, test,
            predict and the exported model.
        title_passage: A document's title, when it has one (Hyperpartisan's headlines, MSMARCO's, Robust04's), is
            its first passage, as the plain encoder reads a title before the body. The paper does not say that
            titles are encoded; ``False`` embeds the body only (the MSMARCO and Robust04 configs keep that). On a
            Hyperpartisan fold, the untrained graph fine-tuned for 60 steps without the headlines labelled 4.7 points
            fewer articles than the plain encoder, which reads them, and 3.1 more with them (docs/real-text.md).
        graph: ``"full"``: all nodes connected (the paper's default); ``"section"``: passages of a section
            connected, the document node with the first passage of each section.
    """

    key = "passages"
    class_path = "lit_docemb.data.PassageSpec"

    def __init__(self, words_per_passage: int = 100, max_passage_tokens: int = 192, max_passages: int = 50,
                 max_passages_inference: int = 100, title_passage: bool = True, graph: GraphType = "full") -> None:
        require(words_per_passage >= 1, self.key_of("words_per_passage"), ">= 1", words_per_passage)
        require(max_passage_tokens >= 1, self.key_of("max_passage_tokens"), ">= 1", max_passage_tokens)
        require(max_passages >= 2, self.key_of("max_passages"), ">= 2 to split documents in two", max_passages)
        require(max_passages_inference >= 1, self.key_of("max_passages_inference"), ">= 1", max_passages_inference)
        require(graph in ("full", "section"), self.key_of("graph"), "'full' or 'section'", graph)
        self.words_per_passage, self.max_passage_tokens = words_per_passage, max_passage_tokens
        self.max_passages, self.max_passages_inference = max_passages, max_passages_inference
        self.title_passage, self.graph = title_passage, graph

    @property
    def most_passages(self) -> int:
        """Passages kept per document in any stage: what the passage cache holds."""
        return max(self.max_passages, self.max_passages_inference)
