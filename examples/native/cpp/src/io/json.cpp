// A small JSON reader (RFC 8259, depth-limited) and writer.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sstream>

#include "nativecore/io.hpp"
#include "nativecore/text.hpp"

namespace nativecore::io {
namespace {

constexpr int kMaxDepth = 128;

class Parser {
public:
    explicit Parser(std::string_view s) : s_(s) {}

    std::optional<JsonValue> parse_document() {
        auto v = value(0);
        skip_ws();
        if (!v || i_ != s_.size()) return std::nullopt;
        return v;
    }

private:
    void skip_ws() {
        while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\t' || s_[i_] == '\n' || s_[i_] == '\r')) ++i_;
    }
    bool consume(std::string_view lit) {
        if (s_.substr(i_, lit.size()) != lit) return false;
        i_ += lit.size();
        return true;
    }

    std::optional<JsonValue> value(int depth) {
        if (depth > kMaxDepth) return std::nullopt;
        skip_ws();
        if (i_ >= s_.size()) return std::nullopt;
        const char c = s_[i_];
        if (c == '{') return object(depth);
        if (c == '[') return array(depth);
        if (c == '"') {
            auto str = string();
            if (!str) return std::nullopt;
            return JsonValue{std::move(*str)};
        }
        if (consume("true")) return JsonValue{true};
        if (consume("false")) return JsonValue{false};
        if (consume("null")) return JsonValue{nullptr};
        return number();
    }

    std::optional<JsonValue> number() {
        const std::size_t start = i_;
        if (i_ < s_.size() && s_[i_] == '-') ++i_;
        if (i_ >= s_.size()) return std::nullopt;
        if (s_[i_] == '0') {
            ++i_;
        } else if (s_[i_] >= '1' && s_[i_] <= '9') {
            while (i_ < s_.size() && s_[i_] >= '0' && s_[i_] <= '9') ++i_;
        } else {
            return std::nullopt;
        }
        if (i_ < s_.size() && s_[i_] == '.') {
            ++i_;
            if (i_ >= s_.size() || s_[i_] < '0' || s_[i_] > '9') return std::nullopt;
            while (i_ < s_.size() && s_[i_] >= '0' && s_[i_] <= '9') ++i_;
        }
        if (i_ < s_.size() && (s_[i_] == 'e' || s_[i_] == 'E')) {
            ++i_;
            if (i_ < s_.size() && (s_[i_] == '+' || s_[i_] == '-')) ++i_;
            if (i_ >= s_.size() || s_[i_] < '0' || s_[i_] > '9') return std::nullopt;
            while (i_ < s_.size() && s_[i_] >= '0' && s_[i_] <= '9') ++i_;
        }
        const std::string text(s_.substr(start, i_ - start));
        // istringstream with the classic locale: independent of the process locale.
        std::istringstream is(text);
        is.imbue(std::locale::classic());
        double d = 0.0;
        is >> d;
        if (is.fail()) return std::nullopt;
        return JsonValue{d};
    }

    static int hex4(std::string_view h) {
        int v = 0;
        for (const char c : h) {
            v <<= 4;
            if (c >= '0' && c <= '9') v |= c - '0';
            else if (c >= 'a' && c <= 'f') v |= c - 'a' + 10;
            else if (c >= 'A' && c <= 'F') v |= c - 'A' + 10;
            else return -1;
        }
        return v;
    }

    std::optional<std::string> string() {
        ++i_;  // opening quote
        std::string out;
        while (i_ < s_.size()) {
            const char c = s_[i_++];
            if (c == '"') return out;
            if (static_cast<unsigned char>(c) < 0x20) return std::nullopt;
            if (c != '\\') {
                out.push_back(c);
                continue;
            }
            if (i_ >= s_.size()) return std::nullopt;
            const char e = s_[i_++];
            switch (e) {
                case '"': out.push_back('"'); break;
                case '\\': out.push_back('\\'); break;
                case '/': out.push_back('/'); break;
                case 'b': out.push_back('\b'); break;
                case 'f': out.push_back('\f'); break;
                case 'n': out.push_back('\n'); break;
                case 'r': out.push_back('\r'); break;
                case 't': out.push_back('\t'); break;
                case 'u': {
                    if (i_ + 4 > s_.size()) return std::nullopt;
                    int cp = hex4(s_.substr(i_, 4));
                    i_ += 4;
                    if (cp < 0) return std::nullopt;
                    if (cp >= 0xD800 && cp <= 0xDBFF) {  // surrogate pair
                        if (i_ + 6 > s_.size() || s_[i_] != '\\' || s_[i_ + 1] != 'u') return std::nullopt;
                        const int lo = hex4(s_.substr(i_ + 2, 4));
                        if (lo < 0xDC00 || lo > 0xDFFF) return std::nullopt;
                        i_ += 6;
                        cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                    } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
                        return std::nullopt;
                    }
                    out += text::utf8_encode(std::u32string(1, static_cast<char32_t>(cp)));
                    break;
                }
                default: return std::nullopt;
            }
        }
        return std::nullopt;
    }

