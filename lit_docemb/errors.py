"""The error of a configuration that cannot run.

Raised before training starts (a DataModule's ``prepare_data``, a method's ``setup``) when a config names a
missing file or combines options that cannot work together. Its message names the config key and the fix, in
one line; ``python -m lit_docemb`` prints it as ``error: <message>`` and exits with status 2, as jsonargparse does
for an unknown key or a wrong type, instead of a traceback.
"""

from __future__ import annotations


class ConfigError(ValueError):
    """A config that cannot run: the message names the key (``data.init_args.root``) and how to fix it."""
