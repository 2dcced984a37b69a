"""Known-answer checks through both native libraries.

`ghbuild-example-selftest` (console script) and `python -m ghbuild_example` run them; exit
status 0 means both libraries loaded from the installed package and gave the right answers.
"""

import argparse
import math
import random
import sys
import zlib

import ghbuild_example as gx
from ._native import library_path, native_rs, nativecore


def _checks():
    """Yields (description, ok) pairs."""
    versions = gx.native_versions()
    yield "nativecore version %s" % versions["nativecore"], versions["nativecore"] == gx.__version__
    yield "native_rs version %s" % versions["native_rs"], versions["native_rs"] == gx.__version__

    # Each library's own built-in checks.
    yield "nc_selftest() == 0", nativecore().nc_selftest() == 0
    yield "nrs_selftest() == 0", native_rs().nrs_selftest() == 0

    # C++ hashes: published test vectors.
    yield "C++ crc32('123456789')", gx.crc32(b"123456789") == 0xCBF43926
    yield "C++ adler32('Wikipedia')", gx.adler32(b"Wikipedia") == 0x11E60398
    yield "C++ fnv1a64('foobar')", gx.fnv1a64(b"foobar") == 0x85944171F73967E8
    yield "C++ murmur3_32('Hello, world!', 1234)", gx.murmur3_32(b"Hello, world!", 1234) == 0xFAF6CDB3
    yield "C++ xxh32('abc')", gx.xxh32(b"abc") == 0x32D153FF

    # Rust checksums: same vectors.
    yield "Rust crc32('123456789')", gx.rs_crc32(b"123456789") == 0xCBF43926
    yield "Rust adler32('Wikipedia')", gx.rs_adler32(b"Wikipedia") == 0x11E60398
    yield "Rust fnv1a64('foobar')", gx.rs_fnv1a64(b"foobar") == 0x85944171F73967E8

    # Cross-check C++, Rust and zlib on deterministic pseudo-random buffers.
    rng = random.Random(20240101)
    agree = True
    for size in (0, 1, 3, 4, 5, 63, 64, 65, 1000, 5552, 5553, 70000):
        buf = bytes(rng.getrandbits(8) for _ in range(size))
        agree = agree and gx.crc32(buf) == gx.rs_crc32(buf) == zlib.crc32(buf)
        agree = agree and gx.adler32(buf) == gx.rs_adler32(buf) == zlib.adler32(buf)
        agree = agree and gx.fnv1a64(buf) == gx.rs_fnv1a64(buf)
    yield "C++ == Rust == zlib on random buffers", agree

    # C++ numerics and text.
    yield "C++ determinant", abs(gx.determinant([[4, 3], [6, 3]]) + 6.0) < 1e-12
    yield "C++ singular determinant", gx.determinant([[1, 2], [2, 4]]) == 0.0
    x = gx.solve([[2, -1, 0], [-1, 2, -1], [0, -1, 2]], [1, 0, 1])
    yield "C++ solve", all(abs(v - 1.0) < 1e-12 for v in x)
    data = [2, 4, 4, 4, 5, 5, 7, 9]
    yield "C++ mean/median", gx.mean(data) == 5.0 and gx.median(data) == 4.5
    yield "C++ stddev", abs(gx.stddev(data) - 2.138089935299395) < 1e-12
    yield "C++ mean([]) is NaN", math.isnan(gx.mean([]))
    yield "C++ levenshtein", gx.levenshtein("kitten", "sitting") == 3
    yield "C++ count_tokens", gx.count_tokens("for (i = 0; i < n; ++i) sum += a[i];") == 20
    yield "C++ nth_prime(10000)", gx.nth_prime(10000) == 104729
    yield "C++ is_prime(2^61 - 1)", gx.is_prime(2**61 - 1) and not gx.is_prime(2**61 + 1)
    yield "C++ factorial(52) == math.factorial(52)", gx.factorial(52) == math.factorial(52)

    # C++ dtype-dispatched array kernels, against Python arithmetic.
    yield "C++ uint8 sum widens", gx.array_reduce([255] * 4, "sum", "uint8") == 1020.0
    ints = [rng.randrange(-(2**31), 2**31) for _ in range(1000)]
    yield "C++ int32 sum/argmax", (gx.array_reduce(ints, "sum", "int32") == float(sum(ints))
                                   and gx.array_reduce(ints, "argmax", "int32") == ints.index(max(ints)))
    yield "C++ int8 add wraps", gx.array_binary([100, -100], [100, -100], "add", "int8") == [-56, 56]
    yield "C++ int64 div by zero is 0", gx.array_binary([7, -7], [0, 2], "div", "int64") == [0, -3]
    yield "C++ float32 -> int8 saturates", gx.array_cast([300.0, float("nan"), -2.9], "float32", "int8") == [127, 0, -2]
    yield "C++ empty mean is NaN", math.isnan(gx.array_reduce([], "mean", "float32"))

    # Rust parser and friends.
    yield "Rust eval", gx.eval_expr("2*(3+4)-5/2") == 11.5
    yield "Rust eval with x", gx.eval_expr("sqrt(x^2 + 16)", x=3) == 5.0
    try:
        gx.eval_expr("2 * )")
        syntax = False
    except SyntaxError:
        syntax = True
    yield "Rust eval syntax error", syntax
    try:
        gx.eval_expr("1/0")
        arith = False
    except ArithmeticError:
        arith = True
    yield "Rust eval division by zero", arith
    yield "Rust semver", gx.semver_compare("1.0.0-rc.1", "1.0.0") == -1 and gx.semver_compare("1.10.0", "1.9.9") == 1
    yield "Rust INI parser", gx.kv_count("a = 1\n[server]\nhost = \"x\"\nport = 80\n") == 3
    yield "Rust varint", gx.varint_encode([300, -1]) == b"\xd8\x04\x01"


def run(verbose=False, out=sys.stdout):
    passed = failed = 0
    try:
        for what, ok in _checks():
            if ok:
                passed += 1
                if verbose:
                    print("  ok   " + what, file=out)
            else:
                failed += 1
                print("  FAIL " + what, file=out)
    except Exception as exc:  # a library that fails to load or an ABI mismatch
        failed += 1
        print("  FAIL %s: %s" % (type(exc).__name__, exc), file=out)
    return passed, failed


def main(argv=None):
    parser = argparse.ArgumentParser(prog="ghbuild-example-selftest", description=__doc__.splitlines()[0])
    parser.add_argument("-v", "--verbose", action="store_true", help="print every check")
    args = parser.parse_args(argv)
    if args.verbose:
        print("libraries: %s, %s" % (library_path("libnativecore.so"), library_path("libnative_rs.so")))
    passed, failed = run(verbose=args.verbose)
    print("ghbuild-example selftest: %d passed, %d failed" % (passed, failed))
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
