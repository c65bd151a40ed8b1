"""Build a wheel and an sdist of every distribution of this repository into
one folder, and the wheels their offline install needs into ``deps/`` beside
them (``tox -e wheels``; the folder is ``dist/`` unless named).

Every distribution is built from its own folder (``python -m build --sdist
--wheel``: both from the source tree, not the wheel from the sdist, so the CPU
provider is compiled once and setuptools reuses what an earlier build of the
checkout left in ``plugins/cpu/build``), without build isolation: the tox
environment holds the build requirements, so no build environment is created
and downloaded seven times over. ``deps/`` holds the wheels, for this platform
and Python, of everything ortcore-ep-sdk, ortcore and ortcore-cpu require,
which is what ``tests/test_wheelhouse.py`` installs with ``pip --no-index``.

    python .ci/wheelhouse.py [DIST]
"""

from __future__ import annotations

import email.parser
import shutil
import subprocess
import sys
import time
import zipfile
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parent.parent
# distribution name -> its folder, in dependency order
DISTRIBUTIONS: dict[str, str] = {
    "ortcore-ep-sdk": "ep_sdk",
    "ortcore": ".",
    "ortcore-cpu": "plugins/cpu",
    "ortcore-cuda": "plugins/cuda",
    "ortcore-openvino": "plugins/openvino",
    "ortcore-tensorrt": "plugins/tensorrt",
    "ortcore-ray": "plugins/ray",
}
OFFLINE = ("ortcore-ep-sdk", "ortcore", "ortcore-cpu")
"""The distributions whose dependencies go to ``deps/``."""


def _requirements(wheel: Path) -> list[Requirement]:
    """The unconditional requirements in ``wheel``'s metadata (no extras)."""
    with zipfile.ZipFile(wheel) as z:
        (name,) = [n for n in z.namelist() if n.endswith(".dist-info/METADATA")]
        meta = email.parser.Parser().parsestr(z.read(name).decode())
    reqs = [Requirement(r) for r in meta.get_all("Requires-Dist") or []]
    return [r for r in reqs if r.marker is None or r.marker.evaluate({"extra": ""})]


def _wheel_of(dist: Path, name: str) -> Path:
    prefix = canonicalize_name(name).replace("-", "_") + "-"
    (wheel,) = [w for w in dist.glob("*.whl") if w.name.startswith(prefix)]
    return wheel


def main(argv: list[str]) -> int:
    dist = Path(argv[0]).resolve() if argv else ROOT / "dist"
    shutil.rmtree(dist, ignore_errors=True)
    dist.mkdir(parents=True)
    for name, folder in DISTRIBUTIONS.items():
        begin = time.monotonic()
        subprocess.run(
            [sys.executable, "-m", "build", "--no-isolation", "--sdist", "--wheel",
             "--outdir", str(dist), str(ROOT / folder)],
            check=True, stdout=subprocess.DEVNULL,
        )  # fmt: skip
        print(f"wheelhouse: {name} in {time.monotonic() - begin:.1f} s", flush=True)
    ours = {canonicalize_name(n) for n in DISTRIBUTIONS}
    reqs = sorted(
        {
            str(r)
            for name in OFFLINE
            for r in _requirements(_wheel_of(dist, name))
            if canonicalize_name(r.name) not in ours
        }
    )
    begin = time.monotonic()
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "--quiet", "--only-binary", ":all:",
         "--dest", str(dist / "deps"), *reqs],
        check=True,
    )  # fmt: skip
    print(f"wheelhouse: dependencies in {time.monotonic() - begin:.1f} s", flush=True)
    for path in sorted(dist.rglob("*.*")):
        print(f"  {path.relative_to(dist)}  {path.stat().st_size / 1e6:.1f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
