// Glob matching, both directly (iterative backtracking on '*') and via std::regex.
#include <regex>

#include "nativecore/text.hpp"

namespace nativecore::text {
namespace {

// Matches a bracket expression starting at p[i] == '['; sets `end` past the ']'.
// Returns false with end == npos when the bracket is unterminated (then '[' is literal).
bool match_class(std::string_view p, std::size_t i, char c, std::size_t& end) {
    std::size_t j = i + 1;
    bool negate = false;
    if (j < p.size() && (p[j] == '!' || p[j] == '^')) {
        negate = true;
        ++j;
    }
    bool matched = false;
    bool first = true;
    while (j < p.size() && (p[j] != ']' || first)) {
        first = false;
        char lo = p[j];
        if (lo == '\\' && j + 1 < p.size()) lo = p[++j];
        char hi = lo;
        if (j + 2 < p.size() && p[j + 1] == '-' && p[j + 2] != ']') {
            hi = p[j + 2];
            j += 2;
        }
        if (c >= lo && c <= hi) matched = true;
        ++j;
    }
    if (j >= p.size()) {
        end = std::string_view::npos;
        return false;
    }
    end = j + 1;
    return matched != negate;
}

}  // namespace

bool glob_match(std::string_view pattern, std::string_view s) {
    std::size_t p = 0, i = 0;
    std::size_t star_p = std::string_view::npos, star_i = 0;
    while (i < s.size()) {
        bool advanced = false;
        if (p < pattern.size()) {
            const char pc = pattern[p];
            if (pc == '*') {
                star_p = p++;
                star_i = i;
                continue;
            }
            if (pc == '?') {
                ++p;
                ++i;
                advanced = true;
            } else if (pc == '[') {
                std::size_t end;
                const bool m = match_class(pattern, p, s[i], end);
                if (end == std::string_view::npos) {
                    if (s[i] == '[') {
                        ++p;
                        ++i;
                        advanced = true;
                    }
                } else if (m) {
                    p = end;
                    ++i;
                    advanced = true;
                }
            } else {
                char lit = pc;
                std::size_t width = 1;
                if (pc == '\\' && p + 1 < pattern.size()) {
                    lit = pattern[p + 1];
                    width = 2;
                }
                if (lit == s[i]) {
                    p += width;
                    ++i;
                    advanced = true;
                }
            }
        }
        if (!advanced) {
            if (star_p == std::string_view::npos) return false;
            p = star_p + 1;
            i = ++star_i;
        }
    }
    while (p < pattern.size() && pattern[p] == '*') ++p;
    return p == pattern.size();
}

std::string glob_to_regex(std::string_view pattern) {
    static const std::string kSpecial = "\\^$.|?*+()[]{}";
    std::string re;
    for (std::size_t i = 0; i < pattern.size(); ++i) {
        const char c = pattern[i];
        if (c == '*') {
            re += "[\\s\\S]*";
        } else if (c == '?') {
            re += "[\\s\\S]";
        } else if (c == '[') {
            std::size_t j = i + 1;
            if (j < pattern.size() && (pattern[j] == '!' || pattern[j] == '^')) ++j;
            if (j < pattern.size() && pattern[j] == ']') ++j;
            while (j < pattern.size() && pattern[j] != ']') j += (pattern[j] == '\\' && j + 1 < pattern.size()) ? 2 : 1;
            if (j >= pattern.size()) {
                re += "\\[";
                continue;
            }
            std::string cls = "[";
            std::size_t k = i + 1;
            if (pattern[k] == '!' || pattern[k] == '^') {
                cls += '^';
                ++k;
            }
            for (; k < j; ++k) {
                const char d = pattern[k];
                if (d == '\\' && k + 1 < j) {
                    cls += '\\';
                    cls += pattern[++k];
                } else if (d == '\\' || d == '[' || d == ']' || d == '^') {
                    cls += '\\';
                    cls += d;
                } else {
                    cls += d;
                }
            }
            re += cls + "]";
            i = j;
        } else if (c == '\\' && i + 1 < pattern.size()) {
            const char n = pattern[++i];
            if (kSpecial.find(n) != std::string::npos) re += '\\';
            re += n;
        } else {
            if (kSpecial.find(c) != std::string::npos) re += '\\';
            re += c;
        }
    }
    return re;
}

bool glob_match_regex(std::string_view pattern, std::string_view s) {
    const std::regex re(glob_to_regex(pattern), std::regex::ECMAScript);
    return std::regex_match(s.begin(), s.end(), re);
}

}  // namespace nativecore::text
