"""ortcore-openvino: runs ortcore's fused groups with OpenVINO (CPU by default).

Importing this package is cheap: ``openvino`` is imported when a session
first uses the provider.
"""

__version__ = "0.1.0"
