from lit_docemb.eval.before_after import BeforeAfterReport
from lit_docemb.eval.candidates import CandidateRanking, evaluate_candidates
from lit_docemb.eval.evaluation import Evaluation, EvaluationContext, markdown_table
from lit_docemb.eval.heldout import HeldOutRetrieval, evaluate_heldout
from lit_docemb.eval.labelled import (
           Clustering,
           FewShot,
           LabelledEmbeddingEvaluation,
           LinearProbe,
)
from lit_docemb.eval.matching import classifier_matching, threshold_matching
from lit_docemb.eval.ranking import ranking_metrics, retrieval_metrics, top_k_run
from lit_docemb.eval.retrieval import RetrievalEvaluation

__all__ = ["BeforeAfterReport", "CandidateRanking", "Clustering", "Evaluation", "EvaluationContext", "FewShot", "HeldOutRetrieval",
           "LabelledEmbeddingEvaluation", "LinearProbe", "RetrievalEvaluation", "classifier_matching",
           "evaluate_candidates", "evaluate_heldout", "markdown_table", "ranking_metrics",
           "retrieval_metrics", "threshold_matching", "top_k_run"]
