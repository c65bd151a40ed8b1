"""ortcore's conformance suite for execution providers (under construction).

The full suite (contract checks, ONNX backend node tests, models, reports) is
tracked by its own issue; this package holds its shared pieces as they land.
"""
