"""Loads the two shared libraries from this package's directory and declares their C ABI."""

import ctypes
import os
import threading

_HERE = os.path.dirname(os.path.abspath(__file__))
_lock = threading.Lock()
_cache = {}

c_double_p = ctypes.POINTER(ctypes.c_double)
c_int64_p = ctypes.POINTER(ctypes.c_int64)

# name: (restype, argtypes)
_NATIVECORE = {
    "nc_version": (ctypes.c_char_p, []),
    "nc_crc32": (ctypes.c_uint32, [ctypes.c_void_p, ctypes.c_size_t]),
    "nc_adler32": (ctypes.c_uint32, [ctypes.c_void_p, ctypes.c_size_t]),
    "nc_fnv1a64": (ctypes.c_uint64, [ctypes.c_void_p, ctypes.c_size_t]),
    "nc_murmur3_32": (ctypes.c_uint32, [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_uint32]),
    "nc_xxh32": (ctypes.c_uint32, [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_uint32]),
    "nc_determinant": (ctypes.c_int, [c_double_p, ctypes.c_size_t, c_double_p]),
    "nc_solve": (ctypes.c_int, [c_double_p, c_double_p, ctypes.c_size_t, c_double_p]),
    "nc_mean": (ctypes.c_double, [c_double_p, ctypes.c_size_t]),
    "nc_stddev": (ctypes.c_double, [c_double_p, ctypes.c_size_t]),
    "nc_median": (ctypes.c_double, [c_double_p, ctypes.c_size_t]),
    "nc_levenshtein": (ctypes.c_size_t, [ctypes.c_char_p, ctypes.c_char_p]),
    "nc_count_tokens": (ctypes.c_long, [ctypes.c_char_p]),
    "nc_nth_prime": (ctypes.c_uint64, [ctypes.c_uint32]),
    "nc_is_prime": (ctypes.c_int, [ctypes.c_uint64]),
    "nc_factorial_decimal": (ctypes.c_size_t, [ctypes.c_uint, ctypes.c_char_p, ctypes.c_size_t]),
    "nc_reduce": (ctypes.c_int, [ctypes.c_int, ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t, c_double_p]),
    "nc_binary": (ctypes.c_int, [ctypes.c_int, ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
                                 ctypes.c_size_t]),
    "nc_cast": (ctypes.c_int, [ctypes.c_int, ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t]),
    "nc_selftest": (ctypes.c_int, []),
}

_NATIVE_RS = {
    "nrs_version": (ctypes.c_char_p, []),
    "nrs_crc32": (ctypes.c_uint32, [ctypes.c_void_p, ctypes.c_size_t]),
    "nrs_adler32": (ctypes.c_uint32, [ctypes.c_void_p, ctypes.c_size_t]),
    "nrs_fnv1a64": (ctypes.c_uint64, [ctypes.c_void_p, ctypes.c_size_t]),
    "nrs_eval": (ctypes.c_int, [ctypes.c_char_p, ctypes.c_double, c_double_p]),
    "nrs_semver_compare": (ctypes.c_int, [ctypes.c_char_p, ctypes.c_char_p]),
    "nrs_kv_count": (ctypes.c_int64, [ctypes.c_char_p]),
    "nrs_varint_encode": (ctypes.c_size_t, [c_int64_p, ctypes.c_size_t, ctypes.c_char_p, ctypes.c_size_t]),
    "nrs_selftest": (ctypes.c_int, []),
}


def library_path(filename):
    return os.path.join(_HERE, filename)


def _load(filename, signatures):
    with _lock:
        lib = _cache.get(filename)
        if lib is not None:
            return lib
        path = library_path(filename)
        if not os.path.isfile(path):
            raise ImportError("ghbuild_example: %s is missing from %s (broken install?)" % (filename, _HERE))
        lib = ctypes.CDLL(path)
        for name, (restype, argtypes) in signatures.items():
            fn = getattr(lib, name)  # AttributeError here means an ABI mismatch
            fn.restype = restype
            fn.argtypes = argtypes
        _cache[filename] = lib
        return lib


def nativecore():
    """The C++ library (libnativecore.so)."""
    return _load("libnativecore.so", _NATIVECORE)


def native_rs():
    """The Rust library (libnative_rs.so)."""
    return _load("libnative_rs.so", _NATIVE_RS)
