"""The ortcore version, written once (pyproject.toml reads it from here).

A leaf module: any module of the package may import it without importing
the package root (which would run ``ortcore/__init__``).
"""

__version__ = "0.1.0"
