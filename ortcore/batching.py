"""Deprecated alias: Columns of a batch to model feeds, and outputs back to columns. Moved to
:mod:`ortcore_ray.columns` (distribution ortcore-ray).

Importing this module warns and gives :mod:`ortcore_ray.columns`'s names; without
ortcore-ray it raises an ImportError saying what to install. It goes in 0.3.
"""

from ._moved import moved

moved(__name__, globals())
