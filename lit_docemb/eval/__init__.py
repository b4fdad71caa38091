from lit_docemb.eval.callbacks import HeldOutRetrieval
from lit_docemb.eval.heldout import evaluate_heldout

__all__ = ["HeldOutRetrieval", "evaluate_heldout"]
