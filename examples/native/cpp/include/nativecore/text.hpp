#pragma once
// String utilities, UTF-8, encodings, searching and matching.
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace nativecore::text {

// strutil.cpp
std::string_view trim(std::string_view s) noexcept;
std::vector<std::string> split(std::string_view s, char sep, bool keep_empty = true);
std::vector<std::string> split_whitespace(std::string_view s);
std::string join(const std::vector<std::string>& parts, std::string_view sep);
std::string to_lower(std::string_view s);
std::string to_upper(std::string_view s);
bool starts_with(std::string_view s, std::string_view prefix) noexcept;
bool ends_with(std::string_view s, std::string_view suffix) noexcept;
std::string replace_all(std::string_view s, std::string_view from, std::string_view to);
// ECMAScript regular expressions; throw std::regex_error on a bad pattern.
std::string regex_replace_all(std::string_view s, const std::string& pattern, const std::string& replacement);
std::vector<std::string> regex_find_all(std::string_view s, const std::string& pattern);
// Runs of whitespace become one space; leading and trailing whitespace is removed.
std::string collapse_whitespace(std::string_view s);

// utf8.cpp
bool utf8_valid(std::string_view s) noexcept;
std::optional<std::u32string> utf8_decode(std::string_view s);
std::string utf8_encode(std::u32string_view cps);
std::optional<std::size_t> utf8_length(std::string_view s);

// levenshtein.cpp
std::size_t levenshtein(std::string_view a, std::string_view b);
// Optimal string alignment distance (Levenshtein plus adjacent transpositions).
std::size_t osa_distance(std::string_view a, std::string_view b);

// encoding.cpp
std::string base64_encode(std::string_view bytes);
std::optional<std::string> base64_decode(std::string_view text);
std::string hex_encode(std::string_view bytes);
std::optional<std::string> hex_decode(std::string_view text);

// wordfreq.cpp: most frequent lower-cased words; ties broken alphabetically. A word is a
// run of ASCII letters, digits and apostrophes, or a match of `word_pattern` (ECMAScript).
std::vector<std::pair<std::string, std::size_t>> top_words(std::string_view text, std::size_t k);
std::vector<std::pair<std::string, std::size_t>> top_words_matching(std::string_view text, std::size_t k,
                                                                    const std::string& word_pattern);

// kmp.cpp: all (possibly overlapping) match positions of needle in haystack.
std::vector<std::size_t> find_all(std::string_view haystack, std::string_view needle);

// glob.cpp: shell-style patterns with *, ?, [abc], [a-z], [!x] and backslash escapes.
bool glob_match(std::string_view pattern, std::string_view s);
// The same pattern as an ECMAScript regular expression, and a matcher that uses it.
std::string glob_to_regex(std::string_view pattern);
bool glob_match_regex(std::string_view pattern, std::string_view s);

}  // namespace nativecore::text
