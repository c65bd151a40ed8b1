"""ortcore-tensorrt: runs ortcore's fused groups as TensorRT engines.

Works with the module ``tensorrt`` (10.x, 11.x) or ``tensorrt_rtx``. Importing
this package is cheap: TensorRT is imported when the provider is asked
whether it can run, or used.
"""

__version__ = "0.1.0"
