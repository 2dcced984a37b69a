"""HIP kernels from libghbuild_hip.so, through ctypes. Every call copies host lists to the device and back."""

from ._native import HipError, bad_launch, compile_path, device_count, device_info, hip_architectures, \
    matmul, reduce_sum, runtime_version, saxpy, vector_add

__version__ = "0.1.0"
__all__ = ["HipError", "bad_launch", "compile_path", "device_count", "device_info", "hip_architectures",
           "matmul", "reduce_sum", "runtime_version", "saxpy", "vector_add"]
