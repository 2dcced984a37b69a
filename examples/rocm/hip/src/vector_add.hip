// out[i] = a[i] + b[i]: one thread per element.
#include "common.hpp"

__global__ void ghr_vector_add_kernel(const float* a, const float* b, float* out, size_t n) {
    size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i < n) out[i] = a[i] + b[i];
}

extern "C" int ghr_vector_add(const float* a, const float* b, float* out, size_t n) {
    if (n == 0) return hipSuccess;
    if (!a || !b || !out) return hipErrorInvalidValue;
    ghr::DeviceBuffer<float> da, db, dout;
    GHR_CHECK(da.alloc(n));
    GHR_CHECK(db.alloc(n));
    GHR_CHECK(dout.alloc(n));
    GHR_CHECK(da.upload(a, n));
    GHR_CHECK(db.upload(b, n));
    hipLaunchKernelGGL(ghr_vector_add_kernel, dim3(ghr::blocks_for(n)), dim3(ghr::kBlock), 0, 0,
                       da.ptr, db.ptr, dout.ptr, n);
    GHR_CHECK_LAUNCH();
    GHR_CHECK(dout.download(out, n));
    return hipSuccess;
}
