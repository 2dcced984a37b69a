#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <string>
#include <string_view>
#include <vector>

#include "check.hpp"
#include "nativecore/algo.hpp"
#include "nativecore/geometry.hpp"

namespace selftest {

void check_algo(Checker& c) {
    namespace a = nativecore::algo;
    c.section("rng");
    a::Pcg32 pcg(42, 54);
    const std::uint32_t expected[] = {0xa15c02b7u, 0x7b47f409u, 0xba1d3330u, 0x83d2f293u, 0xbfa4784bu, 0xcbed606eu};
    bool pcg_ok = true;
    for (const std::uint32_t e : expected) pcg_ok = pcg_ok && pcg.next() == e;
    c.expect(pcg_ok, "pcg32 reference sequence (seed 42, stream 54)");
    a::SplitMix64 sm(0);
    c.expect_eq(sm.next(), 0xe220a8397b1dcdafull, "splitmix64(0) first output");
    std::size_t below = 0;
    for (int i = 0; i < 10000; ++i) below += pcg.bounded(10) < 5 ? 1 : 0;
    c.expect(below > 4700 && below < 5300, "bounded() roughly uniform");
    a::Pcg32 gen(2024, 7);
    std::vector<double> normals(20000), expos(20000);
    for (auto& x : normals) x = gen.normal(3.0, 2.0);
    for (auto& x : expos) x = gen.exponential(4.0);
    const double nm = std::accumulate(normals.begin(), normals.end(), 0.0) / normals.size();
    double nv = 0;
    for (const double x : normals) nv += (x - nm) * (x - nm);
    nv /= normals.size() - 1;
    c.expect(std::abs(nm - 3.0) < 0.05 && std::abs(nv - 4.0) < 0.15, "normal(3, 2) moments");
    const double em = std::accumulate(expos.begin(), expos.end(), 0.0) / expos.size();
    c.expect(std::abs(em - 0.25) < 0.01 && *std::min_element(expos.begin(), expos.end()) >= 0.0, "exponential(4) mean");
    const auto picks = a::sample_indices(100, 10, gen);
    c.expect(picks.size() == 10 && std::is_sorted(picks.begin(), picks.end()) &&
                 std::adjacent_find(picks.begin(), picks.end()) == picks.end() && picks.back() < 100,
             "sample_indices distinct and in range");
    c.expect(a::sample_indices(5, 9, gen) == std::vector<std::size_t>{0, 1, 2, 3, 4}, "sample all");

    c.section("sorting");
    std::vector<int> base(2000);
    std::iota(base.begin(), base.end(), -1000);
    a::Pcg32 rng(7, 1);
    a::shuffle(base, rng);
    auto v1 = base, v2 = base, v3 = base, v4 = base;
    a::merge_sort(v1);
    a::heap_sort(v2);
    a::quick_sort(v3);
    std::vector<int> small(base.begin(), base.begin() + 300);
    a::insertion_sort(small);
    std::sort(v4.begin(), v4.end());
    c.expect(v1 == v4 && v2 == v4 && v3 == v4, "merge/heap/quick sort agree with std::sort");
    c.expect(a::is_sorted_by(small), "insertion sort");
    std::vector<std::string> words = {"pear", "apple", "fig", "banana", "cherry"};
    a::merge_sort(words, std::greater<std::string>());
    c.expect(words.front() == "pear" && words.back() == "apple", "descending strings");
    std::vector<std::pair<int, int>> pairs = {{2, 1}, {1, 2}, {1, 1}, {0, 9}};
    a::quick_sort(pairs);
    c.expect(pairs[0].first == 0 && pairs[1] == std::make_pair(1, 1), "pairs");
    std::vector<std::pair<double, std::string>> scored = {{0.5, "b"}, {0.9, "a"}, {0.5, "a"}, {0.1, "z"}};
    a::heap_sort(scored, std::greater<std::pair<double, std::string>>());
    c.expect(scored.front().second == "a" && scored[1] == std::make_pair(0.5, std::string("b")), "scored names");
    std::vector<std::string_view> views = {"delta", "alpha", "charlie", "bravo"};
    a::merge_sort(views);
    c.expect(views.front() == "alpha" && views.back() == "delta", "string_view sort");
    std::vector<std::uint64_t> big = {~0ull, 0, 1ull << 63, 42};
    a::quick_sort(big, std::greater<std::uint64_t>());
    c.expect(big.front() == ~0ull && big.back() == 0, "uint64 descending");
    std::vector<long double> ld = {3.5L, -1.25L, 2.0L};
    a::insertion_sort(ld);
    c.expect(a::is_sorted_by(ld) && ld.front() == -1.25L, "long double sort");
    std::vector<float> fl(500);
    for (std::size_t i = 0; i < fl.size(); ++i) fl[i] = float((i * 7919) % 500) - 250.0f;
    auto fl2 = fl;
    a::quick_sort(fl);
    a::merge_sort(fl2);
    c.expect(fl == fl2 && a::is_sorted_by(fl), "float quick == merge");

    c.section("searching");
    const std::vector<std::int64_t> sorted = {1, 3, 5, 7, 9, 11, 13, 15, 17};
    c.expect(a::binary_search_index(sorted, std::int64_t{13}).value_or(99) == 6, "binary search hit");
    c.expect(!a::binary_search_index(sorted, std::int64_t{4}), "binary search miss");
    c.expect_eq(a::lower_bound_index(sorted, std::int64_t{4}), 2u, "lower bound");
    c.expect(a::exponential_search(sorted, 17).value_or(99) == 8, "exponential search");
    std::vector<double> sel = {9, 1, 8, 2, 7, 3, 6, 4, 5};
    c.expect_eq(a::quickselect(sel, 4), 5.0, "quickselect median");
    const std::vector<std::string_view> names = {"ant", "bee", "cat", "dog"};
    c.expect(a::binary_search_index(names, std::string_view("cat")).value_or(9) == 2, "string_view search");
    std::vector<unsigned> us = {50, 10, 40, 20, 30};
    c.expect_eq(a::quickselect(us, 0), 10u, "quickselect min");

    c.section("graphs");
    a::Graph g(6);
    g.add_edge(0, 1, 7);
    g.add_edge(0, 2, 9);
    g.add_edge(0, 5, 14);
    g.add_edge(1, 2, 10);
    g.add_edge(1, 3, 15);
    g.add_edge(2, 3, 11);
    g.add_edge(2, 5, 2);
    g.add_edge(3, 4, 6);
    g.add_edge(4, 5, 9);
    const auto d = a::dijkstra(g, 0);
    c.expect(d == std::vector<std::int64_t>{0, 7, 9, 20, 20, 11}, "dijkstra");
    c.expect_eq(a::bfs_distances(g, 0)[4], std::int64_t{2}, "bfs hops");
    a::Graph dag(5, true);
    dag.add_edge(3, 1);
    dag.add_edge(1, 0);
    dag.add_edge(4, 0);
    dag.add_edge(2, 4);
    const auto order = a::topological_sort(dag);
    c.expect(order && *order == std::vector<std::size_t>{2, 3, 1, 4, 0}, "topological order");
    dag.add_edge(0, 3);
    c.expect(!a::topological_sort(dag), "cycle detected");
    a::Graph forest(7);
    forest.add_edge(0, 1);
    forest.add_edge(2, 3);
    forest.add_edge(3, 4);
    c.expect_eq(a::connected_components(forest), 4u, "components");
    const auto mst = a::minimum_spanning_tree(
        4, {{0, 1, 10}, {0, 2, 6}, {0, 3, 5}, {1, 3, 15}, {2, 3, 4}});
    c.expect_eq(mst.value_or(-1), std::int64_t{19}, "kruskal");

    c.section("geometry");
    {
        namespace geo = nativecore::geometry;
        using P = geo::Point<std::int64_t>;
        const std::vector<P> pts = {{0, 0}, {2, 0}, {1, 1}, {2, 2}, {0, 2}, {1, 0}, {2, 2}};
        const auto hull = geo::convex_hull(pts);
        c.expect(hull == std::vector<P>{{0, 0}, {2, 0}, {2, 2}, {0, 2}}, "convex hull (ccw, no collinear)");
        c.expect_eq(geo::polygon_area2(hull), std::int64_t{8}, "shoelace area");
        c.expect(geo::point_in_polygon(hull, P{1, 1}) == 1 && geo::point_in_polygon(hull, P{2, 1}) == 0 &&
                     geo::point_in_polygon(hull, P{3, 1}) == -1,
                 "point in polygon");
        c.expect(geo::segments_intersect(P{0, 0}, P{2, 2}, P{0, 2}, P{2, 0}) &&
                     !geo::segments_intersect(P{0, 0}, P{2, 0}, P{0, 1}, P{2, 1}) &&
                     geo::segments_intersect(P{0, 0}, P{1, 1}, P{1, 1}, P{3, 0}),
                 "segment intersection");
        a::Pcg32 prng(99, 3);
        std::vector<P> cloud(300);
        for (auto& p : cloud) p = P{std::int64_t(prng.bounded(100000)), std::int64_t(prng.bounded(100000))};
        std::int64_t brute = std::numeric_limits<std::int64_t>::max();
        for (std::size_t i = 0; i < cloud.size(); ++i)
            for (std::size_t j = i + 1; j < cloud.size(); ++j) {
                const std::int64_t dx = cloud[i].x - cloud[j].x, dy = cloud[i].y - cloud[j].y;
                brute = std::min(brute, dx * dx + dy * dy);
            }
        c.expect_eq(geo::closest_pair_dist2(cloud), brute, "closest pair == brute force");
        const auto big_hull = geo::convex_hull(cloud);
        bool all_inside = true;
        for (const auto& p : cloud) all_inside = all_inside && geo::point_in_polygon(big_hull, p) >= 0;
        c.expect(all_inside && geo::polygon_area2(big_hull) > 0, "every point inside its hull");

        const double pi = std::acos(-1.0);
        using V3 = geo::Vec<double, 3>;
        const V3 ex{{1, 0, 0}}, ey{{0, 1, 0}}, ez{{0, 0, 1}};
        c.expect(geo::cross(ex, ey) == ez, "cross product");
        const auto q = geo::Quaternion<double>::from_axis_angle(ez, pi / 2);
        c.expect((q.rotate(ex) - ey).norm() < 1e-15, "quaternion rotation");
        const auto half = geo::Quaternion<double>::slerp(geo::Quaternion<double>{}, q, 0.5);
        const V3 r = half.rotate(ex);
        c.expect(std::abs(r[0] - std::sqrt(0.5)) < 1e-15 && std::abs(r[1] - std::sqrt(0.5)) < 1e-15, "slerp halfway");
        const auto qf = geo::Quaternion<float>::from_axis_angle(geo::Vec<float, 3>{{1, 1, 1}}, float(2 * pi / 3));
        const auto rf = qf.rotate(geo::Vec<float, 3>{{1, 0, 0}});
        c.expect(std::abs(rf[1] - 1.0f) < 1e-6f, "120 degrees about (1,1,1) maps x to y");
        c.expect(std::abs((geo::Quaternion<long double>::from_axis_angle(geo::Vec<long double, 3>{{0, 0, 1}}, 1.0L) *
                           geo::Quaternion<long double>::from_axis_angle(geo::Vec<long double, 3>{{0, 0, 1}}, -1.0L))
                              .w - 1.0L) < 1e-18L,
                 "q * q^-1 == 1");
        c.expect_near(geo::Vec<double, 4>{{1, 2, 2, 4}}.norm(), 5.0, 1e-15, "4-vector norm");
    }

    c.section("dynamic programming");
    c.expect_eq(a::longest_common_subsequence("AGGTAB", "GXTXAYB"), std::string("GTAB"), "lcs");
    c.expect_eq(a::longest_increasing_subsequence({10, 9, 2, 5, 3, 7, 101, 18}), 4u, "lis");
    const auto ks = a::knapsack({1, 3, 4, 5}, {1, 4, 5, 7}, 7);
    c.expect(ks.value == 9 && ks.items == std::vector<std::size_t>{1, 2}, "knapsack");
    c.expect_eq(a::min_coins({1, 5, 10, 25}, 63).value_or(0), 6u, "coin change");
    c.expect(!a::min_coins({4, 6}, 7), "coin change impossible");
    c.expect(a::subset_sum({3, 34, 4, 12, 5, 2}, 9) && !a::subset_sum({3, 34, 4, 12, 5, 2}, 30), "subset sum");
}

}  // namespace selftest
