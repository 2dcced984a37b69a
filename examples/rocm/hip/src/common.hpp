// Shared by the kernels' host-side launchers: error checks and a device buffer that frees itself.
#pragma once

#include <hip/hip_runtime.h>

#include <cstddef>

#include "ghbuild_hip.h"

#define GHR_CHECK(expr)                                   \
    do {                                                  \
        hipError_t ghr_err_ = (expr);                     \
        if (ghr_err_ != hipSuccess) return (int)ghr_err_; \
    } while (0)

// A launch reports configuration errors through hipGetLastError, execution errors through the
// next synchronisation: check both.
#define GHR_CHECK_LAUNCH()                  \
    do {                                    \
        GHR_CHECK(hipGetLastError());       \
        GHR_CHECK(hipDeviceSynchronize());  \
    } while (0)

namespace ghr {

template <typename T>
struct DeviceBuffer {
    T* ptr = nullptr;
    DeviceBuffer() = default;
    DeviceBuffer(const DeviceBuffer&) = delete;
    DeviceBuffer& operator=(const DeviceBuffer&) = delete;
    ~DeviceBuffer() {
        if (ptr) (void)hipFree(ptr);
    }
    hipError_t alloc(size_t count) { return hipMalloc(reinterpret_cast<void**>(&ptr), (count ? count : 1) * sizeof(T)); }
    hipError_t upload(const T* host, size_t count) {
        return hipMemcpy(ptr, host, count * sizeof(T), hipMemcpyHostToDevice);
    }
    hipError_t download(T* host, size_t count) const {
        return hipMemcpy(host, ptr, count * sizeof(T), hipMemcpyDeviceToHost);
    }
};

constexpr unsigned kBlock = 256;

inline unsigned blocks_for(size_t n, unsigned block = kBlock) {
    return static_cast<unsigned>((n + block - 1) / block);
}

}  // namespace ghr
