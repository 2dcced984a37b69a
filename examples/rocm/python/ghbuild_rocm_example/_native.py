"""ctypes bindings for libghbuild_hip.so (shipped inside this package)."""

import ctypes
import os

_LIB = None
_HERE = os.path.dirname(os.path.abspath(__file__))
LIBRARY = os.path.join(_HERE, "libghbuild_hip.so")


class HipError(RuntimeError):
    """A HIP call failed: .code is the hipError_t value, .name its name (hipErrorNoDevice, ...)."""

    def __init__(self, what, code):
        lib = _lib()
        self.code = code
        self.name = lib.ghr_error_name(code).decode()
        super().__init__("%s: %s (%s, %d)" % (what, lib.ghr_error_string(code).decode(), self.name, code))


def _lib():
    global _LIB
    if _LIB is None:
        lib = ctypes.CDLL(LIBRARY)
        f = ctypes.c_float
        pf = ctypes.POINTER(ctypes.c_float)
        size = ctypes.c_size_t
        for name, res, args in (
            ("ghr_version", ctypes.c_char_p, []),
            ("ghr_compile_path", ctypes.c_char_p, []),
            ("ghr_hip_architectures", ctypes.c_char_p, []),
            ("ghr_error_string", ctypes.c_char_p, [ctypes.c_int]),
            ("ghr_error_name", ctypes.c_char_p, [ctypes.c_int]),
            ("ghr_runtime_version", ctypes.c_int, [ctypes.POINTER(ctypes.c_int)]),
            ("ghr_device_count", ctypes.c_int, [ctypes.POINTER(ctypes.c_int)]),
            ("ghr_device_info", ctypes.c_int, [ctypes.c_int, ctypes.c_char_p, size, ctypes.c_char_p, size]),
            ("ghr_vector_add", ctypes.c_int, [pf, pf, pf, size]),
            ("ghr_saxpy", ctypes.c_int, [f, pf, pf, size]),
            ("ghr_reduce_sum", ctypes.c_int, [pf, size, pf]),
            ("ghr_matmul", ctypes.c_int, [pf, pf, pf, ctypes.c_int, ctypes.c_int, ctypes.c_int]),
            ("ghr_bad_launch", ctypes.c_int, []),
        ):
            fn = getattr(lib, name)
            fn.restype = res
            fn.argtypes = args
        _LIB = lib
    return _LIB


def _floats(values):
    return (ctypes.c_float * max(1, len(values)))(*values)


def _check(what, code):
    if code != 0:
        raise HipError(what, code)


def compile_path():
    """'hip-language' (real device code) or 'hipcc-standin' (the CPU stand-in)."""
    return _lib().ghr_compile_path().decode()


def hip_architectures():
    return _lib().ghr_hip_architectures().decode()


def runtime_version():
    out = ctypes.c_int(0)
    _check("hipRuntimeGetVersion", _lib().ghr_runtime_version(ctypes.byref(out)))
    return out.value


def device_count():
    out = ctypes.c_int(0)
    _check("hipGetDeviceCount", _lib().ghr_device_count(ctypes.byref(out)))
    return out.value


def device_info(device=0):
    name, arch = ctypes.create_string_buffer(256), ctypes.create_string_buffer(256)
    _check("hipGetDeviceProperties(%d)" % device, _lib().ghr_device_info(device, name, 256, arch, 256))
    return name.value.decode(errors="replace"), arch.value.decode(errors="replace")


def vector_add(a, b):
    if len(a) != len(b):
        raise ValueError("vector_add: lengths differ")
    out = _floats([0.0] * len(a))
    _check("vector_add", _lib().ghr_vector_add(_floats(a), _floats(b), out, len(a)))
    return list(out[: len(a)])


def saxpy(alpha, x, y):
    if len(x) != len(y):
        raise ValueError("saxpy: lengths differ")
    ys = _floats(y)
    _check("saxpy", _lib().ghr_saxpy(alpha, _floats(x), ys, len(x)))
    return list(ys[: len(y)])


def reduce_sum(x):
    out = ctypes.c_float(0.0)
    _check("reduce_sum", _lib().ghr_reduce_sum(_floats(x), len(x), ctypes.byref(out)))
    return out.value


def matmul(a, b):
    """a: m rows of k, b: k rows of n (lists of lists) -> m rows of n."""
    m, k = len(a), len(a[0]) if a else 0
    n = len(b[0]) if b else 0
    if len(b) != k or any(len(r) != k for r in a) or any(len(r) != n for r in b):
        raise ValueError("matmul: shapes do not match")
    c = _floats([0.0] * (m * n))
    flat_a = _floats([v for r in a for v in r])
    flat_b = _floats([v for r in b for v in r])
    _check("matmul", _lib().ghr_matmul(flat_a, flat_b, c, m, n, k))
    return [list(c[i * n:(i + 1) * n]) for i in range(m)]


def bad_launch():
    """The hipError_t of a launch with 2048 threads per block (9, hipErrorInvalidConfiguration, expected)."""
    return _lib().ghr_bad_launch()
