// Basic string utilities (ASCII case mapping; bytes are never reinterpreted).
#include <algorithm>
#include <cctype>
#include <numeric>
#include <regex>

#include "nativecore/text.hpp"

namespace nativecore::text {
namespace {

bool is_space(char c) noexcept {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

}  // namespace

std::string_view trim(std::string_view s) noexcept {
    std::size_t b = 0;
    std::size_t e = s.size();
    while (b < e && is_space(s[b])) ++b;
    while (e > b && is_space(s[e - 1])) --e;
    return s.substr(b, e - b);
}

std::vector<std::string> split(std::string_view s, char sep, bool keep_empty) {
    std::vector<std::string> out;
    std::size_t start = 0;
    for (;;) {
        const std::size_t pos = s.find(sep, start);
        const std::string_view piece = s.substr(start, pos == std::string_view::npos ? s.size() - start : pos - start);
        if (keep_empty || !piece.empty()) out.emplace_back(piece);
        if (pos == std::string_view::npos) break;
        start = pos + 1;
    }
    return out;
}

std::vector<std::string> split_whitespace(std::string_view s) {
    std::vector<std::string> out;
    std::size_t i = 0;
    while (i < s.size()) {
        while (i < s.size() && is_space(s[i])) ++i;
        const std::size_t start = i;
        while (i < s.size() && !is_space(s[i])) ++i;
        if (i > start) out.emplace_back(s.substr(start, i - start));
    }
    return out;
}

std::string join(const std::vector<std::string>& parts, std::string_view sep) {
    if (parts.empty()) return {};
    const std::size_t total = std::accumulate(parts.begin(), parts.end(), std::size_t{0},
                                              [](std::size_t n, const std::string& p) { return n + p.size(); }) +
                              sep.size() * (parts.size() - 1);
    std::string out;
    out.reserve(total);
    for (std::size_t i = 0; i < parts.size(); ++i) {
        if (i) out.append(sep);
        out.append(parts[i]);
    }
    return out;
}

std::string to_lower(std::string_view s) {
    std::string out(s);
    std::transform(out.begin(), out.end(), out.begin(), [](char c) {
        return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
    });
    return out;
}

std::string to_upper(std::string_view s) {
    std::string out(s);
    std::transform(out.begin(), out.end(), out.begin(), [](char c) {
        return (c >= 'a' && c <= 'z') ? static_cast<char>(c - 'a' + 'A') : c;
    });
    return out;
}

bool starts_with(std::string_view s, std::string_view prefix) noexcept {
    return s.size() >= prefix.size() && s.compare(0, prefix.size(), prefix) == 0;
}

bool ends_with(std::string_view s, std::string_view suffix) noexcept {
    return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string replace_all(std::string_view s, std::string_view from, std::string_view to) {
    if (from.empty()) return std::string(s);
    std::string out;
    out.reserve(s.size());
    std::size_t start = 0;
    for (;;) {
        const std::size_t pos = s.find(from, start);
        if (pos == std::string_view::npos) break;
        out.append(s.substr(start, pos - start));
        out.append(to);
        start = pos + from.size();
    }
    out.append(s.substr(start));
    return out;
}

std::string regex_replace_all(std::string_view s, const std::string& pattern, const std::string& replacement) {
    const std::regex re(pattern, std::regex::ECMAScript);
    std::string out;
    std::regex_replace(std::back_inserter(out), s.begin(), s.end(), re, replacement);
    return out;
}

std::vector<std::string> regex_find_all(std::string_view s, const std::string& pattern) {
    const std::regex re(pattern, std::regex::ECMAScript);
    std::vector<std::string> out;
    using It = std::regex_iterator<std::string_view::const_iterator>;
    for (It it(s.begin(), s.end(), re), end; it != end; ++it) out.push_back(it->str());
    return out;
}

std::string collapse_whitespace(std::string_view s) {
    static const std::regex runs(R"([ \t\n\r\f\v]+)");
    const std::string_view t = trim(s);
    std::string out;
    std::regex_replace(std::back_inserter(out), t.begin(), t.end(), runs, " ");
    return out;
}

}  // namespace nativecore::text
