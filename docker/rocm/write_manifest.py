"""Write /usr/share/ghbuild/rocm-base.json: what the ROCm base image holds (no secrets: build args only).

Usage: python write_manifest.py OUT FRAMEWORK_SPEC FRAMEWORK_IMPORT
"""

import importlib.metadata
import json
import os
import platform
import sys

ROCM = os.environ.get("ROCM_PATH", "/opt/rocm")


def main(argv: list[str]) -> int:
    out, spec, module = argv[1], argv[2], argv[3]
    version_file = os.path.join(ROCM, ".info", "version")
    rocm_version = open(version_file).read().strip() if os.path.exists(version_file) else None
    packages = sorted(f"{d.metadata['Name']}=={d.version}" for d in importlib.metadata.distributions())
    data = {
        "rocm_path": os.path.realpath(ROCM),
        "rocm_version": rocm_version,
        # True on ghbuild's CPU stand-in (docker/rocm-standin): no real ROCm inside.
        "rocm_standin": os.path.exists(os.path.join(ROCM, ".info", "ghbuild-standin")),
        "framework_spec": spec,
        "framework_import": module,
        "python": platform.python_version(),
        "packages": packages,
    }
    os.makedirs(os.path.dirname(out), exist_ok=True)
    with open(out, "w") as fh:
        json.dump(data, fh, indent=1)
        fh.write("\n")
    print(json.dumps({k: v for k, v in data.items() if k != "packages"}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
