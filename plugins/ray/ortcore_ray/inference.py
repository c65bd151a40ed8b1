"""Scale-out on Ray: one ``InferenceSession`` per actor, for Ray Data and Ray Serve.

``pip install ortcore-ray`` (or ``ortcore[ray]``). Nothing here is imported by ``import ortcore``.

- :class:`BatchPredictor` is a callable class for ``Dataset.map_batches``:
  each actor builds one session and maps batch columns to model inputs.
- :func:`map_inference` runs it over a dataset: the model is put into Ray's
  object store once and every actor reads it from there; actors reserve
  ``num_cpus = threads`` (the session's intra-op threads) so that actors times
  threads never exceed the cores; a killed actor is restarted and its batches
  retried.
- :class:`ServeModel` is the same session behind a Ray Serve deployment
  (:func:`serve_application` binds it).

``ortcore batch`` (:mod:`ortcore_ray.run`) runs files through this, resumably.
"""

from __future__ import annotations

import asyncio
import os
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeAlias

import numpy as np
from ortcore.errors import InvalidArgument

from .columns import (
    ModelRunner,
    SessionSettings,
    bind_columns,
    check_mapping,
    column_array,
    declared_io,
    output_columns,
)

if TYPE_CHECKING:
    import ray
    import ray.data

__all__ = [
    "BatchPredictor",
    "ModelSource",
    "ServeModel",
    "default_actors",
    "map_inference",
    "model_payload",
    "serve_application",
]

ModelSource: TypeAlias = "str | os.PathLike[str] | bytes | ray.ObjectRef"
"""A model path, the model's bytes, or a Ray ``ObjectRef`` of the bytes."""

DEFAULT_PASSTHROUGH = ("id",)
"""Columns copied from input to output batches when present (``passthrough=None``)."""


# --------------------------------------------------------------------------- #
# The model and the options, as shipped to actors
# --------------------------------------------------------------------------- #


def model_payload(model: str | os.PathLike[Any] | bytes | bytearray) -> str | bytes:
    """What to ship to actors for ``model``: its bytes, or its path.

    A self-contained model file is read into bytes (put into the object store
    once by :func:`map_inference`). A model with external data stays a path,
    which every node must then see (a shared file system): its tensors are read
    only from beside the model file (``docs/security.md``).

    Raises:
        NoSuchFile, InvalidProtobuf: the model cannot be read.
    """
    from ortcore.model import parse_model

    if isinstance(model, (bytes, bytearray, memoryview)):
        return bytes(model)
    path = Path(model)
    proto, _ = parse_model(path)
    from onnx.external_data_helper import _get_all_tensors, uses_external_data

    if any(uses_external_data(t) for t in _get_all_tensors(proto)):
        return str(path.resolve())
    return path.read_bytes()


def _resolve(model: ModelSource) -> str | os.PathLike[str] | bytes:
    """The model bytes of an ``ObjectRef`` Ray did not resolve (one nested in arguments)."""
    if isinstance(model, (str, bytes, os.PathLike)):
        return model
    import ray

    return ray.get(model)  # type: ignore[no-any-return]


