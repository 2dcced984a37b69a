// Knuth-Morris-Pratt substring search.
#include "nativecore/text.hpp"

namespace nativecore::text {
namespace {

std::vector<std::size_t> failure_function(std::string_view p) {
    std::vector<std::size_t> fail(p.size(), 0);
    std::size_t k = 0;
    for (std::size_t i = 1; i < p.size(); ++i) {
        while (k > 0 && p[i] != p[k]) k = fail[k - 1];
        if (p[i] == p[k]) ++k;
        fail[i] = k;
    }
    return fail;
}

}  // namespace

std::vector<std::size_t> find_all(std::string_view haystack, std::string_view needle) {
    std::vector<std::size_t> out;
    if (needle.empty() || needle.size() > haystack.size()) return out;
    const std::vector<std::size_t> fail = failure_function(needle);
    std::size_t k = 0;
    for (std::size_t i = 0; i < haystack.size(); ++i) {
        while (k > 0 && haystack[i] != needle[k]) k = fail[k - 1];
        if (haystack[i] == needle[k]) ++k;
        if (k == needle.size()) {
            out.push_back(i + 1 - needle.size());
            k = fail[k - 1];
        }
    }
    return out;
}

}  // namespace nativecore::text
