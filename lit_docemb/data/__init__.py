from lit_docemb.data.datamodule import DocumentDataModule
from lit_docemb.data.document import Document, Section
from lit_docemb.data.installed_docs import InstalledDocsDataModule
from lit_docemb.data.jsonl import JSONLDataModule
from lit_docemb.data.wikipedia import WikipediaDataModule

__all__ = ["Document", "DocumentDataModule", "InstalledDocsDataModule", "JSONLDataModule", "Section",
           "WikipediaDataModule"]