def default_actors(threads: int = 1, gpus_per_actor: float = 0) -> int:
    """Actors that fit the running Ray cluster: ``CPUs // threads``, at least 1.

    With ``gpus_per_actor`` also at most ``GPUs // gpus_per_actor``.
    """
    import ray

    resources = ray.cluster_resources()
    count = int(resources.get("CPU", 1) // max(threads, 1))
    if gpus_per_actor > 0:
        count = min(count, int(resources.get("GPU", 0) // gpus_per_actor))
    return max(count, 1)


# --------------------------------------------------------------------------- #
# Ray Data
# --------------------------------------------------------------------------- #


class BatchPredictor:
    """A callable class for ``ray.data.Dataset.map_batches``: one session per actor.

    Each batch (``{column: numpy array}``) is fed to the model: input ``x``
    reads column ``inputs.get("x", "x")`` (see :func:`bind_columns`), cells
    that are arrays are stacked, dtypes cast (:func:`column_array`). The result
    holds one column per output (renamed by ``outputs`` when it is a mapping)
    and the ``passthrough`` columns unchanged, so rows keep their ids.

    Args:
        model: path, bytes, or an ``ObjectRef`` of the bytes (what
            :func:`map_inference` passes: Ray resolves it once per actor).
        providers: provider names in priority order (``["cuda", "cpu"]``).
        provider_options: one options dict per provider.
        session_options: a ``SessionOptions`` or a mapping of its settings.
        threads: the session's intra-op threads (the actor's ``num_cpus``).
        inputs: ``{model input: column}`` where the names differ.
        outputs: the outputs to return (all by default), a mapping renames them.
        passthrough: columns copied to the result; default ``("id",)`` when present.

    Raises:
        InvalidArgument: a mapping names an unknown input or output, a column
            is missing, an output column would overwrite a passed-through one.
    """

    def __init__(
        self,
        model: ModelSource,
        *,
        providers: Sequence[Any] | None = None,
        provider_options: Sequence[Mapping[str, Any]] | None = None,
        session_options: SessionSettings = None,
        threads: int = 1,
        inputs: Mapping[str, str] | None = None,
        outputs: Sequence[str] | Mapping[str, str] | None = None,
        passthrough: Sequence[str] | None = None,
    ) -> None:
        self._engine = ModelRunner(
            _resolve(model),
            providers=providers,
            provider_options=provider_options,
            session_options=session_options,
            threads=threads,
            outputs=outputs,
        )
        self._mapping = dict(inputs or {})
        check_mapping([a.name for a in self._engine.inputs], self._mapping)
        self._explicit_passthrough = passthrough is not None
        self._passthrough = tuple(DEFAULT_PASSTHROUGH if passthrough is None else passthrough)
        clash = sorted(set(self._passthrough) & set(self._engine.output_columns.values()))
        if clash:
            raise InvalidArgument(
                f"output column(s) {', '.join(map(repr, clash))} would overwrite the "
                "passed-through column of that name: rename the output with outputs={...}"
            )
        self._bound: tuple[tuple[str, ...], dict[str, str]] | None = None

    @property
    def session(self) -> Any:
        """The actor's ``InferenceSession``."""
        return self._engine.session

    def __call__(self, batch: Mapping[str, Any]) -> dict[str, Any]:
        """Run the model over one batch; the output columns and the passed-through ones."""
        columns = tuple(batch)
        if self._bound is None or self._bound[0] != columns:
            self._bound = (columns, self._bind(columns))
        keep = {c: batch[c] for c in self._passthrough if c in batch}
        args = {a.name: a for a in self._engine.inputs}
        ids = batch.get("id")  # names the row at fault in an error
        feeds = {
            name: column_array(batch[column], args[name], column, ids=ids)
            for name, column in self._bound[1].items()
        }
        rows = len(next(iter(batch.values()))) if batch else 0
        if rows == 0:
            return {**keep, **self._engine.empty_outputs()}
        return {**keep, **self._engine.run(feeds)}

    def _bind(self, columns: Sequence[str]) -> dict[str, str]:
        if self._explicit_passthrough:
            missing = [c for c in self._passthrough if c not in columns]
            if missing:
                raise InvalidArgument(
                    f"passthrough column(s) {', '.join(map(repr, missing))} are not in the "
                    f"data (columns: {', '.join(map(repr, columns))})"
                )
        return bind_columns(
            [a.name for a in self._engine.inputs], columns, self._mapping, self._passthrough
        )


def map_inference(
    dataset: ray.data.Dataset,
    model: ModelSource,
    *,
    providers: Sequence[Any] | None = None,
    provider_options: Sequence[Mapping[str, Any]] | None = None,
    session_options: SessionSettings = None,
    inputs: Mapping[str, str] | None = None,
    outputs: Sequence[str] | Mapping[str, str] | None = None,
    passthrough: Sequence[str] | None = None,
    actors: int | None = None,
    threads: int = 1,
    gpus_per_actor: float = 0,
    batch_size: int = 32,
    max_restarts: int = 3,
    max_task_retries: int = 3,
    predictor: type[BatchPredictor] = BatchPredictor,
) -> ray.data.Dataset:
    """``dataset.map_batches`` with one :class:`BatchPredictor` per actor.

    The model is read once here and put into Ray's object store once; each
    actor receives the reference as a constructor argument, so the bytes
    travel once per node, never per batch. Each actor reserves
    ``num_cpus=threads`` (its session's intra-op threads) and
    ``num_gpus=gpus_per_actor``, so Ray never places more threads on a node
    than it has cores.

    Args:
        dataset: rows with the model's input columns (and ids to keep).
        model: path, bytes or an ``ObjectRef`` of the bytes.
        providers: provider names in priority order (``["cuda", "cpu"]``).
        provider_options: one options dict per provider.
        session_options: a ``SessionOptions`` or a mapping of its settings.
        inputs: ``{model input: column}`` where the names differ.
        outputs: the outputs to return (all by default), a mapping renames them.
        passthrough: columns copied to the result; default ``("id",)`` when present.
        actors: a fixed pool of this many actors. ``None``: a pool that
            grows from 1 to :func:`default_actors` (CPUs // threads), which
            leaves upstream operators (reads that need a CPU) room to run; a
            fixed pool as large as the cluster starves them.
        threads: intra-op threads, and CPUs reserved, per actor.
        gpus_per_actor: GPUs reserved per actor (e.g. 1 with
            ``providers=["cuda", "cpu"]``).
        batch_size: rows per ``map_batches`` call.
        max_restarts: times Ray restarts an actor that died (its process
            killed, its node lost); ``-1`` without limit.
        max_task_retries: times a batch whose actor died is retried on the
            restarted actor; a batch that raises an exception is not retried.
        predictor: a :class:`BatchPredictor` subclass, to pre- or post-process.

    Returns:
        the lazy dataset of results (``passthrough`` columns and outputs).

    Raises:
        InvalidArgument: the mapping names unknown inputs or outputs, or a
            column the model needs is missing from a known schema.
    """
    import ray
    from ray.data import ActorPoolStrategy

    if threads < 1:
        raise InvalidArgument(f"threads must be at least 1, got {threads}")
    ref = model
    if isinstance(model, (str, bytes, bytearray, os.PathLike)):
        payload = model_payload(model)
        if isinstance(payload, bytes):
            _check_names(payload, dataset, inputs, outputs, passthrough)
            ref = ray.put(payload)
        else:
            ref = payload
    limit = default_actors(threads, gpus_per_actor)
    if actors is not None and actors * threads >= ray.cluster_resources().get("CPU", 0):
        warnings.warn(
            f"{actors} actors x {threads} threads reserve every CPU of the Ray cluster: "
            "an upstream task that needs a CPU (ray.data.range, read_parquet by default) "
            "will wait for ever; give it num_cpus=0, or use fewer actors",
            RuntimeWarning,
            stacklevel=2,
        )
    compute = (
        ActorPoolStrategy(min_size=1, max_size=limit)
        if actors is None
        else ActorPoolStrategy(size=actors)
    )
    with warnings.catch_warnings():
        # max_restarts/max_task_retries reach the actor only through
        # ``**ray_remote_args``, which Ray 2.60 announces it will rename.
        warnings.filterwarnings("ignore", message=".*ray_remote_args.*")
        return dataset.map_batches(
            predictor,
            batch_size=batch_size,
            batch_format="numpy",
            compute=compute,
            num_cpus=threads,
            num_gpus=gpus_per_actor or None,
            fn_constructor_args=(ref,),
            fn_constructor_kwargs={
                "providers": list(providers) if providers else None,
                "provider_options": list(provider_options) if provider_options else None,
                "session_options": session_options,
                "threads": threads,
                "inputs": dict(inputs or {}),
                "outputs": outputs,
                "passthrough": passthrough,
            },
            max_restarts=max_restarts,
            max_task_retries=max_task_retries,
        )


def _check_names(
    model: bytes,
    dataset: Any,
    inputs: Mapping[str, str] | None,
    outputs: Sequence[str] | Mapping[str, str] | None,
    passthrough: Sequence[str] | None,
) -> None:
    """Fail in the driver, before any actor starts, on names that cannot match."""
    ins, outs = declared_io(model)
    output_columns(outputs, [a.name for a in outs])
    schema = dataset.schema(fetch_if_missing=False)
    columns = list(schema.names) if schema is not None else []
    if not columns:
        check_mapping([a.name for a in ins], inputs)
        return
    bind_columns(
        [a.name for a in ins],
        columns,
        inputs,
        tuple(DEFAULT_PASSTHROUGH if passthrough is None else passthrough),
    )


# --------------------------------------------------------------------------- #
# Ray Serve
# --------------------------------------------------------------------------- #


class ServeModel:
    """A Ray Serve deployment class: one session per replica.

    Use it with ``serve.deployment(ServeModel, ...).bind(model, ...)`` or
    through :func:`serve_application`. A request is a dict of inputs, either
    JSON over HTTP (``{"inputs": {"x": [[...]]}}`` or ``{"x": [[...]]}``,
    answered ``{"outputs": {"y": [[...]]}}``; a bad request gets status 400
    with ``{"error": message}``) or numpy arrays through a deployment handle
    (answered ``{"y": array}``).

    Args:
        model: path, bytes, or an ``ObjectRef`` of the bytes.
        providers: provider names in priority order.
        provider_options: one options dict per provider.
        session_options: a ``SessionOptions`` or a mapping of its settings.
        threads: the session's intra-op threads (the replica's ``num_cpus``).
        outputs: the outputs to return (all by default), a mapping renames them.
    """

    def __init__(
        self,
        model: ModelSource,
        *,
        providers: Sequence[Any] | None = None,
        provider_options: Sequence[Mapping[str, Any]] | None = None,
        session_options: SessionSettings = None,
        threads: int = 1,
        outputs: Sequence[str] | Mapping[str, str] | None = None,
    ) -> None:
        self._engine = ModelRunner(
            _resolve(model),
            providers=providers,
            provider_options=provider_options,
            session_options=session_options,
            threads=threads,
            outputs=outputs,
        )

    def predict(self, inputs: Mapping[str, Any]) -> dict[str, np.ndarray]:
        """Run the model on ``{input name: array or nested list}``.

        Raises:
            InvalidArgument: an input is missing or unknown, or of the wrong
                type or shape (onnxruntime's messages).
        """
        args = {a.name: a for a in self._engine.inputs}
        unknown = sorted(set(inputs) - set(args))
        missing = sorted(set(args) - set(inputs))
        if unknown or missing:
            raise InvalidArgument(
                f"request inputs {sorted(inputs)} do not match the model's "
                f"{sorted(args)} (missing: {missing}, unknown: {unknown})"
            )
        feeds = {
            name: np.asarray(value, dtype=args[name].dtype) if args[name].dtype else value
            for name, value in inputs.items()
        }
        return self._engine.run(feeds)

    async def __call__(self, request: Any) -> Any:
        """Answer one request: an HTTP request with a JSON body, or a dict of arrays."""
        if not hasattr(request, "json"):
            return await asyncio.to_thread(self.predict, request)
        from starlette.responses import JSONResponse

        try:
            body = await request.json()
            if not isinstance(body, dict):
                raise InvalidArgument("the request body must be a JSON object of inputs")
            inputs = body.get("inputs", body)
            if not isinstance(inputs, dict):
                raise InvalidArgument('"inputs" must be a JSON object: {"name": [...]}')
            result = await asyncio.to_thread(self.predict, inputs)
        except (InvalidArgument, ValueError) as exc:
            return JSONResponse({"error": str(exc)}, status_code=400)
        return {"outputs": {k: v.tolist() for k, v in result.items()}}


def serve_application(
    model: str | os.PathLike[str] | bytes,
    *,
    providers: Sequence[Any] | None = None,
    provider_options: Sequence[Mapping[str, Any]] | None = None,
    session_options: SessionSettings = None,
    outputs: Sequence[str] | Mapping[str, str] | None = None,
    threads: int = 1,
    replicas: int = 1,
    gpus_per_replica: float = 0,
    name: str = "ortcore",
) -> Any:
    """A Ray Serve application of :class:`ServeModel`, for ``serve.run``.

    Each replica reserves ``num_cpus=threads`` and ``num_gpus=gpus_per_replica``.
    The model travels as bytes in the deployment's arguments (Serve keeps
    them to start replicas later, after this driver may be gone).
    """
    from ray import serve

    payload = model_payload(model)
    options: dict[str, Any] = {"num_cpus": threads}
    if gpus_per_replica:
        options["num_gpus"] = gpus_per_replica
    deployment = serve.deployment(name=name, num_replicas=replicas, ray_actor_options=options)(
        ServeModel
    )
    return deployment.bind(
        payload,
        providers=list(providers) if providers else None,
        provider_options=list(provider_options) if provider_options else None,
        session_options=session_options,
        threads=threads,
        outputs=outputs,
    )
