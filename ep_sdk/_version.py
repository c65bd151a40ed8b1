"""The version of the provider SDK (distribution ``ortcore-ep-sdk``).

A leaf module: ``ep_sdk/pyproject.toml`` reads the version from here, and the
host reads it (as ``ep_sdk.__version__``) to check each plugin's declared
range before importing the plugin. Semantic versioning, for providers: a minor
release adds and deprecates, only a major one removes or changes what a
provider written against an earlier minor of the same major relies on
(docs/provider-contract.md).
"""

__version__ = "1.2.1"
