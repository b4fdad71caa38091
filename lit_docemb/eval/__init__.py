from lit_docemb.eval.callbacks import HeldOutRetrieval
from lit_docemb.eval.candidates import CandidateRanking, evaluate_candidates, evaluate_checkpoint
from lit_docemb.eval.heldout import evaluate_heldout
from lit_docemb.eval.matching import classifier_matching, threshold_matching
from lit_docemb.eval.ranking import ranking_metrics, top_k_run

__all__ = ["CandidateRanking", "HeldOutRetrieval", "classifier_matching", "evaluate_candidates", "evaluate_checkpoint",
           "evaluate_heldout", "ranking_metrics", "threshold_matching", "top_k_run"]
