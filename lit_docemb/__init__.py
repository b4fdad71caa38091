"""lit_docemb: pretrain, fine-tune and evaluate long-document embedding models with PyTorch Lightning."""

__version__ = "0.1.0"
