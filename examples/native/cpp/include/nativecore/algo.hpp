#pragma once
// Sorting, searching, graphs, dynamic programming and random numbers.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace nativecore::algo {

// sort.cpp: explicit instantiations, with std::less and std::greater, for int, unsigned,
// std::int64_t, std::uint64_t, float, double, long double, std::string, std::string_view,
// std::pair<int, int> and std::pair<double, std::string>.
template <typename T, typename Compare = std::less<T>> void merge_sort(std::vector<T>& v, Compare cmp = Compare{});
template <typename T, typename Compare = std::less<T>> void heap_sort(std::vector<T>& v, Compare cmp = Compare{});
template <typename T, typename Compare = std::less<T>> void insertion_sort(std::vector<T>& v, Compare cmp = Compare{});
template <typename T, typename Compare = std::less<T>> void quick_sort(std::vector<T>& v, Compare cmp = Compare{});
template <typename T, typename Compare = std::less<T>> bool is_sorted_by(const std::vector<T>& v, Compare cmp = Compare{});

// search.cpp: instantiated for int, unsigned, std::int64_t, std::uint64_t, float, double,
// long double, std::string and std::string_view.
template <typename T> std::optional<std::size_t> binary_search_index(const std::vector<T>& v, const T& x);
template <typename T> std::size_t lower_bound_index(const std::vector<T>& v, const T& x);
// k-th smallest (0-based) by quickselect; v is reordered.
template <typename T> T quickselect(std::vector<T>& v, std::size_t k);
std::optional<std::size_t> exponential_search(const std::vector<std::int64_t>& v, std::int64_t x);

// graph.cpp
struct Edge {
    std::size_t to;
    std::int64_t weight;
};
class Graph {
public:
    explicit Graph(std::size_t n, bool directed = false) : adj_(n), directed_(directed) {}
    void add_edge(std::size_t from, std::size_t to, std::int64_t weight = 1);
    std::size_t size() const noexcept { return adj_.size(); }
    const std::vector<Edge>& neighbors(std::size_t v) const { return adj_.at(v); }
    bool directed() const noexcept { return directed_; }

private:
    std::vector<std::vector<Edge>> adj_;
    bool directed_;
};
constexpr std::int64_t kUnreachable = std::numeric_limits<std::int64_t>::max();
std::vector<std::int64_t> bfs_distances(const Graph& g, std::size_t source);
std::vector<std::int64_t> dijkstra(const Graph& g, std::size_t source);
std::optional<std::vector<std::size_t>> topological_sort(const Graph& g);
std::size_t connected_components(const Graph& g);

// unionfind.cpp
class DisjointSet {
public:
    explicit DisjointSet(std::size_t n);
    std::size_t find(std::size_t x);
    bool unite(std::size_t a, std::size_t b);
    std::size_t sets() const noexcept { return sets_; }

private:
    std::vector<std::size_t> parent_;
    std::vector<std::size_t> rank_;
    std::size_t sets_;
};
struct WeightedEdge {
    std::size_t a, b;
    std::int64_t weight;
};
// Kruskal; returns total weight, or nullopt when the graph is disconnected.
std::optional<std::int64_t> minimum_spanning_tree(std::size_t n, std::vector<WeightedEdge> edges);

// lcs.cpp
std::string longest_common_subsequence(std::string_view a, std::string_view b);
std::size_t longest_increasing_subsequence(const std::vector<std::int64_t>& v);

// knapsack.cpp
struct KnapsackResult {
    std::int64_t value = 0;
    std::vector<std::size_t> items;
};
KnapsackResult knapsack(const std::vector<std::size_t>& weights, const std::vector<std::int64_t>& values,
                        std::size_t capacity);
std::optional<std::size_t> min_coins(const std::vector<std::size_t>& coins, std::size_t amount);
bool subset_sum(const std::vector<std::size_t>& items, std::size_t target);

// rng.cpp
class SplitMix64 {
public:
    explicit SplitMix64(std::uint64_t seed) : state_(seed) {}
    std::uint64_t next() noexcept;

private:
    std::uint64_t state_;
};
class Pcg32 {
public:
    Pcg32(std::uint64_t seed, std::uint64_t stream);
    std::uint32_t next() noexcept;
    std::uint32_t bounded(std::uint32_t bound) noexcept;             // uniform in [0, bound)
    double uniform() noexcept;                                       // [0, 1)
    double normal(double mean = 0.0, double stddev = 1.0) noexcept;  // Marsaglia polar method
    double exponential(double rate = 1.0) noexcept;

private:
    std::uint64_t state_ = 0;
    std::uint64_t inc_ = 0;
    bool has_spare_ = false;
    double spare_ = 0.0;
};
template <typename T> void shuffle(std::vector<T>& v, Pcg32& rng);
// k distinct indices from [0, n) in increasing order (Floyd's algorithm).
std::vector<std::size_t> sample_indices(std::size_t n, std::size_t k, Pcg32& rng);

}  // namespace nativecore::algo
