from lit_docemb.data.caches.passage_cache import PassageCache, TokenizedPassages
from lit_docemb.data.core.datamodule import DocumentDataModule
from lit_docemb.data.core.document import Document, Section
from lit_docemb.data.core.passage_spec import PassageSpec
from lit_docemb.data.corpora.aan import AANDataModule, DocumentPair
from lit_docemb.data.corpora.arxiv import ArxivDataModule
from lit_docemb.data.corpora.beir import BEIRDataModule
from lit_docemb.data.corpora.installed_docs import InstalledDocsDataModule
from lit_docemb.data.corpora.jsonl import JSONLDataModule
from lit_docemb.data.corpora.labelled import LabelledTextDataModule
from lit_docemb.data.corpora.msmarco import MSMARCODataModule
from lit_docemb.data.corpora.openwebtext import OpenWebTextDataModule
from lit_docemb.data.corpora.patents import PatentDataModule
from lit_docemb.data.corpora.robust04 import Robust04DataModule
from lit_docemb.data.corpora.similarity_groups import SimilarityGroupDataModule
from lit_docemb.data.corpora.wikipedia import WikipediaDataModule
from lit_docemb.data.corpora.wikir import WIKIRDataModule
from lit_docemb.data.retrieval.datamodule import QueryRecord, RetrievalExample

__all__ = ["AANDataModule", "ArxivDataModule", "BEIRDataModule", "Document", "DocumentDataModule", "DocumentPair",
           "InstalledDocsDataModule", "JSONLDataModule", "LabelledTextDataModule", "MSMARCODataModule",
           "OpenWebTextDataModule", "PassageCache", "PassageSpec", "PatentDataModule", "QueryRecord",
           "RetrievalExample", "Robust04DataModule", "Section", "SimilarityGroupDataModule", "TokenizedPassages",
           "WIKIRDataModule", "WikipediaDataModule"]
