"""A trained method as a Hugging Face folder or a sentence-transformers model: the forms per method
(:mod:`lit_docemb.export.forms`, keyed by method class) and the modules an exported folder names by class path
(:mod:`lit_docemb.export.modules`). ``python -m lit_docemb export`` (:mod:`lit_docemb.commands.export`) calls them."""

from lit_docemb.export.forms import EXPORTS, ExportError, MethodExport, export_method, exporter, register_export
from lit_docemb.export.modules import AggregatingModule, CoLDEDocumentModule, GraphDocumentModule

__all__ = ["EXPORTS", "AggregatingModule", "CoLDEDocumentModule", "ExportError", "GraphDocumentModule",
           "MethodExport", "export_method", "exporter", "register_export"]
