// Numerical quadrature.
#include <cmath>
#include <stdexcept>

#include "nativecore/numeric.hpp"

namespace nativecore::numeric {
namespace {

double adaptive_step(const Func& f, double a, double b, double fa, double fm, double fb, double whole, double eps,
                     int depth) {
    const double m = 0.5 * (a + b);
    const double lm = 0.5 * (a + m), rm = 0.5 * (m + b);
    const double flm = f(lm), frm = f(rm);
    const double left = (m - a) / 6.0 * (fa + 4.0 * flm + fm);
    const double right = (b - m) / 6.0 * (fm + 4.0 * frm + fb);
    const double delta = left + right - whole;
    if (depth <= 0 || std::abs(delta) <= 15.0 * eps) return left + right + delta / 15.0;
    return adaptive_step(f, a, m, fa, flm, fm, left, eps / 2.0, depth - 1) +
           adaptive_step(f, m, b, fm, frm, fb, right, eps / 2.0, depth - 1);
}

}  // namespace

double trapezoid(const Func& f, double a, double b, std::size_t n) {
    if (n == 0) throw std::invalid_argument("trapezoid: n == 0");
    const double h = (b - a) / static_cast<double>(n);
    double s = 0.5 * (f(a) + f(b));
    for (std::size_t i = 1; i < n; ++i) s += f(a + h * static_cast<double>(i));
    return s * h;
}

double simpson(const Func& f, double a, double b, std::size_t n) {
    if (n == 0 || n % 2 != 0) throw std::invalid_argument("simpson: n must be even and positive");
    const double h = (b - a) / static_cast<double>(n);
    double s = f(a) + f(b);
    for (std::size_t i = 1; i < n; ++i) s += f(a + h * static_cast<double>(i)) * (i % 2 ? 4.0 : 2.0);
    return s * h / 3.0;
}

double gauss_legendre(const Func& f, double a, double b, unsigned n) {
    if (n == 0 || n > 64) throw std::invalid_argument("gauss_legendre: n must be in 1..64");
    const double pi = std::acos(-1.0);
    const double half = 0.5 * (b - a), mid = 0.5 * (a + b);
    double sum = 0.0;
    for (unsigned i = 1; i <= (n + 1) / 2; ++i) {
        // Initial guess (Tricomi), then Newton on P_n using the three-term recurrence.
        double x = std::cos(pi * (i - 0.25) / (n + 0.5));
        double dp = 0.0;
        for (int iter = 0; iter < 100; ++iter) {
            double p0 = 1.0, p1 = x;
            for (unsigned k = 2; k <= n; ++k) {
                const double p2 = ((2.0 * k - 1.0) * x * p1 - (k - 1.0) * p0) / k;
                p0 = p1;
                p1 = p2;
            }
            dp = n * (x * p1 - p0) / (x * x - 1.0);  // P_n'(x) from P_n = p1, P_{n-1} = p0
            const double dx = p1 / dp;
            x -= dx;
            if (std::abs(dx) < 1e-15) break;
        }
        const double w = 2.0 / ((1.0 - x * x) * dp * dp);
        sum += w * f(mid + half * x);
        if (2 * i - 1 != n) sum += w * f(mid - half * x);  // symmetric node, except the centre
    }
    return sum * half;
}

double adaptive_simpson(const Func& f, double a, double b, double eps, int max_depth) {
    const double fa = f(a), fb = f(b), fm = f(0.5 * (a + b));
    const double whole = (b - a) / 6.0 * (fa + 4.0 * fm + fb);
    return adaptive_step(f, a, b, fa, fm, fb, whole, eps, max_depth);
}

}  // namespace nativecore::numeric
