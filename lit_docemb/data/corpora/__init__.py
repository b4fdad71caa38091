"""One reader per corpus (``<corpus>.py``, its files' formats in ``<corpus>_formats.py``) and the DataModules built on
them."""
