// Vectors, quaternions and 2-D geometry; see geometry.hpp for the instantiated types.
#include "nativecore/geometry.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

namespace nativecore::geometry {

template <typename T, std::size_t N>
Vec<T, N> Vec<T, N>::operator+(const Vec& o) const {
    Vec r;
    for (std::size_t i = 0; i < N; ++i) r.v[i] = v[i] + o.v[i];
    return r;
}

template <typename T, std::size_t N>
Vec<T, N> Vec<T, N>::operator-(const Vec& o) const {
    Vec r;
    for (std::size_t i = 0; i < N; ++i) r.v[i] = v[i] - o.v[i];
    return r;
}

template <typename T, std::size_t N>
Vec<T, N> Vec<T, N>::operator*(T s) const {
    Vec r;
    for (std::size_t i = 0; i < N; ++i) r.v[i] = v[i] * s;
    return r;
}

template <typename T, std::size_t N>
T Vec<T, N>::dot(const Vec& o) const {
    T s = 0;
    for (std::size_t i = 0; i < N; ++i) s += v[i] * o.v[i];
    return s;
}

template <typename T, std::size_t N>
T Vec<T, N>::norm() const {
    return std::sqrt(dot(*this));
}

template <typename T, std::size_t N>
Vec<T, N> Vec<T, N>::normalized() const {
    const T n = norm();
    if (n == T(0)) throw std::domain_error("Vec::normalized: zero vector");
    return *this * (T(1) / n);
}

template <typename T>
Vec<T, 3> cross(const Vec<T, 3>& a, const Vec<T, 3>& b) {
    return Vec<T, 3>{{a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]}};
}

template <typename T>
Quaternion<T> Quaternion<T>::from_axis_angle(const Vec<T, 3>& axis, T radians) {
    const Vec<T, 3> u = axis.normalized();
    const T s = std::sin(radians / T(2));
    return {std::cos(radians / T(2)), u[0] * s, u[1] * s, u[2] * s};
}

template <typename T>
Quaternion<T> Quaternion<T>::operator*(const Quaternion& o) const {
    return {w * o.w - x * o.x - y * o.y - z * o.z, w * o.x + x * o.w + y * o.z - z * o.y,
            w * o.y - x * o.z + y * o.w + z * o.x, w * o.z + x * o.y - y * o.x + z * o.w};
}

template <typename T>
T Quaternion<T>::norm() const {
    return std::sqrt(w * w + x * x + y * y + z * z);
}

template <typename T>
Quaternion<T> Quaternion<T>::normalized() const {
    const T n = norm();
    if (n == T(0)) throw std::domain_error("Quaternion::normalized: zero quaternion");
    return {w / n, x / n, y / n, z / n};
}

template <typename T>
Vec<T, 3> Quaternion<T>::rotate(const Vec<T, 3>& p) const {
    const Quaternion r = *this * Quaternion{T(0), p[0], p[1], p[2]} * conjugate();
    return Vec<T, 3>{{r.x, r.y, r.z}};
}

template <typename T>
Quaternion<T> Quaternion<T>::slerp(const Quaternion& a, Quaternion b, T t) {
    T d = a.w * b.w + a.x * b.x + a.y * b.y + a.z * b.z;
    if (d < T(0)) {  // take the short way round
        b = {-b.w, -b.x, -b.y, -b.z};
        d = -d;
    }
    if (d > T(0.9995)) {  // nearly parallel: normalized linear interpolation
        return Quaternion{a.w + t * (b.w - a.w), a.x + t * (b.x - a.x), a.y + t * (b.y - a.y), a.z + t * (b.z - a.z)}
            .normalized();
    }
    const T theta = std::acos(d);
    const T sa = std::sin((T(1) - t) * theta) / std::sin(theta);
    const T sb = std::sin(t * theta) / std::sin(theta);
    return {sa * a.w + sb * b.w, sa * a.x + sb * b.x, sa * a.y + sb * b.y, sa * a.z + sb * b.z};
}

template <typename T>
T orient(const Point<T>& o, const Point<T>& a, const Point<T>& b) {
    return (a.x - o.x) * (b.y - o.y) - (a.y - o.y) * (b.x - o.x);
}

template <typename T>
std::vector<Point<T>> convex_hull(std::vector<Point<T>> pts) {
    std::sort(pts.begin(), pts.end());
    pts.erase(std::unique(pts.begin(), pts.end()), pts.end());
    if (pts.size() < 3) return pts;
    std::vector<Point<T>> hull(2 * pts.size());
    std::size_t k = 0;
    for (std::size_t i = 0; i < pts.size(); ++i) {  // lower hull
        while (k >= 2 && orient(hull[k - 2], hull[k - 1], pts[i]) <= T(0)) --k;
        hull[k++] = pts[i];
    }
    for (std::size_t i = pts.size() - 1, lower = k + 1; i-- > 0;) {  // upper hull
        while (k >= lower && orient(hull[k - 2], hull[k - 1], pts[i]) <= T(0)) --k;
        hull[k++] = pts[i];
    }
    hull.resize(k - 1);  // the last point equals the first
    return hull;
}

template <typename T>
T polygon_area2(const std::vector<Point<T>>& poly) {
    T s = 0;
    for (std::size_t i = 0, n = poly.size(); i < n; ++i) {
        const Point<T>& a = poly[i];
        const Point<T>& b = poly[(i + 1) % n];
        s += a.x * b.y - a.y * b.x;
    }
    return s;
}

