"""What every corpus and method shares: the :class:`~lit_docemb.data.core.document.Document` record, typed batches,
the base DataModule, exact-once sampling, batch buffers, reading primitives and Arrow tables, text and token helpers."""
