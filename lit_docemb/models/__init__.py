from lit_docemb.models.encoder import HFEncoder, pool

__all__ = ["HFEncoder", "pool"]
