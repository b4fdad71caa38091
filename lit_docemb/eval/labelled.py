"""Evaluations of frozen embeddings with labels (:mod:`lit_docemb.eval.classification`) on a labelled DataModule:
k-means clustering (Graph-RoBERTa Table 1, DECA Table 4), the linear probe (DECA Tables 3/5, DocSplit Table 1's
training-free reading), few-shot probes (a logistic regression on k embeddings per class: not DocSplit Table 2's
protocol, which trains Table 1's classifier on k documents per class, ``grids/docsplit_table2_few_shot.yaml``), and
DECA's probe + clustering at the end of ``fit``.

Which documents: with ``evaluate_on="test"`` the fit set is the DataModule's training and validation documents
and the evaluated set its test split (a :class:`~lit_docemb.data.LabelledTextDataModule` with one); with
``"val"``, the training documents and the validation documents (a split by id hash, no test set needed).
"""

from __future__ import annotations

from typing import Literal

import lightning as L

from lit_docemb.data.core.contract import EvaluationData
from lit_docemb.data.core.document import Document
from lit_docemb.data.core.datamodule import documents_at
from lit_docemb.eval.classification import (
    few_shot_probe,
    kmeans_clustering,
    linear_probe,
)
from lit_docemb.eval.embedding import embed_documents
from lit_docemb.eval.evaluation import Evaluation, EvaluationContext

EvaluateOn = Literal["test", "val"]


def evaluate_labelled(module: L.LightningModule, train: list[Document], test: list[Document], batch_size: int = 256,
                      c: float = 1.0, seed: int = 0) -> dict[str, float]:
    """``probe/{accuracy,error_rate,macro_f1}`` of a logistic regression fitted on the embeddings of ``train``
    and scored on ``test``, and ``cluster/{nmi,purity}`` of k-means (k = number of labels) fitted on ``train``
    and applied to ``test`` (:mod:`lit_docemb.eval.classification`). Documents without a label are an error."""
    _check_labelled(train, test)
    train_x, test_x = embed_documents(module, train, batch_size), embed_documents(module, test, batch_size)
    train_y, test_y = [d.label for d in train], [d.label for d in test]
    metrics = {f"probe/{k}": v for k, v in linear_probe(train_x, train_y, test_x, test_y, c=c).items()}
    metrics |= {f"cluster/{k}": v for k, v in kmeans_clustering(train_x, train_y, test_x, test_y, seed=seed).items()}
    return metrics


def _check_labelled(train: list[Document], test: list[Document]) -> None:
    for name, docs in (("train", train), ("test", test)):
        unlabelled = sum(d.label is None for d in docs)
        if not docs or unlabelled:
            raise ValueError(f"the {name} documents must be labelled and non-empty ({len(docs)} documents, "
                             f"{unlabelled} without a label)")


def _documents(datasets, corpus, max_documents: int | None) -> list[Document]:
    """The splits' documents in order (the corpus's behind a method's cached rows), the first ``max_documents``."""
    docs = [doc for d in datasets if d is not None for doc in documents_at(d, range(len(d)), corpus)]
    return docs[:max_documents] if max_documents is not None else docs


def labelled_documents(data: EvaluationData, evaluate_on: EvaluateOn = "test",
                       max_documents: int | None = None) -> tuple[list[Document], list[Document]]:
    """(fit documents, evaluated documents) of a labelled DataModule (see the module docstring), each cut to
    ``max_documents``; missing splits and unlabelled documents are errors."""
    if evaluate_on == "test":
        if data.test_set is None:
            raise ValueError(f"evaluating on 'test' needs a DataModule with a labelled test split (test_set), got "
                             f"{type(data).__name__} without one; use evaluate_on: val")
        fit, evaluated = (data.train_set, data.val_set), (data.test_set,)
    elif evaluate_on == "val":
        fit, evaluated = (data.train_set,), (data.val_set,)
    else:
        raise ValueError(f"evaluate_on must be 'test' or 'val', got {evaluate_on!r}")
    corpus = data.documents
    train, test = _documents(fit, corpus, max_documents), _documents(evaluated, corpus, max_documents)
    _check_labelled(train, test)
    return train, test


class _LabelledEvaluation(Evaluation):
    """Shared arguments and embeddings of the labelled evaluations.

    Args:
        evaluate_on: ``"test"`` or ``"val"`` (see the module docstring).
        max_documents: Use at most this many fit and this many evaluated documents (None: all).
        **kwargs: See :class:`~lit_docemb.eval.evaluation.Evaluation`.
    """

    def __init__(self, evaluate_on: EvaluateOn = "test", max_documents: int | None = None, **kwargs) -> None:
        super().__init__(**kwargs)
        if max_documents is not None and max_documents < 2:
            raise ValueError(f"max_documents must be >= 2 or null, got {max_documents}")
        self.evaluate_on, self.max_documents = evaluate_on, max_documents

    def embeddings(self, context: EvaluationContext):
        """(train x, train labels, test x, test labels), the context's features (embeddings, or a classical
        baseline's sparse matrix) shared through it."""
        train, test = labelled_documents(context.data, self.evaluate_on, self.max_documents)
        key = f"labelled/{self.evaluate_on}/{self.max_documents}"
        return (context.features(f"{key}/fit", train), [d.label for d in train],
                context.features(f"{key}/evaluated", test), [d.label for d in test])


