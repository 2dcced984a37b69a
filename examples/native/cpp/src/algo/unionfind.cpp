// Disjoint sets (union by rank, path halving) and Kruskal's MST.
#include <algorithm>
#include <numeric>

#include "nativecore/algo.hpp"

namespace nativecore::algo {

DisjointSet::DisjointSet(std::size_t n) : parent_(n), rank_(n, 0), sets_(n) {
    std::iota(parent_.begin(), parent_.end(), std::size_t{0});
}

std::size_t DisjointSet::find(std::size_t x) {
    while (parent_[x] != x) {
        parent_[x] = parent_[parent_[x]];
        x = parent_[x];
    }
    return x;
}

bool DisjointSet::unite(std::size_t a, std::size_t b) {
    a = find(a);
    b = find(b);
    if (a == b) return false;
    if (rank_[a] < rank_[b]) std::swap(a, b);
    parent_[b] = a;
    if (rank_[a] == rank_[b]) ++rank_[a];
    --sets_;
    return true;
}

std::optional<std::int64_t> minimum_spanning_tree(std::size_t n, std::vector<WeightedEdge> edges) {
    std::stable_sort(edges.begin(), edges.end(),
                     [](const WeightedEdge& x, const WeightedEdge& y) { return x.weight < y.weight; });
    DisjointSet ds(n);
    std::int64_t total = 0;
    for (const WeightedEdge& e : edges) {
        if (ds.unite(e.a, e.b)) total += e.weight;
    }
    if (n > 0 && ds.sets() != 1) return std::nullopt;
    return total;
}

}  // namespace nativecore::algo
