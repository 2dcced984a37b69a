"""Launch every kernel of libghbuild_hip.so and compare with Python's answers.

`ghbuild-rocm-selftest` (console script, the image's default command) and
`python -m ghbuild_rocm_example` run it. Exit status 0 when every check passed.
--require-gpu also fails on the CPU stand-in build, so a stand-in image can never pass a GPU
runner's smoke test. --json prints the result as one JSON object.
"""

import argparse
import json
import random
import struct
import sys

import ghbuild_rocm_example as gx


def _f32(value):
    return struct.unpack("f", struct.pack("f", value))[0]


def _checks(require_gpu):
    path = gx.compile_path()
    yield "compiled as %s" % path, not require_gpu or path == "hip-language", \
        "built for the CPU stand-in, not for a GPU" if require_gpu and path != "hip-language" else ""
    try:
        count = gx.device_count()
    except gx.HipError as exc:
        hint = " (run the container with the flags of `ghbuild container-flags`)" if exc.name == "hipErrorNoDevice" else ""
        yield "device count", False, str(exc) + hint
        return
    yield "device count %d" % count, count > 0, "no device"
    if count == 0:
        return
    name, arch = gx.device_info(0)
    yield "device 0: %s [%s]" % (name, arch), bool(name), ""

    rng = random.Random(20250101)
    n = 4099
    a = [_f32(rng.uniform(-100, 100)) for _ in range(n)]
    b = [_f32(rng.uniform(-100, 100)) for _ in range(n)]
    got = gx.vector_add(a, b)
    yield "vector_add n=%d" % n, all(g == _f32(x + y) for g, x, y in zip(got, a, b)), ""

    got = gx.saxpy(2.0, a, b)
    yield "saxpy n=%d" % n, all(abs(g - (2.0 * x + y)) <= 1e-3 * (1 + abs(2.0 * x + y))
                                for g, x, y in zip(got, a, b)), ""

    ints = [float(i % 97) for i in range(n)]
    yield "reduce_sum n=%d" % n, gx.reduce_sum(ints) == sum(ints), ""
    yield "reduce_sum of nothing", gx.reduce_sum([]) == 0.0, ""

    m, k, p = 19, 7, 23
    ma = [[float((r * k + c) % 11 - 5) for c in range(k)] for r in range(m)]
    mb = [[float((r * p + c) % 13 - 6) for c in range(p)] for r in range(k)]
    want = [[sum(ma[r][i] * mb[i][c] for i in range(k)) for c in range(p)] for r in range(m)]
    yield "matmul %dx%d * %dx%d" % (m, k, k, p), gx.matmul(ma, mb) == want, ""

    err = gx.bad_launch()
    yield "2048 threads per block refused", err == 9, "launch returned %d, expected 9 (hipErrorInvalidConfiguration)" % err


def main(argv=None):
    parser = argparse.ArgumentParser(prog="ghbuild-rocm-selftest", description=__doc__.splitlines()[0])
    parser.add_argument("--require-gpu", action="store_true", help="fail unless the kernels are real HIP device code")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    args = parser.parse_args(argv)
    results = []
    for what, ok, why in _checks(args.require_gpu):
        results.append({"check": what, "ok": bool(ok), "why": "" if ok else why})
    failed = [r for r in results if not r["ok"]]
    summary = {"compile_path": gx.compile_path(), "hip_architectures": gx.hip_architectures(),
               "passed": len(results) - len(failed), "failed": len(failed), "checks": results}
    if args.json:
        print(json.dumps(summary))
    else:
        for r in results:
            print("  %-5s %s%s" % ("ok" if r["ok"] else "FAIL", r["check"], (": " + r["why"]) if r["why"] else ""))
        print("ghbuild-rocm selftest: %s: %d passed, %d failed" % (summary["compile_path"], summary["passed"],
                                                                  summary["failed"]))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
