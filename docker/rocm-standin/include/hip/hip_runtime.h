// ghbuild CPU stand-in for <hip/hip_runtime.h>. NOT HIP.
//
// Part of docker/rocm-standin: a Debian image that stands in for a ROCm dev image on machines
// without AMD GPUs or access to ROCm images. `hipcc` there compiles HIP sources as plain C++
// with g++ and this header; kernels run on the CPU, one thread after another:
//
//   for each block (z, y, x), for each thread (z, y, x): set blockIdx/threadIdx, call the kernel.
//
// Enough for simple kernels: __global__/__device__/__host__, threadIdx/blockIdx/blockDim/gridDim,
// hipLaunchKernelGGL (the `<<<...>>>` syntax is not parsed by g++: use hipLaunchKernelGGL, which
// real HIP has too), hipMalloc/hipMemcpy/hipMemset/hipFree, hipDeviceSynchronize,
// hipGetLastError/hipPeekAtLastError, hipGetErrorString/hipGetErrorName, hipGetDeviceCount,
// hipGetDeviceProperties, hipSetDevice/hipGetDevice, hipRuntimeGetVersion, and atomicAdd/atomicMax
// (trivial here: threads never run concurrently).
//
// Not provided, so code that needs them fails to compile instead of computing garbage:
// __syncthreads and __shared__ (threads of a block run one after another, so a barrier cannot be
// emulated), streams and events beyond the null stream, warp intrinsics, textures.
// Error codes have the values of HIP 6.x's hip_runtime_api.h.

#ifndef GHBUILD_HIP_STANDIN_RUNTIME_H
#define GHBUILD_HIP_STANDIN_RUNTIME_H

#ifndef __cplusplus
#error "the ghbuild HIP stand-in needs C++ (hipcc compiles .hip files as C++17)"
#endif

#include <cmath>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <utility>

#define GHBUILD_HIP_STANDIN 1
#ifndef __HIP_PLATFORM_AMD__
#define __HIP_PLATFORM_AMD__ 1
#endif
#define HIP_VERSION_MAJOR 6
#define HIP_VERSION_MINOR 4
#define HIP_VERSION_PATCH 0
#define HIP_VERSION (HIP_VERSION_MAJOR * 10000000 + HIP_VERSION_MINOR * 100000 + HIP_VERSION_PATCH)

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline __attribute__((always_inline))
#define __launch_bounds__(...)

typedef enum hipError_t {
    hipSuccess = 0,
    hipErrorInvalidValue = 1,
    hipErrorOutOfMemory = 2,
    hipErrorNotInitialized = 3,
    hipErrorInvalidConfiguration = 9,
    hipErrorInvalidMemcpyDirection = 21,
    hipErrorNoDevice = 100,
    hipErrorInvalidDevice = 101,
    hipErrorInvalidDevicePointer = 17,
    hipErrorLaunchFailure = 719,
    hipErrorNotSupported = 801,
    hipErrorUnknown = 999,
} hipError_t;

typedef enum hipMemcpyKind {
    hipMemcpyHostToHost = 0,
    hipMemcpyHostToDevice = 1,
    hipMemcpyDeviceToHost = 2,
    hipMemcpyDeviceToDevice = 3,
    hipMemcpyDefault = 4,
} hipMemcpyKind;

typedef struct ihipStream_t* hipStream_t;

struct dim3 {
    unsigned int x, y, z;
    constexpr dim3(unsigned int vx = 1, unsigned int vy = 1, unsigned int vz = 1) : x(vx), y(vy), z(vz) {}
};

typedef struct hipDeviceProp_t {
    char name[256];
    char gcnArchName[256];
    size_t totalGlobalMem;
    int multiProcessorCount;
    int maxThreadsPerBlock;
    int warpSize;
    int major;
    int minor;
} hipDeviceProp_t;

