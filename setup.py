"""Build ortcore's one optional extension: the executor's compiled step loop.

``ortcore/_steps.pyx`` is ``ortcore.executor._run_steps_py`` in Cython; the
executor uses it when it is built and the Python loop otherwise. The build is
``optional``: where no C compiler works, ortcore installs as pure Python and
runs the same plans, only with a slower loop (about 0.1 us more per step).
"""

from __future__ import annotations

from Cython.Build import cythonize
from setuptools import Extension, setup

setup(
    ext_modules=cythonize(
        [Extension("ortcore._steps", ["ortcore/_steps.pyx"], optional=True)],
        compiler_directives={"language_level": 3, "embedsignature": True},
    )
)
