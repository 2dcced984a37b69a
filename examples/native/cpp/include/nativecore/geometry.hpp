#pragma once
// Small fixed-size vectors, quaternions and 2-D computational geometry.
// Instantiated in src/numeric/geometry.cpp: Vec for float, double, long double (N = 2, 3, 4);
// Quaternion for float, double, long double; the 2-D algorithms for std::int64_t (exact)
// and double.
#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace nativecore::geometry {

template <typename T, std::size_t N>
struct Vec {
    std::array<T, N> v{};

    T& operator[](std::size_t i) { return v[i]; }
    const T& operator[](std::size_t i) const { return v[i]; }
    Vec operator+(const Vec& o) const;
    Vec operator-(const Vec& o) const;
    Vec operator*(T s) const;
    bool operator==(const Vec& o) const { return v == o.v; }
    T dot(const Vec& o) const;
    T norm() const;
    Vec normalized() const;
};
template <typename T> Vec<T, 3> cross(const Vec<T, 3>& a, const Vec<T, 3>& b);

template <typename T>
struct Quaternion {
    T w = 1, x = 0, y = 0, z = 0;

    static Quaternion from_axis_angle(const Vec<T, 3>& axis, T radians);
    Quaternion operator*(const Quaternion& o) const;  // Hamilton product
    Quaternion conjugate() const { return {w, -x, -y, -z}; }
    T norm() const;
    Quaternion normalized() const;
    Vec<T, 3> rotate(const Vec<T, 3>& p) const;
    // Spherical linear interpolation between unit quaternions, t in [0, 1].
    static Quaternion slerp(const Quaternion& a, Quaternion b, T t);
};

template <typename T>
struct Point {
    T x{}, y{};
    bool operator==(const Point& o) const { return x == o.x && y == o.y; }
    bool operator<(const Point& o) const { return x != o.x ? x < o.x : y < o.y; }
};

// Twice the signed area of triangle (o, a, b): > 0 counter-clockwise, < 0 clockwise, 0 collinear.
template <typename T> T orient(const Point<T>& o, const Point<T>& a, const Point<T>& b);
// Andrew's monotone chain; counter-clockwise, starting at the lowest-leftmost point,
// without collinear points.
template <typename T> std::vector<Point<T>> convex_hull(std::vector<Point<T>> pts);
// Twice the signed area (shoelace formula).
template <typename T> T polygon_area2(const std::vector<Point<T>>& poly);
// 1 inside, 0 on the boundary, -1 outside (winding number).
template <typename T> int point_in_polygon(const std::vector<Point<T>>& poly, const Point<T>& p);
template <typename T> bool segments_intersect(const Point<T>& a, const Point<T>& b, const Point<T>& c,
                                              const Point<T>& d);
// Squared distance of the closest pair (divide and conquer); needs >= 2 points.
template <typename T> T closest_pair_dist2(std::vector<Point<T>> pts);

}  // namespace nativecore::geometry
