"""Deprecated alias: Scale-out on Ray (BatchPredictor, map_inference, ServeModel). Moved to
:mod:`ortcore_ray.inference` (distribution ortcore-ray).

Importing this module warns and gives :mod:`ortcore_ray.inference`'s names; without
ortcore-ray it raises an ImportError saying what to install. It goes in 0.3.
"""

from ._moved import moved

moved(__name__, globals())
