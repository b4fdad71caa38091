from lit_docemb.data.aan import AANDataModule, DocumentPair
from lit_docemb.data.arxiv import ArxivDataModule
from lit_docemb.data.datamodule import DocumentDataModule
from lit_docemb.data.document import Document, Section
from lit_docemb.data.installed_docs import InstalledDocsDataModule
from lit_docemb.data.jsonl import JSONLDataModule
from lit_docemb.data.labelled import LabelledTextDataModule
from lit_docemb.data.openwebtext import OpenWebTextDataModule
from lit_docemb.data.wikipedia import WikipediaDataModule

__all__ = ["AANDataModule", "ArxivDataModule", "Document", "DocumentDataModule", "DocumentPair",
           "InstalledDocsDataModule", "JSONLDataModule", "LabelledTextDataModule", "OpenWebTextDataModule",
           "Section", "WikipediaDataModule"]