class Clustering(_LabelledEvaluation):
    """``cluster/nmi`` and ``cluster/purity`` of k-means (k = number of training labels unless given) fitted on
    the fit embeddings and applied to the evaluated ones.

    Args:
        num_clusters: k; None: the number of distinct training labels.
        seed: Seed of k-means.
        n_init: k-means restarts.
        **kwargs: See :class:`_LabelledEvaluation`.
    """

    name = "clustering"

    def __init__(self, num_clusters: int | None = None, seed: int = 0, n_init: int = 10, **kwargs) -> None:
        super().__init__(**kwargs)
        self.num_clusters, self.seed, self.n_init = num_clusters, seed, n_init

    def evaluate(self, context: EvaluationContext) -> dict[str, float]:
        scores = kmeans_clustering(*self.embeddings(context), self.num_clusters, self.seed, self.n_init)
        return {f"cluster/{k}": v for k, v in scores.items()}


class LinearProbe(_LabelledEvaluation):
    """``probe/accuracy``, ``probe/error_rate``, ``probe/macro_f1`` of a logistic regression on the fit embeddings.

    Args:
        c: Inverse regularisation strength.
        **kwargs: See :class:`_LabelledEvaluation`.
    """

    name = "linear_probe"

    def __init__(self, c: float = 1.0, **kwargs) -> None:
        super().__init__(**kwargs)
        self.c = c

    def evaluate(self, context: EvaluationContext) -> dict[str, float]:
        return {f"probe/{k}": v for k, v in linear_probe(*self.embeddings(context), c=self.c).items()}


class FewShot(_LabelledEvaluation):
    """The linear probe on ``k`` fit examples per class, ``repetitions`` draws: ``few_shot_<k>/accuracy_mean``,
    ``.../accuracy_std``, ``.../macro_f1_mean``, ``.../macro_f1_std`` for every k of ``shots``. A probe: DocSplit
    Table 2 trains its classifier on the k examples instead (``grids/docsplit_table2_few_shot.yaml``).

    Args:
        shots: Examples per class, one result group each.
        repetitions: Draws per k (DocSplit: 10).
        seed: Seed of the draws.
        **kwargs: See :class:`_LabelledEvaluation`.
    """

    name = "few_shot"

    def __init__(self, shots: list[int] | None = None, repetitions: int = 10, seed: int = 0, **kwargs) -> None:
        super().__init__(**kwargs)
        self.shots = [1, 5, 10] if shots is None else shots
        if not self.shots or min(self.shots) < 1 or repetitions < 1:
            raise ValueError(f"need shots >= 1 and repetitions >= 1, got {self.shots}, {repetitions}")
        self.repetitions, self.seed = repetitions, seed

    def evaluate(self, context: EvaluationContext) -> dict[str, float]:
        train, train_y, test, test_y = self.embeddings(context)
        metrics = {}
        for k in self.shots:
            scores = few_shot_probe(train, train_y, test, test_y, k, self.repetitions, self.seed)
            metrics |= {f"few_shot_{k}/{name}": v for name, v in scores.items()}
        return metrics


class LabelledEmbeddingEvaluation(_LabelledEvaluation):
    """DECA's evaluation (Tables 3-5): the linear probe and k-means clustering of :func:`evaluate_labelled` on the
    DataModule's training + validation documents and its test split, once when training ends (logged as
    ``probe/error_rate``, ``cluster/nmi``, ... and kept in :attr:`metrics`).

    Args:
        batch_size: Documents embedded per forward pass.
        max_documents: Use at most this many training and this many test documents (``None``: all).
        c: Inverse regularisation strength of the logistic regression.
        seed: Seed of k-means.
        every_n_epochs: Also run after every n-th epoch (None: only at the end of training).
    """

    name = "labelled"

    def __init__(self, batch_size: int = 256, max_documents: int | None = None, c: float = 1.0, seed: int = 0,
                 every_n_epochs: int | None = None) -> None:
        super().__init__(evaluate_on="test", max_documents=max_documents, every_n_epochs=every_n_epochs,
                         at_train_end=True, batch_size=batch_size)
        self.c, self.seed = c, seed

    def evaluate(self, context: EvaluationContext) -> dict[str, float]:
        documents = {"evaluate_on": "test", "max_documents": self.max_documents}
        probe = LinearProbe(c=self.c, **documents).evaluate(context)
        return probe | Clustering(seed=self.seed, **documents).evaluate(context)
