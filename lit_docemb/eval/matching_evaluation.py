"""Document matching (:func:`lit_docemb.eval.matching.evaluate_pairs`) as one more
:class:`~lit_docemb.eval.evaluation.Evaluation`. A module of its own: :mod:`lit_docemb.eval.matching` is imported
by a method (CoLDE), so it cannot import the evaluation base, which imports the methods."""

from __future__ import annotations

from typing import Literal

from lit_docemb.eval.evaluation import Evaluation, EvaluationContext
from lit_docemb.eval.matching import Criterion, evaluate_pairs


class DocumentMatching(Evaluation):
    """``matching/threshold/<metric>`` (cosine threshold chosen on validation, CoLDE Table 2) and
    ``matching/classifier/<metric>`` (a pair classifier on the frozen embeddings, the Long Range Arena protocol)
    on a DataModule of labelled pairs (``AANDataModule`` in ``mode: pairs``): ``python -m lit_docemb evaluate
    --evaluation matching``, or under ``trainer.callbacks``.

    Args:
        classifier: Pair classifier: ``"logistic"`` or ``"mlp"``.
        criterion: What the validation threshold maximises: ``"f1"`` or ``"accuracy"``.
        **kwargs: See :class:`~lit_docemb.eval.evaluation.Evaluation`.
    """

    name = "matching"

    def __init__(self, classifier: Literal["logistic", "mlp"] = "logistic", criterion: Criterion = "f1",
                 **kwargs) -> None:
        super().__init__(**kwargs)
        if classifier not in ("logistic", "mlp") or criterion not in ("f1", "accuracy"):
            raise ValueError(f"classifier must be logistic|mlp and criterion f1|accuracy, got {classifier}, {criterion}")
        self.classifier, self.criterion = classifier, criterion

    def evaluate(self, context: EvaluationContext) -> dict[str, float]:
        metrics = evaluate_pairs(context.method, context.data, self.batch_size, self.classifier, self.criterion)
        return {f"matching/{k}": v for k, v in metrics.items()}
