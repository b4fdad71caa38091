from lit_docemb.methods.base import EmbeddingMethod, LinearWarmupDecay
from lit_docemb.methods.docsplit import DocSplit

__all__ = ["DocSplit", "EmbeddingMethod", "LinearWarmupDecay"]
