// Longest common subsequence (DP with traceback) and longest increasing subsequence.
#include <algorithm>

#include "nativecore/algo.hpp"

namespace nativecore::algo {

std::string longest_common_subsequence(std::string_view a, std::string_view b) {
    const std::size_t n = a.size(), m = b.size();
    std::vector<std::vector<std::size_t>> dp(n + 1, std::vector<std::size_t>(m + 1, 0));
    for (std::size_t i = n; i-- > 0;)
        for (std::size_t j = m; j-- > 0;)
            dp[i][j] = a[i] == b[j] ? dp[i + 1][j + 1] + 1 : std::max(dp[i + 1][j], dp[i][j + 1]);
    std::string out;
    out.reserve(dp[0][0]);
    std::size_t i = 0, j = 0;
    while (i < n && j < m) {
        if (a[i] == b[j]) {
            out.push_back(a[i]);
            ++i;
            ++j;
        } else if (dp[i + 1][j] >= dp[i][j + 1]) {
            ++i;
        } else {
            ++j;
        }
    }
    return out;
}

std::size_t longest_increasing_subsequence(const std::vector<std::int64_t>& v) {
    std::vector<std::int64_t> tails;  // patience sorting
    for (const std::int64_t x : v) {
        const auto it = std::lower_bound(tails.begin(), tails.end(), x);
        if (it == tails.end())
            tails.push_back(x);
        else
            *it = x;
    }
    return tails.size();
}

}  // namespace nativecore::algo
