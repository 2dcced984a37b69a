"""ghbuild_example: a thin Python API over two native libraries.

C++ (libnativecore.so): hashes, linear algebra, statistics, text, number theory.
Rust (libnative_rs.so): checksums, an expression evaluator, semver, an INI parser, varints.
Both are loaded with ctypes from this package's directory on first use.
"""

import array
import ctypes

from ._native import native_rs, nativecore

__version__ = "0.1.0"

__all__ = [
    "adler32", "array_binary", "array_cast", "array_reduce", "count_tokens", "crc32", "determinant",
    "eval_expr", "factorial", "fnv1a64", "is_prime", "kv_count", "levenshtein", "mean", "median",
    "murmur3_32", "native_versions", "nth_prime", "rs_adler32", "rs_crc32", "rs_fnv1a64", "selftest",
    "semver_compare", "solve", "stddev", "varint_encode", "xxh32",
]

# dtype name -> (nativecore dtype code, array module typecode)
DTYPES = {
    "int8": (0, "b"), "int16": (1, "h"), "int32": (2, "i"), "int64": (3, "q"),
    "uint8": (4, "B"), "uint16": (5, "H"), "uint32": (6, "I"), "uint64": (7, "Q"),
    "float32": (8, "f"), "float64": (9, "d"),
}
REDUCE_OPS = ("sum", "prod", "min", "max", "argmin", "argmax", "mean", "sum_squares")
BINARY_OPS = ("add", "sub", "mul", "div", "min", "max")


def _bytes(data):
    if isinstance(data, str):
        data = data.encode("utf-8")
    return bytes(data)


def _doubles(values):
    values = [float(v) for v in values]
    return (ctypes.c_double * max(len(values), 1))(*values), len(values)


def _square(matrix):
    rows = [list(r) for r in matrix]
    n = len(rows)
    if n == 0 or any(len(r) != n for r in rows):
        raise ValueError("expected a non-empty square matrix")
    flat, _ = _doubles(v for r in rows for v in r)
    return flat, n


def native_versions():
    """Versions reported by the two libraries, e.g. {'nativecore': '0.1.0', 'native_rs': '0.1.0'}."""
    return {
        "nativecore": nativecore().nc_version().decode(),
        "native_rs": native_rs().nrs_version().decode(),
    }


# --- C++: libnativecore.so ---------------------------------------------------------------

def crc32(data):
    b = _bytes(data)
    return nativecore().nc_crc32(b, len(b))


def adler32(data):
    b = _bytes(data)
    return nativecore().nc_adler32(b, len(b))


def fnv1a64(data):
    b = _bytes(data)
    return nativecore().nc_fnv1a64(b, len(b))


def murmur3_32(data, seed=0):
    b = _bytes(data)
    return nativecore().nc_murmur3_32(b, len(b), seed)


def xxh32(data, seed=0):
    b = _bytes(data)
    return nativecore().nc_xxh32(b, len(b), seed)


def determinant(matrix):
    flat, n = _square(matrix)
    out = ctypes.c_double()
    rc = nativecore().nc_determinant(flat, n, ctypes.byref(out))
    if rc < 0:
        raise ValueError("nc_determinant: bad arguments")
    return 0.0 if rc == 1 else out.value


def solve(matrix, rhs):
    """Solves matrix @ x = rhs; raises ValueError for a singular matrix."""
    flat, n = _square(matrix)
    b, nb = _doubles(rhs)
    if nb != n:
        raise ValueError("rhs has %d values, matrix is %dx%d" % (nb, n, n))
    x = (ctypes.c_double * n)()
    rc = nativecore().nc_solve(flat, b, n, x)
    if rc == 1:
        raise ValueError("singular matrix")
    if rc != 0:
        raise ValueError("nc_solve: bad arguments")
    return list(x)


def mean(values):
    arr, n = _doubles(values)
    return nativecore().nc_mean(arr, n)


def stddev(values):
    """Sample standard deviation."""
    arr, n = _doubles(values)
    return nativecore().nc_stddev(arr, n)


def median(values):
    arr, n = _doubles(values)
    return nativecore().nc_median(arr, n)


def levenshtein(a, b):
    return nativecore().nc_levenshtein(_bytes(a), _bytes(b))


def count_tokens(source):
    """Number of C-like tokens in source; raises ValueError if it does not tokenize."""
    n = nativecore().nc_count_tokens(_bytes(source))
    if n < 0:
        raise ValueError("source does not tokenize")
    return n


def nth_prime(n):
    p = nativecore().nc_nth_prime(n)
    if p == 0:
        raise ValueError("n must be in 1..10000000")
    return p


