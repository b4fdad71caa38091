"""The classical document-embedding baselines of DECA's Tables 3-4 (seed paper 002) and CTPE's Tables 2-3 (seed paper
004) as one method: a representation of :mod:`lit_docemb.models.classical` (TF-IDF, LSA, LDA, word-vector average,
PV-DBOW / PV-DM, random vectors) fitted on the corpus's documents, or the frozen Skip-thoughts release averaged over a
document's sentences; no trainable weight.

There is nothing to train: ``python -m lit_docemb evaluate`` (no ``--ckpt_path``) fits it on the documents ``fit``
would train on (:meth:`ClassicalBaseline.prepare`: the DataModule's ``fit_set``, every document read with a labelled
corpus's ``fit_on: all`` as DECA §4.1 does, "we first use all documents to learn an embedding for each one"; CTPE's
task configs read candidates and test documents together, as CTPE §4.3 trains on "all documents in the dataset"),
then scores it like any method (probe, clustering, candidate ranking, by cosine); ``embed`` fits it on the documents
it is given. ``fit`` refuses it in one line.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import numpy as np
import torch
from scipy import sparse
from torch import Tensor

from lit_docemb.data.core.batches import WordListBatch
from lit_docemb.data.core.document import Document
from lit_docemb.errors import ConfigError
from lit_docemb.methods.base import EmbeddingMethod
from lit_docemb.models.classical import DocumentRepresentation, TfIdf
from lit_docemb.views.classical import WordListCollator, document_key, document_units

log = logging.getLogger(__name__)

NOTHING_TO_TRAIN = ("ClassicalBaseline has no trainable weight (a representation fitted on the corpus's documents): "
                    "score it with python -m lit_docemb evaluate --config <dataset config> --config "
                    "configs/baselines/classical/<baseline>.yaml (no --ckpt_path)")


class ClassicalBaseline(EmbeddingMethod):
    """A classical document representation fitted on the corpus (see the module docstring).

    Args:
        representation: What represents a document (:mod:`lit_docemb.models.classical`): ``TfIdf`` (default),
            ``LatentSemanticAnalysis``, ``LatentDirichletAllocation``, ``WordVectorAverage``, ``ParagraphVectors``,
            ``RandomVectors`` or ``SkipThoughtAverage``, as ``{class_path, init_args}``.
    """

    def __init__(self, representation: DocumentRepresentation | None = None) -> None:
        super().__init__()
        self.representation = representation if representation is not None else TfIdf()
        self.representation_module = self.representation.module  # frozen (Skip-thoughts): moves with the method
        self.fitted_documents = 0

    def prepare(self, train_documents: Sequence[Document], val_documents: Sequence[Document] = ()) -> None:
        """Fits the representation on ``train_documents`` (the validation documents are not used: the papers fit on
        the whole corpus through ``train_documents``)."""
        documents = [train_documents[i] for i in range(len(train_documents))]
        units = [document_units(d, self.representation.unit) for d in documents]
        self.representation.fit(units, [document_key(d.id, u) for d, u in zip(documents, units)])
        self.fitted_documents = len(documents)
        log.info("%s fitted on %d documents", type(self.representation).__name__, len(documents))

    def setup(self, stage: str) -> None:
        if stage == "fit":
            raise ConfigError(NOTHING_TO_TRAIN)
        super().setup(stage)

    def collator(self, stage: str) -> WordListCollator:
        if not self.representation.fitted:
            raise ConfigError(f"ClassicalBaseline: the {type(self.representation).__name__} representation is fitted "
                              "on a corpus before it embeds: python -m lit_docemb evaluate fits it on the documents "
                              "of a labelled or JSONL DataModule (not a ranking DataModule, which evaluate does not "
                              "set up) and embed on its --input")
        return WordListCollator(self.representation.unit)

    def losses(self, batch: WordListBatch) -> dict[str, Tensor]:
        raise ConfigError(NOTHING_TO_TRAIN)

    def document_matrix(self, documents: Sequence[Document]) -> np.ndarray | sparse.csr_matrix:
        """(N, D) representations of ``documents`` in order, all at once, as the probe and k-means read them: sparse
        for a sparse representation (TF-IDF: a CSR matrix, where :meth:`embed`'s dense rows of 20news's whole corpus
        would take gigabytes), dense otherwise (:meth:`~lit_docemb.models.classical.DocumentRepresentation.matrix`)."""
        batch = self.collator("predict")(list(documents))
        return self.representation.matrix(batch.words, batch.keys)

    def embed(self, batch: WordListBatch) -> Tensor:
        """(B, D) float32 representations, on the method's device."""
        vectors = self.representation.transform(batch.words, batch.keys)  # (B, D)
        return torch.from_numpy(vectors).to(self.device)
