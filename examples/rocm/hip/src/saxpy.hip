// y[i] = alpha * x[i] + y[i], with a grid-stride loop (fewer blocks than elements).
#include "common.hpp"

__global__ void ghr_saxpy_kernel(float alpha, const float* x, float* y, size_t n) {
    size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
    for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
        y[i] = alpha * x[i] + y[i];
}

extern "C" int ghr_saxpy(float alpha, const float* x, float* y, size_t n) {
    if (n == 0) return hipSuccess;
    if (!x || !y) return hipErrorInvalidValue;
    ghr::DeviceBuffer<float> dx, dy;
    GHR_CHECK(dx.alloc(n));
    GHR_CHECK(dy.alloc(n));
    GHR_CHECK(dx.upload(x, n));
    GHR_CHECK(dy.upload(y, n));
    unsigned blocks = ghr::blocks_for(n);
    if (blocks > 64) blocks = 64;
    hipLaunchKernelGGL(ghr_saxpy_kernel, dim3(blocks), dim3(ghr::kBlock), 0, 0, alpha, dx.ptr, dy.ptr, n);
    GHR_CHECK_LAUNCH();
    GHR_CHECK(dy.download(y, n));
    return hipSuccess;
}