namespace ghbuild_hip_standin {
// The launch coordinates of the "thread" running now (C++17 inline variables: one per program).
inline dim3 thread_idx{0, 0, 0}, block_idx{0, 0, 0}, block_dim{1, 1, 1}, grid_dim{1, 1, 1};
inline hipError_t last_error = hipSuccess;
inline int current_device = 0;

inline hipError_t record(hipError_t err) {
    if (err != hipSuccess) last_error = err;
    return err;
}

template <typename... KernelArgs, typename... Args>
void launch(void (*kernel)(KernelArgs...), dim3 grid, dim3 block, size_t shared_bytes, hipStream_t stream,
            Args&&... args) {
    (void)stream;
    static_assert(sizeof...(KernelArgs) == sizeof...(Args), "hipLaunchKernelGGL: wrong number of kernel arguments");
    const unsigned long long threads = 1ull * block.x * block.y * block.z;
    if (threads == 0 || threads > 1024 || block.z > 1024 || grid.x == 0 || grid.y == 0 || grid.z == 0 ||
        shared_bytes != 0) {
        // shared_bytes: dynamic shared memory needs concurrent threads; not emulated.
        record(hipErrorInvalidConfiguration);
        return;
    }
    grid_dim = grid;
    block_dim = block;
    for (unsigned bz = 0; bz < grid.z; ++bz)
        for (unsigned by = 0; by < grid.y; ++by)
            for (unsigned bx = 0; bx < grid.x; ++bx) {
                block_idx = dim3(bx, by, bz);
                for (unsigned tz = 0; tz < block.z; ++tz)
                    for (unsigned ty = 0; ty < block.y; ++ty)
                        for (unsigned tx = 0; tx < block.x; ++tx) {
                            thread_idx = dim3(tx, ty, tz);
                            kernel(static_cast<KernelArgs>(args)...);
                        }
            }
}
}  // namespace ghbuild_hip_standin

#define threadIdx (::ghbuild_hip_standin::thread_idx)
#define blockIdx (::ghbuild_hip_standin::block_idx)
#define blockDim (::ghbuild_hip_standin::block_dim)
#define gridDim (::ghbuild_hip_standin::grid_dim)

