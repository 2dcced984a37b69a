// Dynamic programming classics.
#include <algorithm>
#include <limits>
#include <stdexcept>

#include "nativecore/algo.hpp"

namespace nativecore::algo {

KnapsackResult knapsack(const std::vector<std::size_t>& weights, const std::vector<std::int64_t>& values,
                        std::size_t capacity) {
    if (weights.size() != values.size()) throw std::invalid_argument("knapsack: size mismatch");
    const std::size_t n = weights.size();
    std::vector<std::vector<std::int64_t>> dp(n + 1, std::vector<std::int64_t>(capacity + 1, 0));
    for (std::size_t i = 1; i <= n; ++i) {
        for (std::size_t c = 0; c <= capacity; ++c) {
            dp[i][c] = dp[i - 1][c];
            if (weights[i - 1] <= c) dp[i][c] = std::max(dp[i][c], dp[i - 1][c - weights[i - 1]] + values[i - 1]);
        }
    }
    KnapsackResult r;
    r.value = dp[n][capacity];
    for (std::size_t i = n, c = capacity; i > 0; --i) {
        if (dp[i][c] != dp[i - 1][c]) {
            r.items.push_back(i - 1);
            c -= weights[i - 1];
        }
    }
    std::reverse(r.items.begin(), r.items.end());
    return r;
}

std::optional<std::size_t> min_coins(const std::vector<std::size_t>& coins, std::size_t amount) {
    constexpr std::size_t kInf = std::numeric_limits<std::size_t>::max();
    std::vector<std::size_t> best(amount + 1, kInf);
    best[0] = 0;
    for (std::size_t a = 1; a <= amount; ++a)
        for (const std::size_t c : coins)
            if (c > 0 && c <= a && best[a - c] != kInf) best[a] = std::min(best[a], best[a - c] + 1);
    if (best[amount] == kInf) return std::nullopt;
    return best[amount];
}

bool subset_sum(const std::vector<std::size_t>& items, std::size_t target) {
    std::vector<bool> reachable(target + 1, false);
    reachable[0] = true;
    for (const std::size_t x : items)
        for (std::size_t s = target; s >= x && s > 0; --s)
            if (reachable[s - x]) reachable[s] = true;
    return reachable[target];
}

}  // namespace nativecore::algo
