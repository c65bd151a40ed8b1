"""Deprecated alias: ``ortcore batch``'s job (prepare_batch, run_batch, read_output). Moved to
:mod:`ortcore_ray.run` (distribution ortcore-ray).

Importing this module warns and gives :mod:`ortcore_ray.run`'s names; without
ortcore-ray it raises an ImportError saying what to install. It goes in 0.3.
"""

from ._moved import moved

moved(__name__, globals())
