from lit_docemb.data.aan import AANDataModule, DocumentPair
from lit_docemb.data.arxiv import ArxivDataModule
from lit_docemb.data.datamodule import DocumentDataModule
from lit_docemb.data.document import Document, Section
from lit_docemb.data.installed_docs import InstalledDocsDataModule
from lit_docemb.data.jsonl import JSONLDataModule
from lit_docemb.data.labelled import LabelledTextDataModule
from lit_docemb.data.msmarco import MSMARCODataModule
from lit_docemb.data.openwebtext import OpenWebTextDataModule
from lit_docemb.data.passage_cache import PassageCache, TokenizedPassages
from lit_docemb.data.patents import PatentDataModule
from lit_docemb.data.retrieval import Query, RetrievalExample
from lit_docemb.data.robust04 import Robust04DataModule
from lit_docemb.data.similarity_groups import SimilarityGroupDataModule
from lit_docemb.data.wikipedia import WikipediaDataModule
from lit_docemb.data.wikir import WIKIRDataModule

__all__ = ["AANDataModule", "ArxivDataModule", "Document", "DocumentDataModule", "DocumentPair",
           "InstalledDocsDataModule", "JSONLDataModule", "LabelledTextDataModule", "MSMARCODataModule",
           "OpenWebTextDataModule", "PassageCache", "PatentDataModule", "Query", "RetrievalExample", "Robust04DataModule", "Section", "SimilarityGroupDataModule",
           "TokenizedPassages", "WIKIRDataModule", "WikipediaDataModule"]