namespace {

template <typename T>
bool on_segment(const Point<T>& a, const Point<T>& b, const Point<T>& p) {
    return orient(a, b, p) == T(0) && std::min(a.x, b.x) <= p.x && p.x <= std::max(a.x, b.x) &&
           std::min(a.y, b.y) <= p.y && p.y <= std::max(a.y, b.y);
}

template <typename T>
int sign(T v) {
    return (T(0) < v) - (v < T(0));
}

template <typename T>
T closest_rec(std::vector<Point<T>>& pts, std::size_t lo, std::size_t hi, std::vector<Point<T>>& buf) {
    // pts[lo, hi) is sorted by x on entry and by y on return.
    auto dist2 = [](const Point<T>& a, const Point<T>& b) {
        const T dx = a.x - b.x, dy = a.y - b.y;
        return dx * dx + dy * dy;
    };
    auto by_y = [](const Point<T>& a, const Point<T>& b) { return a.y < b.y; };
    if (hi - lo <= 3) {
        T best = std::numeric_limits<T>::max();
        for (std::size_t i = lo; i < hi; ++i)
            for (std::size_t j = i + 1; j < hi; ++j) best = std::min(best, dist2(pts[i], pts[j]));
        std::sort(pts.begin() + static_cast<std::ptrdiff_t>(lo), pts.begin() + static_cast<std::ptrdiff_t>(hi), by_y);
        return best;
    }
    const std::size_t mid = lo + (hi - lo) / 2;
    const T mid_x = pts[mid].x;
    T best = std::min(closest_rec(pts, lo, mid, buf), closest_rec(pts, mid, hi, buf));
    std::merge(pts.begin() + static_cast<std::ptrdiff_t>(lo), pts.begin() + static_cast<std::ptrdiff_t>(mid),
               pts.begin() + static_cast<std::ptrdiff_t>(mid), pts.begin() + static_cast<std::ptrdiff_t>(hi),
               buf.begin(), by_y);
    std::copy(buf.begin(), buf.begin() + static_cast<std::ptrdiff_t>(hi - lo),
              pts.begin() + static_cast<std::ptrdiff_t>(lo));
    std::vector<Point<T>> strip;
    for (std::size_t i = lo; i < hi; ++i) {
        const T dx = pts[i].x - mid_x;
        if (dx * dx >= best) continue;
        for (auto it = strip.rbegin(); it != strip.rend(); ++it) {
            const T dy = pts[i].y - it->y;
            if (dy * dy >= best) break;
            best = std::min(best, dist2(pts[i], *it));
        }
        strip.push_back(pts[i]);
    }
    return best;
}

}  // namespace

template <typename T>
int point_in_polygon(const std::vector<Point<T>>& poly, const Point<T>& p) {
    int winding = 0;
    for (std::size_t i = 0, n = poly.size(); i < n; ++i) {
        const Point<T>& a = poly[i];
        const Point<T>& b = poly[(i + 1) % n];
        if (on_segment(a, b, p)) return 0;
        if (a.y <= p.y) {
            if (b.y > p.y && orient(a, b, p) > T(0)) ++winding;
        } else if (b.y <= p.y && orient(a, b, p) < T(0)) {
            --winding;
        }
    }
    return winding != 0 ? 1 : -1;
}

template <typename T>
bool segments_intersect(const Point<T>& a, const Point<T>& b, const Point<T>& c, const Point<T>& d) {
    const int o1 = sign(orient(a, b, c)), o2 = sign(orient(a, b, d));
    const int o3 = sign(orient(c, d, a)), o4 = sign(orient(c, d, b));
    if (o1 != o2 && o3 != o4) return true;
    return on_segment(a, b, c) || on_segment(a, b, d) || on_segment(c, d, a) || on_segment(c, d, b);
}

template <typename T>
T closest_pair_dist2(std::vector<Point<T>> pts) {
    if (pts.size() < 2) throw std::invalid_argument("closest_pair_dist2: need at least two points");
    std::sort(pts.begin(), pts.end());
    std::vector<Point<T>> buf(pts.size());
    return closest_rec(pts, 0, pts.size(), buf);
}

#define NC_GEOMETRY_FLOAT(T)                                             \
    template struct Vec<T, 2>;                                          \
    template struct Vec<T, 3>;                                          \
    template struct Vec<T, 4>;                                          \
    template Vec<T, 3> cross<T>(const Vec<T, 3>&, const Vec<T, 3>&);    \
    template struct Quaternion<T>;
NC_GEOMETRY_FLOAT(float)
NC_GEOMETRY_FLOAT(double)
NC_GEOMETRY_FLOAT(long double)
#undef NC_GEOMETRY_FLOAT

#define NC_GEOMETRY_2D(T)                                                                                    \
    template T orient<T>(const Point<T>&, const Point<T>&, const Point<T>&);                                 \
    template std::vector<Point<T>> convex_hull<T>(std::vector<Point<T>>);                                    \
    template T polygon_area2<T>(const std::vector<Point<T>>&);                                               \
    template int point_in_polygon<T>(const std::vector<Point<T>>&, const Point<T>&);                         \
    template bool segments_intersect<T>(const Point<T>&, const Point<T>&, const Point<T>&, const Point<T>&); \
    template T closest_pair_dist2<T>(std::vector<Point<T>>);
NC_GEOMETRY_2D(std::int64_t)
NC_GEOMETRY_2D(double)
#undef NC_GEOMETRY_2D

}  // namespace nativecore::geometry
