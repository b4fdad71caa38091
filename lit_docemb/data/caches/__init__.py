"""Per-method caches on disk: passages, sentences, sections and fields tokenized once per corpus × tokenizer."""
