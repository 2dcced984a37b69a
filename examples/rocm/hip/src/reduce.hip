// Sum of n floats: each thread folds a strided slice, then one atomicAdd per thread.
// (No __shared__/__syncthreads: the CPU stand-in cannot emulate a block barrier.)
#include "common.hpp"

__global__ void ghr_reduce_kernel(const float* x, size_t n, float* out) {
    size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
    float partial = 0.0f;
    for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
        partial += x[i];
    atomicAdd(out, partial);
}

extern "C" int ghr_reduce_sum(const float* x, size_t n, float* out) {
    if (!out || (n && !x)) return hipErrorInvalidValue;
    *out = 0.0f;
    if (n == 0) return hipSuccess;
    ghr::DeviceBuffer<float> dx, dsum;
    GHR_CHECK(dx.alloc(n));
    GHR_CHECK(dsum.alloc(1));
    GHR_CHECK(dx.upload(x, n));
    GHR_CHECK(hipMemset(dsum.ptr, 0, sizeof(float)));
    unsigned blocks = ghr::blocks_for(n);
    if (blocks > 32) blocks = 32;
    hipLaunchKernelGGL(ghr_reduce_kernel, dim3(blocks), dim3(ghr::kBlock), 0, 0, dx.ptr, n, dsum.ptr);
    GHR_CHECK_LAUNCH();
    GHR_CHECK(dsum.download(out, 1));
    return hipSuccess;
}
