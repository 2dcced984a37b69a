/* ghbuild ROCm example: a small C API over a few HIP kernels (libghbuild_hip.so).
 *
 * Every function returning int returns a hipError_t value (0 = hipSuccess); ghr_error_string()
 * turns it into text. Buffers are host memory: each call copies to the device and back.
 */
#ifndef GHBUILD_HIP_H
#define GHBUILD_HIP_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define GHR_EXPORT __attribute__((visibility("default")))

GHR_EXPORT const char* ghr_version(void);
/* How the kernels were compiled: "hip-language" (CMake's HIP language, clang, real device code)
 * or "hipcc-standin" (the CPU stand-in's hipcc: C++ on the CPU). */
GHR_EXPORT const char* ghr_compile_path(void);
/* The HIP architectures the device code was built for ("" on the stand-in). */
GHR_EXPORT const char* ghr_hip_architectures(void);
GHR_EXPORT int ghr_runtime_version(int* version);
GHR_EXPORT const char* ghr_error_string(int error);
GHR_EXPORT const char* ghr_error_name(int error);

GHR_EXPORT int ghr_device_count(int* count);
/* Device name and gcnArchName (e.g. "gfx942:sramecc+:xnack-"). */
GHR_EXPORT int ghr_device_info(int device, char* name, size_t name_len, char* arch, size_t arch_len);

GHR_EXPORT int ghr_vector_add(const float* a, const float* b, float* out, size_t n);
GHR_EXPORT int ghr_saxpy(float alpha, const float* x, float* y, size_t n);
GHR_EXPORT int ghr_reduce_sum(const float* x, size_t n, float* out);
/* c[m x n] = a[m x k] * b[k x n], row-major. */
GHR_EXPORT int ghr_matmul(const float* a, const float* b, float* c, int m, int n, int k);
/* Launches a kernel with 2048 threads per block (over every HIP limit) and returns the launch
 * error: hipErrorInvalidConfiguration (9) when error reporting works. */
GHR_EXPORT int ghr_bad_launch(void);

#ifdef __cplusplus
}
#endif

#endif
