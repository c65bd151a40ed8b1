"""Batch inference on Ray: light ResNet-50 over generated images, 1 actor vs 2 actors.

Two ways, each for every ``--configs`` entry (ACTORSxTHREADS, default ``1x1,2x1``):

- ``map_inference``: images generated inside the pipeline (``ray.data.from_items``
  of ids, then one zero-CPU actor that makes each image from its id), results
  counted in the driver;
- ``ortcore batch``: the command's own code (``ortcore.cli.main``) from an ``.npy`` of
  uint8 images written first, into a fresh output folder each time.

Each line gives the wall time (actor start, session creation included), rows/s over
it, and rows/s in the steady state (from the first result to the last); the summary
gives the scaling of each config over the first one.

    python benchmarks/ray_batch.py [--images 20000] [--configs 1x1,2x1] [--batch-size 16]
                                   [--address ADDR] [--no-cli] [--no-map]
                                   [--workdir DIR]

20000 images take hours on one core (light ResNet-50 is ~0.25 s an image on one
thread); ``--images 2000`` is a quick run, and the generated ``.npy`` holds
150 KB an image.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
from light_models import light_models

SHAPE = (3, 224, 224)


def make_images(batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """One uint8 image per id, the same for the same id (a ``map_batches`` task)."""
    ids = batch["id"]
    images = np.stack(
        [np.random.default_rng(int(i)).integers(0, 256, SHAPE, np.uint8) for i in ids]
    )
    return {"id": ids, "image": images}


class ImageMaker:
    """:func:`make_images` in a long-lived actor (a ``map_batches`` callable class)."""

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        return make_images(batch)


def write_images(path: Path, count: int) -> None:
    """The same images as :func:`make_images`, as an ``.npy`` of uint8."""
    out = np.lib.format.open_memmap(path, mode="w+", dtype=np.uint8, shape=(count, *SHAPE))
    for i in range(count):
        out[i] = make_images({"id": np.array([i])})["image"][0]
    out.flush()


def parse_configs(text: str) -> list[tuple[int, int]]:
    """``"1x1,2x1"`` -> ``[(1, 1), (2, 1)]`` (actors, threads)."""
    configs = []
    for item in text.split(","):
        actors, _, threads = item.strip().partition("x")
        configs.append((int(actors), int(threads or 1)))
    return configs


def time_map_inference(
    model: Path, images: int, actors: int, threads: int, batch_size: int
) -> dict[str, float]:
    """Run ``map_inference`` over generated images; wall and steady-state throughput."""
    import ray
    from ortcore_ray.inference import map_inference

    blocks = max(actors * 4, images // max(batch_size, 1), 1)
    # from_items, not range: range's read tasks need a CPU, and the actors hold them all.
    # Images are made in one zero-CPU actor, not in tasks: zero-CPU tasks must be
    # capped (uncapped, Ray starts a worker per block at once: 70 of them on 2
    # cores), and capped ones, run now and then behind the inference actors, find
    # their idle worker gone (Ray keeps no more idle workers than CPUs) and start
    # a fresh Python process each time, CPU taken from the actors.
    ds = ray.data.from_items(
        [{"id": i} for i in range(images)], override_num_blocks=min(blocks, images)
    ).map_batches(ImageMaker, num_cpus=0, compute=ray.data.ActorPoolStrategy(size=1))
    ds = map_inference(
        ds,
        model,
        actors=actors,
        threads=threads,
        batch_size=batch_size,
        outputs=["gpu_0/softmax_1"],
    )
    start = time.perf_counter()
    first = None
    rows = 0
    for batch in ds.iter_batches(batch_size=None):
        rows += len(batch["id"])
        if first is None:
            first = (time.perf_counter(), rows)
    end = time.perf_counter()
    assert rows == images, (rows, images)
    return _rates(rows, start, end, first)


def time_cli(
    model: Path, data: Path, out: Path, actors: int, threads: int, batch_size: int
) -> dict[str, float]:
    """``ortcore batch`` (its code, in this process, on this Ray) into a fresh folder."""
    from ortcore.cli import main

    args = ["batch", str(model), str(data), str(out), "--no-progress"]
    args += ["--actors", str(actors), "--threads", str(threads), "--batch-size", str(batch_size)]
    args += ["--rows-per-file", str(max(batch_size * 4, 64))]
    start = time.perf_counter()
    status = main(args)
    end = time.perf_counter()
    assert status == 0
    rows = int(np.load(data, mmap_mode="r").shape[0])
    return _rates(rows, start, end, None)


def _rates(
    rows: int, start: float, end: float, first: tuple[float, int] | None
) -> dict[str, float]:
    result = {"rows": rows, "seconds": end - start, "rows_per_s": rows / (end - start)}
    if first is not None and rows > first[1] and end > first[0]:
        result["steady_rows_per_s"] = (rows - first[1]) / (end - first[0])
    return result


def show(way: str, actors: int, threads: int, r: dict[str, Any]) -> None:
    steady = r.get("steady_rows_per_s")
    tail = f", steady {steady:7.2f} img/s" if steady else ""
    print(
        f"{way:<14} {actors} actor(s) x {threads} thread(s): {r['rows']} images in "
        f"{r['seconds']:7.1f} s = {r['rows_per_s']:7.2f} img/s{tail}",
        flush=True,
    )


def main() -> None:
    """Run the benchmark and print one line per run, then the scaling."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--images", type=int, default=20000)
    parser.add_argument("--configs", default="1x1,2x1", help="ACTORSxTHREADS, comma-separated")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--address", help="Ray cluster to use (default: start a local one)")
    parser.add_argument("--no-cli", action="store_true", help="skip the `ortcore batch` runs")
    parser.add_argument("--no-map", action="store_true", help="skip the `map_inference` runs")
    parser.add_argument("--workdir", help="where the .npy and outputs go (default: a temp dir)")
    args = parser.parse_args()

    import ray

    (model,) = [p for p in light_models() if p.stem == "light_resnet50"]
    configs = parse_configs(args.configs)
    if args.address:
        ray.init(address=args.address)
    else:
        ray.init(include_dashboard=False, log_to_driver=False)
    ray.data.DataContext.get_current().enable_progress_bars = False
    cpus = int(ray.cluster_resources().get("CPU", 0))
    try:
        load = " ".join(f"{v:.1f}" for v in os.getloadavg())
    except OSError:
        load = "n/a"
    print(
        f"light ResNet-50, {args.images} images, Ray {ray.__version__}, {cpus} CPUs, "
        f"{os.cpu_count()} cores, load average {load}"
    )
    results: dict[str, list[tuple[tuple[int, int], dict[str, Any]]]] = {}
    for actors, threads in [] if args.no_map else configs:
        r = time_map_inference(model, args.images, actors, threads, args.batch_size)
        show("map_inference", actors, threads, r)
        results.setdefault("map_inference", []).append(((actors, threads), r))
    if not args.no_cli:
        with tempfile.TemporaryDirectory(dir=args.workdir) as tmp:
            data = Path(tmp) / "images.npy"
            write_images(data, args.images)
            for i, (actors, threads) in enumerate(configs):
                r = time_cli(model, data, Path(tmp) / f"out{i}", actors, threads, args.batch_size)
                show("ortcore batch", actors, threads, r)
                results.setdefault("ortcore batch", []).append(((actors, threads), r))
    for way, runs in results.items():
        (base_cfg, base), *rest = runs
        for cfg, r in rest:
            key = (
                "steady_rows_per_s"
                if "steady_rows_per_s" in r and "steady_rows_per_s" in base
                else "rows_per_s"
            )
            print(
                f"scaling {way}: {cfg[0]}x{cfg[1]} over {base_cfg[0]}x{base_cfg[1]}: "
                f"x{r[key] / base[key]:.2f} ({key.replace('_', ' ')})"
            )
    ray.shutdown()


if __name__ == "__main__":
    main()
