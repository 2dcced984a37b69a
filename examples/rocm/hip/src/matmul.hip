// c = a * b (row-major), one thread per output element on a 2-D grid of 16x16 blocks.
#include "common.hpp"

__global__ void ghr_matmul_kernel(const float* a, const float* b, float* c, int m, int n, int k) {
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= m || col >= n) return;
    float acc = 0.0f;
    for (int i = 0; i < k; ++i) acc += a[row * k + i] * b[i * n + col];
    c[row * n + col] = acc;
}

extern "C" int ghr_matmul(const float* a, const float* b, float* c, int m, int n, int k) {
    if (m < 0 || n < 0 || k < 0) return hipErrorInvalidValue;
    if (m == 0 || n == 0) return hipSuccess;
    if (!c || (k && (!a || !b))) return hipErrorInvalidValue;
    const size_t sa = static_cast<size_t>(m) * k, sb = static_cast<size_t>(k) * n, sc = static_cast<size_t>(m) * n;
    ghr::DeviceBuffer<float> da, db, dc;
    GHR_CHECK(da.alloc(sa));
    GHR_CHECK(db.alloc(sb));
    GHR_CHECK(dc.alloc(sc));
    if (sa) GHR_CHECK(da.upload(a, sa));
    if (sb) GHR_CHECK(db.upload(b, sb));
    const dim3 block(16, 16);
    const dim3 grid((n + 15) / 16, (m + 15) / 16);
    hipLaunchKernelGGL(ghr_matmul_kernel, grid, block, 0, 0, da.ptr, db.ptr, dc.ptr, m, n, k);
    GHR_CHECK_LAUNCH();
    GHR_CHECK(dc.download(c, sc));
    return hipSuccess;
}
