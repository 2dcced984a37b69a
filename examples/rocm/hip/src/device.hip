// Device queries, error text, and how this library was compiled.
#include <cstring>

#include "common.hpp"

#ifndef GHR_COMPILE_PATH
#error "GHR_COMPILE_PATH must be set by CMakeLists.txt"
#endif
#ifndef GHR_HIP_ARCHITECTURES
#define GHR_HIP_ARCHITECTURES ""
#endif

__global__ void ghr_noop_kernel(int* p) {
    if (p) p[threadIdx.x] = 0;
}

extern "C" const char* ghr_version(void) { return "0.1.0"; }
extern "C" const char* ghr_compile_path(void) { return GHR_COMPILE_PATH; }
extern "C" const char* ghr_hip_architectures(void) { return GHR_HIP_ARCHITECTURES; }
extern "C" const char* ghr_error_string(int error) { return hipGetErrorString(static_cast<hipError_t>(error)); }
extern "C" const char* ghr_error_name(int error) { return hipGetErrorName(static_cast<hipError_t>(error)); }

extern "C" int ghr_runtime_version(int* version) {
    if (!version) return hipErrorInvalidValue;
    GHR_CHECK(hipRuntimeGetVersion(version));
    return hipSuccess;
}

extern "C" int ghr_device_count(int* count) {
    if (!count) return hipErrorInvalidValue;
    *count = 0;
    GHR_CHECK(hipGetDeviceCount(count));
    return hipSuccess;
}

static void copy_text(char* dst, size_t len, const char* src) {
    if (!dst || len == 0) return;
    std::strncpy(dst, src, len - 1);
    dst[len - 1] = '\0';
}

extern "C" int ghr_device_info(int device, char* name, size_t name_len, char* arch, size_t arch_len) {
    hipDeviceProp_t prop;
    GHR_CHECK(hipGetDeviceProperties(&prop, device));
    copy_text(name, name_len, prop.name);
    copy_text(arch, arch_len, prop.gcnArchName);
    return hipSuccess;
}

extern "C" int ghr_bad_launch(void) {
    (void)hipGetLastError();  // start clean
    hipLaunchKernelGGL(ghr_noop_kernel, dim3(1), dim3(2048), 0, 0, static_cast<int*>(nullptr));
    hipError_t err = hipGetLastError();
    (void)hipDeviceSynchronize();
    return static_cast<int>(err);
}
