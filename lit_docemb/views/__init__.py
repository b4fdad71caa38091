"""Floor 2: collators and view builders, one module per method (``docsplit``, ``graph_roberta``, ``deca``, ``colde``,
``ctpe``, ``classifier``, ``dense_retrieval``) and ``common``. Documents in, a typed batch (``lit_docemb.data.core.batches``)
out; CPU-only and picklable, so they run in dataloader workers. They define and import no ``nn.Module``: what builds a
model (CTPE's input models and the tokenizers they share with its collators) is in ``lit_docemb.models``."""
