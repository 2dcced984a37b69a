// ghbuild-hip-selftest: the C API from plain host code (no HIP headers), with known answers.
// Exit status 0 when every check passed.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>

#include "ghbuild_hip.h"

static int failures = 0, passes = 0;

static void check(const char* what, bool ok, int err = 0) {
    if (ok) {
        ++passes;
        std::printf("  ok    %s\n", what);
    } else {
        ++failures;
        std::printf("  FAIL  %s (%s: %s)\n", what, ghr_error_name(err), ghr_error_string(err));
    }
}

int main() {
    int count = 0;
    int err = ghr_device_count(&count);
    check("hipGetDeviceCount", err == 0 && count > 0, err);
    char name[256] = "", arch[256] = "";
    if (count > 0) {
        err = ghr_device_info(0, name, sizeof name, arch, sizeof arch);
        check("hipGetDeviceProperties(0)", err == 0, err);
    }

    const size_t n = 3000;
    std::vector<float> a(n), b(n), out(n), y(n);
    for (size_t i = 0; i < n; ++i) {
        a[i] = static_cast<float>(i);
        b[i] = 2.0f * static_cast<float>(i) + 1.0f;
        y[i] = 1.0f;
    }
    err = ghr_vector_add(a.data(), b.data(), out.data(), n);
    bool ok = err == 0;
    for (size_t i = 0; ok && i < n; ++i) ok = out[i] == 3.0f * static_cast<float>(i) + 1.0f;
    check("vector_add n=3000", ok, err);

    err = ghr_saxpy(0.5f, a.data(), y.data(), n);
    ok = err == 0;
    for (size_t i = 0; ok && i < n; ++i) ok = y[i] == 0.5f * static_cast<float>(i) + 1.0f;
    check("saxpy n=3000", ok, err);

    float sum = -1.0f;
    err = ghr_reduce_sum(a.data(), n, &sum);
    check("reduce_sum n=3000", err == 0 && std::fabs(sum - 4498500.0f) <= 4.0f, err);

    const int m = 5, k = 3, nn = 4;
    float ma[m * k], mb[k * nn], mc[m * nn];
    for (int i = 0; i < m * k; ++i) ma[i] = static_cast<float>(i + 1);
    for (int i = 0; i < k * nn; ++i) mb[i] = static_cast<float>(i % 5);
    err = ghr_matmul(ma, mb, mc, m, nn, k);
    ok = err == 0;
    for (int r = 0; ok && r < m; ++r)
        for (int c = 0; ok && c < nn; ++c) {
            float want = 0.0f;
            for (int i = 0; i < k; ++i) want += ma[r * k + i] * mb[i * nn + c];
            ok = mc[r * nn + c] == want;
        }
    check("matmul 5x3 * 3x4", ok, err);

    err = ghr_bad_launch();
    check("2048 threads per block is refused (hipErrorInvalidConfiguration)", err == 9, err);

    std::printf("ghbuild-hip-selftest: %s on %s [%s]: %d passed, %d failed\n", ghr_compile_path(),
                count > 0 ? name : "no device", count > 0 ? arch : "-", passes, failures);
    return failures ? 1 : 0;
}