def is_prime(n):
    return bool(nativecore().nc_is_prime(n))


def factorial(n):
    """n! as an int, computed by the C++ big-integer code."""
    lib = nativecore()
    size = lib.nc_factorial_decimal(n, None, 0) + 1
    buf = ctypes.create_string_buffer(size)
    lib.nc_factorial_decimal(n, buf, size)
    return int(buf.value.decode())


def _typed(values, dtype):
    try:
        code, typecode = DTYPES[dtype]
    except KeyError:
        raise ValueError("unknown dtype %r (one of %s)" % (dtype, ", ".join(DTYPES))) from None
    arr = values if isinstance(values, array.array) and values.typecode == typecode else array.array(typecode, values)
    return code, arr


def _address(arr):
    return arr.buffer_info()[0] if len(arr) else None


def array_reduce(values, op="sum", dtype="float64"):
    """Reduction by the C++ dtype-dispatched kernels; the result is a float."""
    code, arr = _typed(values, dtype)
    out = ctypes.c_double()
    if nativecore().nc_reduce(code, REDUCE_OPS.index(op), _address(arr), len(arr), ctypes.byref(out)) != 0:
        raise ValueError("nc_reduce failed")
    return out.value


def array_binary(a, b, op="add", dtype="float64"):
    """Elementwise a <op> b with the dtype's semantics (integers wrap, x / 0 == 0)."""
    code, xa = _typed(a, dtype)
    _, xb = _typed(b, dtype)
    if len(xa) != len(xb):
        raise ValueError("length mismatch")
    out = array.array(xa.typecode, bytes(xa.itemsize * len(xa)))
    if nativecore().nc_binary(code, BINARY_OPS.index(op), _address(xa), _address(xb), _address(out), len(xa)) != 0:
        raise ValueError("nc_binary failed")
    return out.tolist()


def array_cast(values, from_dtype, to_dtype):
    """Converts between dtypes (float to integer saturates, NaN becomes 0)."""
    src_code, src = _typed(values, from_dtype)
    dst_code, dst_typecode = DTYPES[to_dtype]
    out = array.array(dst_typecode, bytes(array.array(dst_typecode).itemsize * len(src)))
    if nativecore().nc_cast(src_code, dst_code, _address(src), _address(out), len(src)) != 0:
        raise ValueError("nc_cast failed")
    return out.tolist()


# --- Rust: libnative_rs.so ---------------------------------------------------------------

def rs_crc32(data):
    b = _bytes(data)
    return native_rs().nrs_crc32(b, len(b))


def rs_adler32(data):
    b = _bytes(data)
    return native_rs().nrs_adler32(b, len(b))


def rs_fnv1a64(data):
    b = _bytes(data)
    return native_rs().nrs_fnv1a64(b, len(b))


def eval_expr(expression, x=0.0):
    """Evaluates an arithmetic expression (variable x, functions sqrt, ln, exp, abs, sin, cos,
    pow, min, max; constants pi, e). Raises SyntaxError or ArithmeticError."""
    out = ctypes.c_double()
    rc = native_rs().nrs_eval(_bytes(expression), float(x), ctypes.byref(out))
    if rc == 0:
        return out.value
    if rc == 1:
        raise SyntaxError("cannot parse expression: %r" % (expression,))
    if rc == 2:
        raise ArithmeticError("cannot evaluate expression: %r" % (expression,))
    raise ValueError("nrs_eval: bad arguments")


def semver_compare(a, b):
    """-1, 0 or 1 by SemVer 2.0 precedence; ValueError if either is not a version."""
    rc = native_rs().nrs_semver_compare(_bytes(a), _bytes(b))
    if rc == -2:
        raise ValueError("not a semantic version: %r / %r" % (a, b))
    return rc


def kv_count(text):
    """Number of key = value entries in INI-style text; ValueError if it does not parse."""
    n = native_rs().nrs_kv_count(_bytes(text))
    if n < 0:
        raise ValueError("text does not parse")
    return n


def varint_encode(values):
    """Zigzag + LEB128 encoding of a sequence of int64 values."""
    values = [int(v) for v in values]
    arr = (ctypes.c_int64 * max(len(values), 1))(*values)
    lib = native_rs()
    size = lib.nrs_varint_encode(arr, len(values), None, 0)
    buf = ctypes.create_string_buffer(max(size, 1))
    lib.nrs_varint_encode(arr, len(values), buf, size)
    return buf.raw[:size]


def selftest(verbose=False):
    """Runs known-answer checks through both libraries; returns the number of failures."""
    from .selftest import run

    return run(verbose=verbose)[1]

