from lit_docemb.methods.base import EmbeddingMethod, LinearWarmupDecay
from lit_docemb.methods.ctpe import CTPE
from lit_docemb.methods.ctpe_text import TransformerTokens, WordEmbeddings
from lit_docemb.methods.docsplit import DocSplit

__all__ = ["CTPE", "DocSplit", "EmbeddingMethod", "LinearWarmupDecay", "TransformerTokens", "WordEmbeddings"]
