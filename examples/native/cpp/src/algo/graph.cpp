// Graph algorithms on adjacency lists.
#include <algorithm>
#include <deque>
#include <queue>
#include <stdexcept>

#include "nativecore/algo.hpp"

namespace nativecore::algo {

void Graph::add_edge(std::size_t from, std::size_t to, std::int64_t weight) {
    if (from >= adj_.size() || to >= adj_.size()) throw std::out_of_range("Graph::add_edge: vertex out of range");
    adj_[from].push_back({to, weight});
    if (!directed_ && from != to) adj_[to].push_back({from, weight});
}

std::vector<std::int64_t> bfs_distances(const Graph& g, std::size_t source) {
    std::vector<std::int64_t> dist(g.size(), kUnreachable);
    std::deque<std::size_t> queue{source};
    dist.at(source) = 0;
    while (!queue.empty()) {
        const std::size_t v = queue.front();
        queue.pop_front();
        for (const Edge& e : g.neighbors(v)) {
            if (dist[e.to] == kUnreachable) {
                dist[e.to] = dist[v] + 1;
                queue.push_back(e.to);
            }
        }
    }
    return dist;
}

std::vector<std::int64_t> dijkstra(const Graph& g, std::size_t source) {
    using Item = std::pair<std::int64_t, std::size_t>;
    std::vector<std::int64_t> dist(g.size(), kUnreachable);
    std::priority_queue<Item, std::vector<Item>, std::greater<Item>> pq;
    dist.at(source) = 0;
    pq.push({0, source});
    while (!pq.empty()) {
        const auto [d, v] = pq.top();
        pq.pop();
        if (d != dist[v]) continue;
        for (const Edge& e : g.neighbors(v)) {
            if (e.weight < 0) throw std::invalid_argument("dijkstra: negative edge weight");
            const std::int64_t nd = d + e.weight;
            if (nd < dist[e.to]) {
                dist[e.to] = nd;
                pq.push({nd, e.to});
            }
        }
    }
    return dist;
}

std::optional<std::vector<std::size_t>> topological_sort(const Graph& g) {
    if (!g.directed()) throw std::invalid_argument("topological_sort: graph is undirected");
    std::vector<std::size_t> indegree(g.size(), 0);
    for (std::size_t v = 0; v < g.size(); ++v)
        for (const Edge& e : g.neighbors(v)) ++indegree[e.to];
    // Kahn's algorithm with a min-heap for a deterministic (smallest-first) order.
    std::priority_queue<std::size_t, std::vector<std::size_t>, std::greater<std::size_t>> ready;
    for (std::size_t v = 0; v < g.size(); ++v)
        if (indegree[v] == 0) ready.push(v);
    std::vector<std::size_t> order;
    order.reserve(g.size());
    while (!ready.empty()) {
        const std::size_t v = ready.top();
        ready.pop();
        order.push_back(v);
        for (const Edge& e : g.neighbors(v))
            if (--indegree[e.to] == 0) ready.push(e.to);
    }
    if (order.size() != g.size()) return std::nullopt;  // cycle
    return order;
}

std::size_t connected_components(const Graph& g) {
    std::vector<bool> seen(g.size(), false);
    std::size_t count = 0;
    std::vector<std::size_t> stack;
    for (std::size_t s = 0; s < g.size(); ++s) {
        if (seen[s]) continue;
        ++count;
        seen[s] = true;
        stack.push_back(s);
        while (!stack.empty()) {
            const std::size_t v = stack.back();
            stack.pop_back();
            for (const Edge& e : g.neighbors(v)) {
                if (!seen[e.to]) {
                    seen[e.to] = true;
                    stack.push_back(e.to);
                }
            }
        }
    }
    return count;
}

}  // namespace nativecore::algo
