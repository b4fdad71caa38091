"""Old import paths that the re-layering into floors (``docs/architecture.md``) moved: each still imports,
with a ``DeprecationWarning`` naming the new place, so configs, run folders and code written against the old
layout keep working. They go in the release after next.

A moved module is served by a finder at the end of ``sys.meta_path`` (installed by ``lit_docemb/__init__.py``;
it is consulted only when no real module has the name). A module that still exists but lost some names gives
them through ``__getattr__ = moved_attribute(__name__)``.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import types
import warnings

#: Old module -> the module that now holds what it held.
MOVED_MODULES = {
    "lit_docemb.losses.distributed": "lit_docemb.distributed",
    "lit_docemb.methods.collate": "lit_docemb.data.tokens",
    "lit_docemb.eval.bm25": "lit_docemb.data.bm25",
    "lit_docemb.methods.colde_collate": "lit_docemb.views.colde",
    "lit_docemb.methods.ctpe_collate": "lit_docemb.views.ctpe",
    "lit_docemb.methods.ctpe_sampling": "lit_docemb.views.ctpe",
    "lit_docemb.methods.ctpe_text": "lit_docemb.views.ctpe",
    "lit_docemb.methods.deca_collate": "lit_docemb.views.deca",
    "lit_docemb.callbacks": "lit_docemb.methods.callbacks",
    "lit_docemb.guards": "lit_docemb.methods.guards",
    "lit_docemb.cli": "lit_docemb.commands.cli",
    "lit_docemb.loggers": "lit_docemb.commands.loggers",
    "lit_docemb.embed": "lit_docemb.commands.embed",
    "lit_docemb.export": "lit_docemb.commands.export",
    "lit_docemb.figures": "lit_docemb.commands.figures",
    "lit_docemb.slurm": "lit_docemb.commands.slurm",
    "lit_docemb.eval.evaluate": "lit_docemb.commands.evaluate",
    "lit_docemb.eval.labelled_probe": "lit_docemb.eval.labelled",
    "lit_docemb.eval.dense_search": "lit_docemb.eval.embedding",
    "lit_docemb.eval.callbacks": "lit_docemb.eval.heldout",
    "lit_docemb.eval.matching_evaluation": "lit_docemb.eval.matching",
}

#: Old module -> {name -> the module that now holds that name}, where the names went elsewhere.
MOVED_NAMES = {
    "lit_docemb.commands.figures": {
        "attention_heatmap": "lit_docemb.commands.plots",
        "similarity_heatmap": "lit_docemb.commands.plots",
        "similarity_heatmaps": "lit_docemb.commands.plots",
        "project_2d": "lit_docemb.commands.plots",
        "embedding_map": "lit_docemb.commands.plots",
        "read_csv_metrics": "lit_docemb.commands.plots",
        "read_tensorboard_metrics": "lit_docemb.commands.plots",
        "read_wandb_metrics": "lit_docemb.commands.plots",
        "read_run_metrics": "lit_docemb.commands.plots",
        "training_curves": "lit_docemb.commands.plots",
        "log_to_wandb": "lit_docemb.commands.plots",
        "EmbeddingFigures": "lit_docemb.commands.plots",
        "read_embeddings": "lit_docemb.commands.plots",
        "model_figures": "lit_docemb.commands.plots",
    },
    "lit_docemb.commands.export": {
        "ExportError": "lit_docemb.commands.exporters",
        "MethodExport": "lit_docemb.commands.exporters",
        "register_export": "lit_docemb.commands.exporters",
        "exporter": "lit_docemb.commands.exporters",
        "FlatEncoderExport": "lit_docemb.commands.exporters",
        "DECAExport": "lit_docemb.commands.exporters",
        "refuse_ctpe": "lit_docemb.commands.exporters",
        "AggregatingModule": "lit_docemb.commands.exporters",
        "GraphDocumentModule": "lit_docemb.commands.exporters",
        "GraphRoBERTaExport": "lit_docemb.commands.exporters",
        "CoLDEDocumentModule": "lit_docemb.commands.exporters",
        "CoLDEExport": "lit_docemb.commands.exporters",
        "EMBED_INSTEAD": "lit_docemb.commands.exporters",
    },
    "lit_docemb.commands.embed": {
        "PositionedDocuments": "lit_docemb.commands.embed_shards",
        "LengthBuckets": "lit_docemb.commands.embed_shards",
        "EmbedDataModule": "lit_docemb.commands.embed_shards",
        "vector_fields": "lit_docemb.commands.embed_shards",
        "ShardWriter": "lit_docemb.commands.embed_shards",
        "merge_shards": "lit_docemb.commands.embed_shards",
        "write_embeddings": "lit_docemb.commands.embed_shards",
    },
    "lit_docemb.eval.dense_search": {
        "main": "lit_docemb.commands.dense_search",
        "rank": "lit_docemb.eval.search",
        "top_k": "lit_docemb.eval.search",
    },
    "lit_docemb.methods.ctpe_collate": {
        "CoupledDocumentBatch": "lit_docemb.data.batches",
        "CoupledPairBatch": "lit_docemb.data.batches",
    },
    "lit_docemb.methods.deca_collate": {
        "Doc2VecCBatch": "lit_docemb.data.batches",
        "Doc2VecCPairBatch": "lit_docemb.data.batches",
        "WordDocumentBatch": "lit_docemb.data.batches",
    },
    "lit_docemb.eval.candidates": {
        "evaluate_checkpoint": "lit_docemb.commands.candidates",
        "main": "lit_docemb.commands.candidates",
    },
    "lit_docemb.eval.matching": {
        "main": "lit_docemb.commands.matching",
    },
    "lit_docemb.methods.classifier": {
        "LabelledCollator": "lit_docemb.views.classifier",
    },
    "lit_docemb.methods.dense_retrieval": {
        "QueryDocumentCollator": "lit_docemb.views.dense_retrieval",
        "query_document": "lit_docemb.views.dense_retrieval",
    },
    "lit_docemb.methods.docsplit": {
        "DocumentCollator": "lit_docemb.views.common",
        "SentenceSplitCollator": "lit_docemb.views.docsplit",
        "doc_index": "lit_docemb.data.document",
    },
    "lit_docemb.methods.grad_cache": {
        "split_rows_by_token_budget": "lit_docemb.data.tokens",
        "split_token_batch": "lit_docemb.data.tokens",
        "take_rows": "lit_docemb.data.tokens",
        "token_lengths": "lit_docemb.data.tokens",
    },
    "lit_docemb.methods.graph_roberta": {
        "GraphDocumentCollator": "lit_docemb.views.graph_roberta",
        "GraphType": "lit_docemb.views.graph_roberta",
        "Objective": "lit_docemb.views.graph_roberta",
        "PassageGraphBuilder": "lit_docemb.views.graph_roberta",
        "SubDocumentCollator": "lit_docemb.views.graph_roberta",
        "TokenPassage": "lit_docemb.views.graph_roberta",
        "concat_graphs": "lit_docemb.views.graph_roberta",
        "select_graphs": "lit_docemb.views.graph_roberta",
        "split_passages": "lit_docemb.views.graph_roberta",
    },
    "lit_docemb.methods.base": {
        "LinearWarmupDecay": "lit_docemb.methods.schedulers",
        "load_method_checkpoint": "lit_docemb.methods.checkpoints",
    },
    "lit_docemb.eval": {"evaluate_checkpoint": "lit_docemb.commands.candidates"},
    "lit_docemb.data.trec": {"bm25_run": "lit_docemb.data.bm25"},
    "lit_docemb.eval.heldout": {"retrieval_metrics": "lit_docemb.eval.heldout:target_rank_metrics"},
}
"""A target ``module:new_name`` serves a name that was also renamed."""


def _new_home(module: str, name: str) -> str | None:
    return MOVED_NAMES.get(module, {}).get(name) or MOVED_MODULES.get(module)


def _resolve(module: str, name: str):
    target = None if name.startswith("__") else _new_home(module, name)
    if target is None:
        raise AttributeError(f"module {module!r} has no attribute {name!r}")
    target, _, new_name = target.partition(":")
    new_name = new_name or name
    try:
        value = getattr(importlib.import_module(target), new_name)
    except AttributeError:
        raise AttributeError(f"module {module!r} has no attribute {name!r}") from None
    warnings.warn(f"{module}.{name} moved to {target}.{new_name}; the old path goes in the release after next",
                  DeprecationWarning, stacklevel=3)
    return value


def moved_attribute(module: str):
    """A module ``__getattr__`` that serves the names :data:`MOVED_NAMES` lists for ``module``."""
    def __getattr__(name: str):
        if name in MOVED_NAMES.get(module, {}):
            return _resolve(module, name)
        raise AttributeError(f"module {module!r} has no attribute {name!r}")
    return __getattr__


class _MovedModuleFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, fullname, path=None, target=None):
        if fullname in MOVED_MODULES:
            return importlib.machinery.ModuleSpec(fullname, self)
        return None

    def create_module(self, spec):
        module = types.ModuleType(spec.name, f"Moved to {MOVED_MODULES[spec.name]}.")
        module.__getattr__ = lambda name: _resolve(spec.name, name)
        return module

    def exec_module(self, module) -> None:
        """Nothing to run: the module built by :meth:`create_module` resolves every name on access."""


def install() -> None:
    if not any(isinstance(finder, _MovedModuleFinder) for finder in sys.meta_path):
        sys.meta_path.append(_MovedModuleFinder())
