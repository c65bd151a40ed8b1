"""Deprecated alias: The pre-flight of ``ortcore batch``. Moved to :mod:`ortcore_ray.checks`
(distribution ortcore-ray).

Importing this module warns and gives :mod:`ortcore_ray.checks`'s names; without
ortcore-ray it raises an ImportError saying what to install. It goes in 0.3.
"""

from ._moved import moved

moved(__name__, globals())
