"""ortcore's conformance suite: how correct is an execution provider?

Run it with ``ortcore conformance --provider NAME`` (or ``python -m
conformance``), or through pytest: ``pytest --pyargs conformance
--ortcore-provider NAME``. The provider under test is any installed provider,
found through the ``ortcore.providers`` entry points.

Modules: :mod:`~conformance.cases` (onnx's backend cases),
:mod:`~conformance.generated` (cases checked against the oracle),
:mod:`~conformance.light` (onnx's light models with seeded random weights),
:mod:`~conformance.oracle` (onnx's reference evaluator, corrected),
:mod:`~conformance.probes` (the contract checks' models),
:mod:`~conformance.contract` (checks every provider must pass),
:mod:`~conformance.precision` (tolerances, error measures),
:mod:`~conformance.execute` (one case), :mod:`~conformance.suite` and
:mod:`~conformance.pool` (a run, in-process or in workers),
:mod:`~conformance.waivers`, :mod:`~conformance.summary` and
:mod:`~conformance.report` (the reports), :mod:`~conformance.cli` and
:mod:`~conformance.pytest_plugin` (the two front ends).

Importing this package is cheap; nothing heavy is imported until a run starts.
"""