#define hipLaunchKernelGGL(kernel, grid, block, shared_bytes, stream, ...) \
    ::ghbuild_hip_standin::launch((kernel), dim3(grid), dim3(block), (size_t)(shared_bytes), (hipStream_t)(stream), \
                                  ##__VA_ARGS__)

inline const char* hipGetErrorName(hipError_t err) {
    switch (err) {
        case hipSuccess: return "hipSuccess";
        case hipErrorInvalidValue: return "hipErrorInvalidValue";
        case hipErrorOutOfMemory: return "hipErrorOutOfMemory";
        case hipErrorNotInitialized: return "hipErrorNotInitialized";
        case hipErrorInvalidConfiguration: return "hipErrorInvalidConfiguration";
        case hipErrorInvalidMemcpyDirection: return "hipErrorInvalidMemcpyDirection";
        case hipErrorNoDevice: return "hipErrorNoDevice";
        case hipErrorInvalidDevice: return "hipErrorInvalidDevice";
        case hipErrorInvalidDevicePointer: return "hipErrorInvalidDevicePointer";
        case hipErrorLaunchFailure: return "hipErrorLaunchFailure";
        case hipErrorNotSupported: return "hipErrorNotSupported";
        default: return "hipErrorUnknown";
    }
}

inline const char* hipGetErrorString(hipError_t err) {
    switch (err) {
        case hipSuccess: return "no error";
        case hipErrorInvalidValue: return "invalid argument";
        case hipErrorOutOfMemory: return "out of memory";
        case hipErrorNotInitialized: return "initialization error";
        case hipErrorInvalidConfiguration: return "invalid configuration argument";
        case hipErrorInvalidMemcpyDirection: return "invalid copy direction for memcpy";
        case hipErrorNoDevice: return "no ROCm-capable device is detected";
        case hipErrorInvalidDevice: return "invalid device ordinal";
        case hipErrorInvalidDevicePointer: return "invalid device pointer";
        case hipErrorLaunchFailure: return "unspecified launch failure";
        case hipErrorNotSupported: return "operation not supported";
        default: return "unknown error";
    }
}

inline hipError_t hipGetLastError(void) {
    hipError_t err = ::ghbuild_hip_standin::last_error;
    ::ghbuild_hip_standin::last_error = hipSuccess;
    return err;
}

inline hipError_t hipPeekAtLastError(void) { return ::ghbuild_hip_standin::last_error; }

inline hipError_t hipMalloc(void** ptr, size_t size) {
    if (ptr == nullptr) return ::ghbuild_hip_standin::record(hipErrorInvalidValue);
    *ptr = std::malloc(size ? size : 1);
    return *ptr ? hipSuccess : ::ghbuild_hip_standin::record(hipErrorOutOfMemory);
}

template <typename T>
inline hipError_t hipMalloc(T** ptr, size_t size) {
    return hipMalloc(reinterpret_cast<void**>(ptr), size);
}

inline hipError_t hipFree(void* ptr) {
    std::free(ptr);
    return hipSuccess;
}

inline hipError_t hipMemcpy(void* dst, const void* src, size_t size, hipMemcpyKind kind) {
    if (kind < hipMemcpyHostToHost || kind > hipMemcpyDefault)
        return ::ghbuild_hip_standin::record(hipErrorInvalidMemcpyDirection);
    if (size && (dst == nullptr || src == nullptr)) return ::ghbuild_hip_standin::record(hipErrorInvalidValue);
    if (size) std::memmove(dst, src, size);
    return hipSuccess;
}

inline hipError_t hipMemset(void* dst, int value, size_t size) {
    if (size && dst == nullptr) return ::ghbuild_hip_standin::record(hipErrorInvalidValue);
    if (size) std::memset(dst, value, size);
    return hipSuccess;
}

inline hipError_t hipDeviceSynchronize(void) { return hipSuccess; }

inline hipError_t hipGetDeviceCount(int* count) {
    if (count == nullptr) return ::ghbuild_hip_standin::record(hipErrorInvalidValue);
    *count = 1;
    return hipSuccess;
}

inline hipError_t hipSetDevice(int device) {
    if (device != 0) return ::ghbuild_hip_standin::record(hipErrorInvalidDevice);
    ::ghbuild_hip_standin::current_device = device;
    return hipSuccess;
}

inline hipError_t hipGetDevice(int* device) {
    if (device == nullptr) return ::ghbuild_hip_standin::record(hipErrorInvalidValue);
    *device = ::ghbuild_hip_standin::current_device;
    return hipSuccess;
}

inline hipError_t hipGetDeviceProperties(hipDeviceProp_t* prop, int device) {
    if (prop == nullptr) return ::ghbuild_hip_standin::record(hipErrorInvalidValue);
    if (device != 0) return ::ghbuild_hip_standin::record(hipErrorInvalidDevice);
    std::memset(prop, 0, sizeof(*prop));
    std::strncpy(prop->name, "ghbuild CPU stand-in (not a GPU)", sizeof(prop->name) - 1);
    std::strncpy(prop->gcnArchName, "cpu-standin", sizeof(prop->gcnArchName) - 1);
    prop->multiProcessorCount = 1;
    prop->maxThreadsPerBlock = 1024;
    prop->warpSize = 1;
    return hipSuccess;
}

inline hipError_t hipRuntimeGetVersion(int* version) {
    if (version == nullptr) return ::ghbuild_hip_standin::record(hipErrorInvalidValue);
    *version = HIP_VERSION;
    return hipSuccess;
}

// Atomics: threads never run concurrently here, so a plain read-modify-write is atomic.
template <typename T>
inline T atomicAdd(T* address, T value) {
    T old = *address;
    *address = old + value;
    return old;
}

template <typename T>
inline T atomicMax(T* address, T value) {
    T old = *address;
    if (value > old) *address = value;
    return old;
}

#endif  // GHBUILD_HIP_STANDIN_RUNTIME_H
