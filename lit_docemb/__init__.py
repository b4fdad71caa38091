"""lit_docemb: pretrain, fine-tune and evaluate long-document embedding models with PyTorch Lightning."""

from lit_docemb import _moved

__version__ = "0.1.0"

_moved.install()  # old import paths of moved modules keep working, with a DeprecationWarning
