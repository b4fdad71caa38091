from lit_docemb.models.doc2vecc import Doc2VecC
from lit_docemb.models.encoder import HFEncoder, load_tokenizer, pool, resolve_model_path, tokenizer_and_encoder
from lit_docemb.models.encoder_spec import EncoderSpec

__all__ = ["Doc2VecC", "EncoderSpec", "HFEncoder", "load_tokenizer", "pool", "resolve_model_path",
           "tokenizer_and_encoder"]
