// Word frequencies: words are runs of ASCII letters, digits and apostrophes.
#include <algorithm>
#include <regex>
#include <unordered_map>

#include "nativecore/text.hpp"

namespace nativecore::text {

namespace {

using Counts = std::unordered_map<std::string, std::size_t>;

std::vector<std::pair<std::string, std::size_t>> most_frequent(const Counts& counts, std::size_t k) {
    std::vector<std::pair<std::string, std::size_t>> items(counts.begin(), counts.end());
    auto by_count = [](const auto& a, const auto& b) {
        return a.second != b.second ? a.second > b.second : a.first < b.first;
    };
    if (k < items.size()) {
        std::partial_sort(items.begin(), items.begin() + static_cast<std::ptrdiff_t>(k), items.end(), by_count);
        items.resize(k);
    } else {
        std::sort(items.begin(), items.end(), by_count);
    }
    return items;
}

}  // namespace

std::vector<std::pair<std::string, std::size_t>> top_words_matching(std::string_view text, std::size_t k,
                                                                    const std::string& word_pattern) {
    const std::regex re(word_pattern, std::regex::ECMAScript);
    Counts counts;
    using It = std::regex_iterator<std::string_view::const_iterator>;
    for (It it(text.begin(), text.end(), re), end; it != end; ++it) {
        if (it->length(0) == 0) continue;
        std::string w = it->str();
        std::transform(w.begin(), w.end(), w.begin(),
                       [](char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c; });
        ++counts[w];
    }
    return most_frequent(counts, k);
}

std::vector<std::pair<std::string, std::size_t>> top_words(std::string_view text, std::size_t k) {
    Counts counts;
    std::string word;
    auto flush = [&] {
        if (!word.empty()) {
            ++counts[word];
            word.clear();
        }
    };
    for (const char c : text) {
        if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '\'') {
            word.push_back(c);
        } else if (c >= 'A' && c <= 'Z') {
            word.push_back(static_cast<char>(c - 'A' + 'a'));
        } else {
            flush();
        }
    }
    flush();
    return most_frequent(counts, k);
}

}  // namespace nativecore::text
