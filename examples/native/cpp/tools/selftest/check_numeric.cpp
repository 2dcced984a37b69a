#include <cmath>
#include <complex>
#include <limits>
#include <string>
#include <vector>

#include "check.hpp"
#include "nativecore/kernels.hpp"
#include "nativecore/matrix.hpp"
#include "nativecore/numeric.hpp"
#include "nativecore/stats.hpp"

namespace selftest {

void check_numeric(Checker& c) {
    namespace n = nativecore::numeric;
    c.section("matrix");
    const n::Matrix<double> a(2, 3, {1, 2, 3, 4, 5, 6});
    const n::Matrix<double> b(3, 2, {7, 8, 9, 10, 11, 12});
    c.expect(a * b == n::Matrix<double>(2, 2, {58, 64, 139, 154}), "matrix product");
    c.expect(a.transpose().transpose() == a, "transpose twice");
    c.expect_eq((a * b).trace(), 212.0, "trace");
    const n::Matrix<std::int64_t> fib(2, 2, {1, 1, 1, 0});
    c.expect_eq(n::matrix_pow(fib, 50)(0, 1), std::int64_t{12586269025}, "fib(50) by matrix power");
    c.expect(n::kronecker(n::Matrix<std::int64_t>::identity(2), fib).rows() == 4, "kronecker shape");
    // A larger product exercises the blocked loop against a naive one.
    n::Matrix<double> big(70, 45), big2(45, 33);
    for (std::size_t i = 0; i < 70; ++i)
        for (std::size_t j = 0; j < 45; ++j) big(i, j) = std::sin(double(i * 45 + j));
    for (std::size_t i = 0; i < 45; ++i)
        for (std::size_t j = 0; j < 33; ++j) big2(i, j) = std::cos(double(i * 33 + j));
    const n::Matrix<double> prod = big * big2;
    double worst = 0.0;
    for (std::size_t i = 0; i < 70; ++i)
        for (std::size_t j = 0; j < 33; ++j) {
            double s = 0.0;
            for (std::size_t k = 0; k < 45; ++k) s += big(i, k) * big2(k, j);
            worst = std::max(worst, std::abs(s - prod(i, j)));
        }
    c.expect(worst < 1e-9, "blocked product == naive product");

    c.section("linear algebra");
    const n::Matrix<double> m(3, 3, {2, -1, 0, -1, 2, -1, 0, -1, 2});
    c.expect_near(n::determinant(m), 4.0, 1e-12, "det(tridiag)");
    const auto x = n::solve(m, std::vector<double>{1, 0, 1});
    c.expect(x && std::abs((*x)[0] - 1) < 1e-12 && std::abs((*x)[1] - 1) < 1e-12 && std::abs((*x)[2] - 1) < 1e-12,
             "solve");
    const auto inv = n::inverse(m);
    c.expect(inv && (m * *inv).approx_equal(n::Matrix<double>::identity(3), 1e-12), "inverse");
    c.expect(!n::solve(n::Matrix<double>(2, 2, {1, 2, 2, 4}), std::vector<double>{1, 1}), "singular detected");
    c.expect_near(double(n::determinant(n::Matrix<float>(2, 2, {4, 3, 6, 3}))), -6.0, 1e-5, "det float");

    c.section("statistics");
    const std::vector<double> v = {2, 4, 4, 4, 5, 5, 7, 9};
    c.expect_near(n::mean(v), 5.0, 1e-15, "mean");
    c.expect_near(n::stddev(v, false), 2.0, 1e-15, "population stddev");
    c.expect_near(n::median(v), 4.5, 1e-15, "median");
    c.expect_near(n::percentile(v, 25.0), 4.0, 1e-15, "p25");
    n::RunningStats rs;
    for (const double d : v) rs.push(d);
    c.expect_near(rs.variance(), n::variance(v), 1e-12, "Welford == two-pass");
    c.expect(n::histogram(v, 0.0, 10.0, 5) == std::vector<std::size_t>{0, 1, 5, 1, 1}, "histogram");
    const std::vector<float> vf(v.begin(), v.end());
    const std::vector<long double> vl(v.begin(), v.end());
    c.expect_near(double(n::stddev(vf, false)), 2.0, 1e-6, "float stddev");
    c.expect_near(double(n::median(vl)), 4.5, 1e-15, "long double median");
    n::BasicRunningStats<float> rsf;
    for (const float d : vf) rsf.push(d);
    c.expect(rsf.min() == 2.0f && rsf.max() == 9.0f && rsf.count() == 8, "float running min/max");
    const std::vector<double> xs = {0, 1, 2, 3, 4}, ys = {1, 3, 5, 7, 9};
    const auto fit = n::fit_linear(xs, ys);
    c.expect(fit && std::abs(fit->slope - 2) < 1e-12 && std::abs(fit->intercept - 1) < 1e-12, "linear fit");
    c.expect_near(n::pearson(xs, ys), 1.0, 1e-12, "pearson");
    const auto pf = n::polyfit({-2, -1, 0, 1, 2, 3}, {17, 4, 1, 8, 25, 52}, 2);  // 1 + 2x + 5x^2
    c.expect(pf && std::abs((*pf)[0] - 1) < 1e-9 && std::abs((*pf)[1] - 2) < 1e-9 && std::abs((*pf)[2] - 5) < 1e-9,
             "polyfit");

    c.section("calculus");
    const n::Polynomial p({-2, 0, 1});  // x^2 - 2
    c.expect_near(p.newton_root(1.0).value_or(0), std::sqrt(2.0), 1e-12, "newton sqrt(2)");
    c.expect_eq(p.to_string(), std::string("x^2 - 2"), "polynomial to_string");
    c.expect_eq((p * p).degree(), 4u, "polynomial product degree");
    c.expect_near(p.integral()(3.0) - p.integral()(0.0), 3.0, 1e-12, "antiderivative");
    const double pi = std::acos(-1.0);
    c.expect_near(n::simpson([](double t) { return std::sin(t); }, 0, pi, 100), 2.0, 1e-7, "simpson sin");
    c.expect_near(n::adaptive_simpson([](double t) { return std::exp(-t * t); }, -6, 6), std::sqrt(pi), 1e-9,
                  "adaptive gaussian");
    c.expect_near(n::trapezoid([](double t) { return t; }, 0, 1, 10), 0.5, 1e-15, "trapezoid linear");
    c.expect_near(n::gauss_legendre([](double t) { return t * t * t * t * t * t * t; }, -1, 2, 4), 31.875, 1e-12,
                  "gauss-legendre exact for degree 7 with 4 nodes");
    c.expect_near(n::gauss_legendre([](double t) { return std::exp(t); }, 0, 1, 10), std::exp(1.0) - 1, 1e-14,
                  "gauss-legendre exp");
    c.expect_near(n::gauss_legendre([](double t) { return std::cos(t); }, 0, pi / 2, 1), pi / 2 * std::cos(pi / 4),
                  1e-15, "gauss-legendre 1 node is the midpoint rule");

    c.section("polynomial roots");
    // (x - 1)(x + 2)(x - 3)(x^2 + 1) = x^5 - 2x^4 - 4x^3 + 4x^2 - 5x + 6
    const n::Polynomial quint({6, -5, 4, -4, -2, 1});
    const auto roots = quint.all_roots();
    const std::complex<double> want[] = {{-2, 0}, {0, -1}, {0, 1}, {1, 0}, {3, 0}};
    bool roots_ok = roots.size() == 5;
    for (std::size_t i = 0; roots_ok && i < 5; ++i) roots_ok = std::abs(roots[i] - want[i]) < 1e-9;
    c.expect(roots_ok, "durand-kerner roots of a quintic");
    const auto rf = n::BasicPolynomial<float>({-2.0f, 0.0f, 1.0f}).all_roots();
    c.expect(rf.size() == 2 && std::abs(rf[1].real() - std::sqrt(2.0f)) < 1e-5f && rf[1].imag() == 0.0f,
             "float roots of x^2 - 2");
    const n::BasicPolynomial<long double> pl({-2.0L, 0.0L, 1.0L});
    c.expect(std::abs(pl.newton_root(1.0L).value_or(0) - std::sqrt(2.0L)) < 1e-17L, "long double newton");
    c.expect(std::abs(quint(std::complex<double>(0, 1))) < 1e-12, "complex evaluation at a root");

    c.section("fft");
    const auto conv = n::convolve({1, 2, 3}, {4, 5, 6});
    c.expect(conv == std::vector<std::int64_t>{4, 13, 28, 27, 18}, "convolution");
    std::vector<std::complex<double>> sig(16);
    for (std::size_t i = 0; i < 16; ++i) sig[i] = std::cos(2 * pi * 3 * double(i) / 16);
    n::fft(sig, false);
    c.expect_near(std::abs(sig[3]), 8.0, 1e-9, "fft peak");
    c.expect_near(std::abs(sig[4]), 0.0, 1e-9, "fft off-peak");
    std::vector<std::complex<long double>> sigl(64), orig;
    std::vector<std::complex<float>> sigf(64);
    for (std::size_t i = 0; i < 64; ++i) {
        sigl[i] = {std::sin(0.3L * i), std::cos(0.7L * i)};
        sigf[i] = {float(std::sin(0.3 * i)), float(std::cos(0.7 * i))};
    }
    orig = sigl;
    n::fft(sigl, false);
    n::fft(sigl, true);
    long double worst_l = 0;
    for (std::size_t i = 0; i < 64; ++i) worst_l = std::max(worst_l, std::abs(sigl[i] - orig[i]));
    c.expect(worst_l < 1e-16L, "long double fft round trip");
    double dc = 0.0;
    for (std::size_t i = 0; i < 64; ++i) dc += std::sin(0.3 * double(i));
    n::fft(sigf, false);
    c.expect_near(double(sigf[0].real()), dc, 1e-4, "float fft DC term");

    c.section("kernels");
    {
        namespace k = nativecore::kernels;
        const std::int8_t a8[3] = {100, -100, 5}, b8[3] = {100, -100, -6};
        std::int8_t c8[3];
        k::binary(k::DType::I8, k::BinaryOp::Add, a8, b8, c8, 3);
        c.expect(c8[0] == -56 && c8[1] == 56 && c8[2] == -1, "int8 add wraps");
        const std::int32_t a32[3] = {7, std::numeric_limits<std::int32_t>::min(), -9}, b32[3] = {0, -1, 2};
        std::int32_t c32[3];
        k::binary(k::DType::I32, k::BinaryOp::Div, a32, b32, c32, 3);
        c.expect(c32[0] == 0 && c32[1] == std::numeric_limits<std::int32_t>::min() && c32[2] == -4,
                 "int32 div: x/0 == 0, INT_MIN/-1 wraps, truncation");
        k::unary(k::DType::I32, k::UnaryOp::Abs, a32, c32, 3);
        c.expect(c32[0] == 7 && c32[1] == std::numeric_limits<std::int32_t>::min() && c32[2] == 9, "int32 abs");
        const float fs[5] = {300.0f, -1e9f, std::nanf(""), 2.9f, -2.9f};
        std::int8_t i8[5];
        k::cast(k::DType::F32, k::DType::I8, fs, i8, 5);
        c.expect(i8[0] == 127 && i8[1] == -128 && i8[2] == 0 && i8[3] == 2 && i8[4] == -2, "float->int8 saturates");
        const std::int64_t i64[3] = {-3, 1ll << 52, 17};
        double f64[3];
        k::cast(k::DType::I64, k::DType::F64, i64, f64, 3);
        c.expect(f64[0] == -3.0 && f64[1] == 4503599627370496.0 && f64[2] == 17.0, "int64->float64");
        const std::uint8_t u8[4] = {255, 255, 255, 255};
        c.expect_eq(k::reduce(k::DType::U8, k::ReduceOp::Sum, u8, 4), 1020.0, "uint8 sum accumulates wide");
        const float fv[5] = {2.5f, -1.0f, 7.0f, -1.0f, 7.0f};
        c.expect_eq(k::reduce(k::DType::F32, k::ReduceOp::ArgMin, fv, 5), 1.0, "argmin first");
        c.expect_eq(k::reduce(k::DType::F32, k::ReduceOp::ArgMax, fv, 5), 2.0, "argmax first");
        c.expect_near(k::reduce(k::DType::F32, k::ReduceOp::Mean, fv, 5), 2.9, 1e-6, "float mean");
        c.expect_eq(k::reduce(k::DType::F32, k::ReduceOp::SumSquares, fv, 5), 106.25, "sum of squares");
        c.expect(std::isnan(k::reduce(k::DType::F64, k::ReduceOp::Max, nullptr, 0)), "empty max is NaN");
        c.expect_eq(k::reduce(k::DType::I16, k::ReduceOp::Prod, nullptr, 0), 1.0, "empty prod is 1");
        const std::int16_t s16[3] = {30000, 30000, 10};
        std::int16_t cs16[3];
        k::cumsum(k::DType::I16, s16, cs16, 3);
        c.expect(cs16[0] == 30000 && cs16[1] == -5536 && cs16[2] == -5526, "int16 cumsum wraps");
        bool threw = false;
        try {
            k::reduce(k::DType::F64, k::ReduceOp::Sum, nullptr, 3);
        } catch (const k::KernelError&) {
            threw = true;
        }
        c.expect(threw, "null buffer rejected");
        std::size_t total = 0;
        for (int t = 0; t < k::kNumDTypes; ++t) total += k::dtype_size(static_cast<k::DType>(t));
        c.expect_eq(total, std::size_t{1 + 2 + 4 + 8 + 1 + 2 + 4 + 8 + 4 + 8}, "dtype sizes");
        c.expect_eq(std::string(k::dtype_name(k::DType::U16)), std::string("uint16"), "dtype names");
    }

    c.section("number theory");
    c.expect_eq(n::sieve(100).size(), 25u, "25 primes below 100");
    c.expect_eq(n::nth_prime(10000), std::uint64_t{104729}, "10000th prime");
    c.expect(n::is_prime(1000000007) && !n::is_prime(3215031751ull), "miller-rabin (incl. strong pseudoprime)");
    c.expect(n::factorize(600851475143ull) == std::vector<std::uint64_t>{71, 839, 1471, 6857}, "factorize");
    c.expect(n::factorize(1000000016000000063ull) == std::vector<std::uint64_t>{1000000007, 1000000009},
             "pollard rho semiprime");
    using R = n::Rational<std::int64_t>;
    c.expect(R(1, 3) + R(1, 6) == R(1, 2), "rational add");
    c.expect_eq((R(3, 4) / R(-9, 8)).to_string(), std::string("-2/3"), "rational divide");
    c.expect(R(1, 3) < R(1, 2), "rational compare");
    const R approx = n::approximate(pi, 1000);
    c.expect(approx == R(355, 113), "pi ~ 355/113");
    c.expect_eq(n::factorial(30).to_string(), std::string("265252859812191058636308480000000"), "30!");
    c.expect_eq(n::fibonacci(100).to_string(), std::string("354224848179261915075"), "fib(100)");
    const auto bignum = n::BigUint::parse("123456789012345678901234567890");
    c.expect(bignum && (*bignum * *bignum).to_string() == "15241578753238836750495351562536198787501905199875019052100",
             "bigint square");
    c.expect_eq(n::factorial(100).digits(), 158u, "100! digits");
}

}  // namespace selftest
