from lit_docemb.methods.base import EmbeddingMethod
from lit_docemb.methods.classical import ClassicalBaseline
from lit_docemb.methods.classifier import DocumentClassifier
from lit_docemb.methods.colde import CoLDE
from lit_docemb.methods.ctpe import CTPE
from lit_docemb.methods.deca import DECA
from lit_docemb.methods.dense_retrieval import DenseRetrieval
from lit_docemb.methods.docsplit import DocSplit
from lit_docemb.methods.graph_roberta import GraphRoBERTa
from lit_docemb.methods.masked_language_modelling import MaskedLanguageModelling
from lit_docemb.methods.schedulers import LinearWarmupDecay
from lit_docemb.methods.simcse import SimCSE
# CTPE's input models (floor 1), re-exported so that run folders written as lit_docemb.methods.<name> load; configs
# write lit_docemb.models.ctpe.<name> (docs/architecture.md, "Class paths in configs").
from lit_docemb.models.ctpe import ElmoTokens, SkipThoughtSentences, TransformerTokens, WordEmbeddings

__all__ = [
           "CTPE",
           "ClassicalBaseline",
           "DECA",
           "CoLDE",
           "DenseRetrieval",
           "DocSplit",
           "DocumentClassifier",
           "ElmoTokens",
           "EmbeddingMethod",
           "GraphRoBERTa",
           "LinearWarmupDecay",
           "MaskedLanguageModelling",
           "SimCSE",
           "SkipThoughtSentences",
           "TransformerTokens",
           "WordEmbeddings",
]
