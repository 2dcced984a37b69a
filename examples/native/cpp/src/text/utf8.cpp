// Strict UTF-8 (RFC 3629): rejects overlong forms, surrogates and values above U+10FFFF.
#include "nativecore/text.hpp"

namespace nativecore::text {
namespace {

// Decodes one code point at s[i]; returns the sequence length, or 0 if invalid.
std::size_t decode_one(std::string_view s, std::size_t i, char32_t& cp) noexcept {
    const auto b0 = static_cast<unsigned char>(s[i]);
    std::size_t n;
    char32_t min;
    if (b0 < 0x80) {
        cp = b0;
        return 1;
    } else if ((b0 & 0xE0) == 0xC0) {
        n = 2;
        cp = b0 & 0x1F;
        min = 0x80;
    } else if ((b0 & 0xF0) == 0xE0) {
        n = 3;
        cp = b0 & 0x0F;
        min = 0x800;
    } else if ((b0 & 0xF8) == 0xF0) {
        n = 4;
        cp = b0 & 0x07;
        min = 0x10000;
    } else {
        return 0;
    }
    if (i + n > s.size()) return 0;
    for (std::size_t k = 1; k < n; ++k) {
        const auto b = static_cast<unsigned char>(s[i + k]);
        if ((b & 0xC0) != 0x80) return 0;
        cp = (cp << 6) | (b & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
    return n;
}

}  // namespace

bool utf8_valid(std::string_view s) noexcept {
    std::size_t i = 0;
    char32_t cp;
    while (i < s.size()) {
        const std::size_t n = decode_one(s, i, cp);
        if (n == 0) return false;
        i += n;
    }
    return true;
}

std::optional<std::u32string> utf8_decode(std::string_view s) {
    std::u32string out;
    out.reserve(s.size());
    std::size_t i = 0;
    while (i < s.size()) {
        char32_t cp;
        const std::size_t n = decode_one(s, i, cp);
        if (n == 0) return std::nullopt;
        out.push_back(cp);
        i += n;
    }
    return out;
}

std::string utf8_encode(std::u32string_view cps) {
    std::string out;
    out.reserve(cps.size());
    for (const char32_t cp : cps) {
        if (cp < 0x80) {
            out.push_back(static_cast<char>(cp));
        } else if (cp < 0x800) {
            out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
            out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
        } else if (cp < 0x10000) {
            if (cp >= 0xD800 && cp <= 0xDFFF) {
                out.append("\xEF\xBF\xBD");  // U+FFFD for a lone surrogate
                continue;
            }
            out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
            out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
            out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
        } else if (cp <= 0x10FFFF) {
            out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
            out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
            out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
            out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
        } else {
            out.append("\xEF\xBF\xBD");
        }
    }
    return out;
}

std::optional<std::size_t> utf8_length(std::string_view s) {
    std::size_t count = 0;
    std::size_t i = 0;
    char32_t cp;
    while (i < s.size()) {
        const std::size_t n = decode_one(s, i, cp);
        if (n == 0) return std::nullopt;
        i += n;
        ++count;
    }
    return count;
}

}  // namespace nativecore::text
