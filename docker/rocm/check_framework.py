"""Verify the framework the ROCm base installed (docker/Dockerfile.rocm_base, stage framework).

Usage: python check_framework.py MODULE

Imports MODULE and prints its version. For torch it also requires a ROCm build: a CPU or CUDA
wheel from the wrong index imports fine and fails only on the GPU runner, hours later.
"""

import importlib
import sys


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: check_framework.py MODULE", file=sys.stderr)
        return 2
    name = argv[1]
    try:
        module = importlib.import_module(name)
    except ImportError as exc:
        print(f"rocm-base: framework module {name!r} does not import: {exc}", file=sys.stderr)
        return 1
    print(f"rocm-base: framework {name} {getattr(module, '__version__', '(no __version__)')}")
    if name == "torch":
        hip = getattr(getattr(module, "version", None), "hip", None)
        if not hip:
            print("rocm-base: torch is not a ROCm build (torch.version.hip is None): set FRAMEWORK_INDEX_URL "
                  "to PyTorch's ROCm wheel index, e.g. https://download.pytorch.org/whl/rocm6.4", file=sys.stderr)
            return 1
        print(f"rocm-base: torch HIP {hip}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
