// Least-squares fits.
#include <cmath>
#include <stdexcept>

#include "nativecore/matrix.hpp"
#include "nativecore/stats.hpp"

namespace nativecore::numeric {

std::optional<LinearFit> fit_linear(const std::vector<double>& x, const std::vector<double>& y) {
    if (x.size() != y.size()) throw std::invalid_argument("fit_linear: size mismatch");
    if (x.size() < 2) return std::nullopt;
    const double mx = mean(x), my = mean(y);
    double sxx = 0.0, sxy = 0.0, syy = 0.0;
    for (std::size_t i = 0; i < x.size(); ++i) {
        sxx += (x[i] - mx) * (x[i] - mx);
        sxy += (x[i] - mx) * (y[i] - my);
        syy += (y[i] - my) * (y[i] - my);
    }
    if (sxx == 0.0) return std::nullopt;
    LinearFit f;
    f.slope = sxy / sxx;
    f.intercept = my - f.slope * mx;
    f.r2 = syy == 0.0 ? 1.0 : (sxy * sxy) / (sxx * syy);
    return f;
}

std::optional<std::vector<double>> polyfit(const std::vector<double>& x, const std::vector<double>& y,
                                           unsigned degree) {
    if (x.size() != y.size()) throw std::invalid_argument("polyfit: size mismatch");
    const std::size_t m = degree + 1;
    if (x.size() < m) return std::nullopt;
    // Normal equations (V^T V) c = V^T y with a Vandermonde matrix V, in long double.
    Matrix<long double> v(x.size(), m);
    for (std::size_t i = 0; i < x.size(); ++i) {
        long double p = 1.0L;
        for (std::size_t j = 0; j < m; ++j) {
            v(i, j) = p;
            p *= x[i];
        }
    }
    const Matrix<long double> vt = v.transpose();
    const Matrix<long double> a = vt * v;
    std::vector<long double> yl(y.begin(), y.end());
    const std::vector<long double> b = mat_vec(vt, yl);
    const auto c = solve(a, b);
    if (!c) return std::nullopt;
    return std::vector<double>(c->begin(), c->end());
}

}  // namespace nativecore::numeric
