"""ortcore-ray: ortcore sessions scaled out on Ray, and the ``ortcore batch`` command.

An application on top of ortcore's session API, not a provider: it imports
``ortcore`` (and Ray, pyarrow), and ``import ortcore`` never imports it.

- :mod:`ortcore_ray.inference`: :class:`~ortcore_ray.inference.BatchPredictor`
  and :func:`~ortcore_ray.inference.map_inference` for Ray Data,
  :class:`~ortcore_ray.inference.ServeModel` and
  :func:`~ortcore_ray.inference.serve_application` for Ray Serve.
- ``ortcore batch`` (:mod:`ortcore_ray.cli`, registered in the ``ortcore.cli``
  entry-point group) runs files through a model, resumably:
  :mod:`ortcore_ray.plan` (the input's pieces), :mod:`ortcore_ray.batch_io`
  (reading pieces, writing part files), :mod:`ortcore_ray.run` (the job:
  :func:`~ortcore_ray.run.prepare_batch`, :func:`~ortcore_ray.run.run_batch`).
- :mod:`ortcore_ray.columns` (batch columns to model feeds and back) and
  :mod:`ortcore_ray.checks` (the pre-flight of every column) need no Ray;
  :mod:`ortcore_ray.errors` turns what Ray raised back into ortcore's errors.

Importing this package is cheap: Ray and pyarrow are imported when first used.
"""

__version__ = "0.1.0"
