from lit_docemb.models.encoder import HFEncoder, pool, resolve_model_path

__all__ = ["HFEncoder", "pool", "resolve_model_path"]