    std::optional<JsonValue> array(int depth) {
        ++i_;
        JsonArray arr;
        skip_ws();
        if (consume("]")) return JsonValue{std::move(arr)};
        for (;;) {
            auto v = value(depth + 1);
            if (!v) return std::nullopt;
            arr.push_back(std::move(*v));
            skip_ws();
            if (consume(",")) continue;
            if (consume("]")) return JsonValue{std::move(arr)};
            return std::nullopt;
        }
    }

    std::optional<JsonValue> object(int depth) {
        ++i_;
        JsonObject obj;
        skip_ws();
        if (consume("}")) return JsonValue{std::move(obj)};
        for (;;) {
            skip_ws();
            if (i_ >= s_.size() || s_[i_] != '"') return std::nullopt;
            auto key = string();
            if (!key) return std::nullopt;
            skip_ws();
            if (!consume(":")) return std::nullopt;
            auto v = value(depth + 1);
            if (!v) return std::nullopt;
            obj.emplace_back(std::move(*key), std::move(*v));
            skip_ws();
            if (consume(",")) continue;
            if (consume("}")) return JsonValue{std::move(obj)};
            return std::nullopt;
        }
    }

    std::string_view s_;
    std::size_t i_ = 0;
};

struct Writer {
    std::string& out;

    void operator()(std::nullptr_t) const { out += "null"; }
    void operator()(bool b) const { out += b ? "true" : "false"; }
    void operator()(double d) const {
        if (!std::isfinite(d)) {
            out += "null";
            return;
        }
        std::ostringstream os;
        os.imbue(std::locale::classic());
        os.precision(17);
        os << d;
        out += os.str();
    }
    void operator()(const std::string& s) const { out += json_escape(s); }
    void operator()(const JsonArray& a) const {
        out.push_back('[');
        for (std::size_t i = 0; i < a.size(); ++i) {
            if (i) out.push_back(',');
            std::visit(*this, a[i].v);
        }
        out.push_back(']');
    }
    void operator()(const JsonObject& o) const {
        out.push_back('{');
        for (std::size_t i = 0; i < o.size(); ++i) {
            if (i) out.push_back(',');
            out += json_escape(o[i].first);
            out.push_back(':');
            std::visit(*this, o[i].second.v);
        }
        out.push_back('}');
    }
};

}  // namespace

const JsonValue* JsonValue::get(std::string_view key) const {
    const auto* obj = std::get_if<JsonObject>(&v);
    if (!obj) return nullptr;
    for (const auto& kv : *obj)
        if (kv.first == key) return &kv.second;
    return nullptr;
}

std::optional<JsonValue> parse_json(std::string_view text) { return Parser(text).parse_document(); }

std::string to_json(const JsonValue& value) {
    std::string out;
    std::visit(Writer{out}, value.v);
    return out;
}

std::string json_escape(std::string_view s) {
    std::string out = "\"";
    for (const char c : s) {
        switch (c) {
            case '"': out += "\\\""; break;
            case '\\': out += "\\\\"; break;
            case '\n': out += "\\n"; break;
            case '\r': out += "\\r"; break;
            case '\t': out += "\\t"; break;
            case '\b': out += "\\b"; break;
            case '\f': out += "\\f"; break;
            default:
                if (static_cast<unsigned char>(c) < 0x20) {
                    char buf[8];
                    std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(static_cast<unsigned char>(c)));
                    out += buf;
                } else {
                    out.push_back(c);
                }
        }
    }
    out.push_back('"');
    return out;
}

}  // namespace nativecore::io
