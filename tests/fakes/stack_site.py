"""A fake site directory with `torch` and `vllm` as the stack script sees them.

`torch` here reproduces the attributes python.stack reads (torch.version.cuda,
torch._C._GLIBCXX_USE_CXX11_ABI, torch.backends.cudnn.version(), torch.cuda.nccl.version(),
torch._C._cuda_getArchFlags()) and records, in the file `write_site(marker=...)` names, every
call that would initialise CUDA in the real library (python.stack passes the child no variable
of ours, so the path is written into the site itself). It prints on stdout while importing, as
native libraries do. `vllm` is an installed distribution (dist-info with METADATA and PEP 610
direct_url.json) whose package raises on import: the script must locate and hash it without
importing it.
"""

from __future__ import annotations

import json
import sys
import sysconfig
import venv
from pathlib import Path

VLLM_VERSION = "0.10.1.dev42+g0123abcd.cu128"
MISSING_DEP = "policyrun-test-missing-dep"

FILES = {
    "torch/__init__.py": '''
import os
print("fake torch: a banner on stdout")
os.write(1, b"fake torch: native output on fd 1\\n")
__version__ = "2.7.1+cu128"
from . import version, _C, backends, cuda
''',
    "torch/version.py": '''
cuda = "12.8"
hip = None
git_version = "e2d141dbde55c2a4370fac5165b0561b6af4798b"
debug = False
''',
    "torch/_C.py": '''
_GLIBCXX_USE_CXX11_ABI = True

def _cuda_getArchFlags():
    return "sm_80 sm_90 sm_100"
''',
    "torch/backends/__init__.py": "from . import cudnn\n",
    "torch/backends/cudnn/__init__.py": "def version():\n    return 90701\n",
    "torch/cuda/nccl.py": "def version():\n    return (2, 26, 2)\n",
    "torch/cuda/__init__.py": '''
import os
from . import nccl

_initialized = False


def _lazy_init():
    global _initialized
    marker_file = os.path.join(os.path.dirname(__file__), "_init_marker_path")
    marker = open(marker_file).read() if os.path.exists(marker_file) else None
    if marker:
        with open(marker, "a") as f:
            f.write("cuda init\\n")
    _initialized = True


def is_initialized():
    return _initialized


def device_count():
    return 0 if os.environ.get("CUDA_VISIBLE_DEVICES") == "" else 2


def is_available():
    _lazy_init()  # the real one calls cudaGetDeviceCount, which initialises the driver
    return device_count() > 0


def get_device_capability(i):
    _lazy_init()
    return (9, 0)


def get_device_name(i):
    _lazy_init()
    return "NVIDIA H200"


def get_arch_list():
    if not is_available():
        return []
    from .. import _C
    return _C._cuda_getArchFlags().split()
''',
    "vllm/__init__.py": 'raise RuntimeError("vllm must not be imported by the stack script")\n',
    f"vllm-{VLLM_VERSION}.dist-info/METADATA":
        f"Metadata-Version: 2.1\nName: vllm\nVersion: {VLLM_VERSION}\nRequires-Dist: {MISSING_DEP}>=1.0\n",
    f"vllm-{VLLM_VERSION}.dist-info/direct_url.json":
        json.dumps({"url": "file:///workspace/vllm", "dir_info": {"editable": True}}),
}

EXTENSION_BYTES = b"\x7fELF fake vllm native extension"


def write_site(root: Path, marker: Path | None = None) -> Path:
    for rel, text in FILES.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text.lstrip("\n"))
    (root / "vllm" / "_C.abi3.so").write_bytes(EXTENSION_BYTES)
    (root / "vllm" / "_moe_C.abi3.so").write_bytes(b"\x7fELF moe")  # not a _C*.so: listed nowhere
    if marker is not None:
        (root / "torch" / "cuda" / "_init_marker_path").write_text(str(marker))
    return root


def make_venv(path: Path, *sites: Path, with_pip: bool = True) -> Path:
    """A virtual environment whose interpreter sees `sites` (in order) and, with `with_pip`, this
    interpreter's pip; returns its python. python.stack runs interpreters isolated (`-I`), so a
    site reaches the child only as the target interpreter's own: a `.pth` file in its site-packages.
    """
    venv.EnvBuilder(with_pip=False, symlinks=True).create(path)
    version = f"python{sys.version_info[0]}.{sys.version_info[1]}"
    site_packages = path / "lib" / version / "site-packages"
    lines = [str(s) for s in sites]
    if with_pip:
        lines.append(sysconfig.get_paths()["purelib"])
    (site_packages / "policyrun_test_sites.pth").write_text("".join(f"{line}\n" for line in lines))
    return path / "bin" / "python"
