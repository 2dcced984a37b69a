// Tokenizer for C-like text.
#include <algorithm>
#include <array>
#include <regex>
#include <set>

#include "nativecore/tokenizer.hpp"

namespace nativecore::text {
namespace {

bool is_ident_start(char c) noexcept { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_digit(char c) noexcept { return c >= '0' && c <= '9'; }
bool is_ident(char c) noexcept { return is_ident_start(c) || is_digit(c); }
bool is_hex(char c) noexcept { return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

const std::set<std::string_view>& keywords() {
    static const std::set<std::string_view> kw = {
        "break", "case", "const", "continue", "do", "else", "enum", "for", "if",
        "return", "sizeof", "static", "struct", "switch", "typedef", "while",
    };
    return kw;
}

// Longest first, so that the first prefix match is the longest one.
constexpr std::array<std::string_view, 24> kOperators = {
    "<<=", ">>=", "...", "->", "++", "--", "<<", ">>", "<=", ">=", "==", "!=",
    "&&",  "||",  "+=",  "-=", "*=", "/=", "%=", "&=", "|=", "^=", "::", "##",
};

}  // namespace

const char* token_kind_name(TokenKind kind) noexcept {
    switch (kind) {
        case TokenKind::Identifier: return "identifier";
        case TokenKind::Keyword: return "keyword";
        case TokenKind::Number: return "number";
        case TokenKind::String: return "string";
        case TokenKind::Punct: return "punct";
        case TokenKind::End: return "end";
    }
    return "?";
}

TokenizeError::TokenizeError(const std::string& what, std::size_t line, std::size_t column)
    : std::runtime_error(what + " at " + std::to_string(line) + ":" + std::to_string(column)),
      line_(line),
      column_(column) {}

char Tokenizer::peek(std::size_t ahead) const noexcept {
    return pos_ + ahead < src_.size() ? src_[pos_ + ahead] : '\0';
}

char Tokenizer::advance() noexcept {
    const char c = src_[pos_++];
    if (c == '\n') {
        ++line_;
        column_ = 1;
    } else {
        ++column_;
    }
    return c;
}

void Tokenizer::skip_space_and_comments() {
    while (pos_ < src_.size()) {
        const char c = peek();
        if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
            advance();
        } else if (c == '/' && peek(1) == '/') {
            while (pos_ < src_.size() && peek() != '\n') advance();
        } else if (c == '/' && peek(1) == '*') {
            const std::size_t line = line_, col = column_;
            advance();
            advance();
            while (!(peek() == '*' && peek(1) == '/')) {
                if (pos_ >= src_.size()) throw TokenizeError("unterminated comment", line, col);
                advance();
            }
            advance();
            advance();
        } else {
            break;
        }
    }
}

Token Tokenizer::lex_number() {
    Token t{TokenKind::Number, {}, line_, column_};
    const std::size_t start = pos_;
    if (peek() == '0' && (peek(1) == 'x' || peek(1) == 'X')) {
        advance();
        advance();
        if (!is_hex(peek())) throw TokenizeError("malformed hex literal", t.line, t.column);
        while (is_hex(peek())) advance();
    } else {
        while (is_digit(peek())) advance();
        if (peek() == '.' && is_digit(peek(1))) {
            advance();
            while (is_digit(peek())) advance();
        }
        if (peek() == 'e' || peek() == 'E') {
            std::size_t k = 1;
            if (peek(1) == '+' || peek(1) == '-') k = 2;
            if (is_digit(peek(k))) {
                while (k--) advance();
                while (is_digit(peek())) advance();
            }
        }
    }
    while (peek() == 'u' || peek() == 'U' || peek() == 'l' || peek() == 'L' || peek() == 'f' || peek() == 'F') advance();
    if (is_ident_start(peek())) throw TokenizeError("invalid suffix on number", line_, column_);
    t.text = std::string(src_.substr(start, pos_ - start));
    return t;
}

Token Tokenizer::lex_string(char quote) {
    Token t{TokenKind::String, {}, line_, column_};
    advance();  // opening quote
    for (;;) {
        if (pos_ >= src_.size() || peek() == '\n') throw TokenizeError("unterminated literal", t.line, t.column);
        const char c = advance();
        if (c == quote) break;
        if (c == '\\') {
            if (pos_ >= src_.size()) throw TokenizeError("unterminated literal", t.line, t.column);
            const char e = advance();
            switch (e) {
                case 'n': t.text.push_back('\n'); break;
                case 't': t.text.push_back('\t'); break;
                case 'r': t.text.push_back('\r'); break;
                case '0': t.text.push_back('\0'); break;
                case '\\': case '\'': case '"': t.text.push_back(e); break;
                default: throw TokenizeError(std::string("unknown escape \\") + e, line_, column_ - 2);
            }
        } else {
            t.text.push_back(c);
        }
    }
    return t;
}

Token Tokenizer::next() {
    skip_space_and_comments();
    if (pos_ >= src_.size()) return Token{TokenKind::End, {}, line_, column_};
    const char c = peek();
    if (is_ident_start(c)) {
        Token t{TokenKind::Identifier, {}, line_, column_};
        const std::size_t start = pos_;
        while (is_ident(peek())) advance();
        t.text = std::string(src_.substr(start, pos_ - start));
        if (keywords().count(t.text) != 0) t.kind = TokenKind::Keyword;
        return t;
    }
    if (is_digit(c) || (c == '.' && is_digit(peek(1)))) return lex_number();
    if (c == '"' || c == '\'') return lex_string(c);
    Token t{TokenKind::Punct, {}, line_, column_};
    const std::string_view rest = src_.substr(pos_);
    const auto op = std::find_if(kOperators.begin(), kOperators.end(),
                                 [&](std::string_view o) { return rest.substr(0, o.size()) == o; });
    const std::size_t n = op != kOperators.end() ? op->size() : 1;
    static constexpr std::string_view kSingles = "+-*/%=<>!&|^~?:;,.()[]{}#";
    if (n == 1 && kSingles.find(c) == std::string_view::npos) {
        throw TokenizeError(std::string("unexpected character '") + c + "'", line_, column_);
    }
    for (std::size_t i = 0; i < n; ++i) advance();
    t.text = std::string(rest.substr(0, n));
    return t;
}

namespace {

// Groups: 1 space, 2 line comment, 3 block comment, 4 identifier, 5 number, 6 string, 7 punct.
const std::regex& token_regex() {
    static const std::regex re(
        R"((\s+)|(//[^\n]*)|(/\*[\s\S]*?\*/)|([A-Za-z_][A-Za-z0-9_]*))"
        R"(|(0[xX][0-9A-Fa-f]+[uUlLfF]*|(?:[0-9]+(?:\.[0-9]+)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?[uUlLfF]*))"
        R"(|("(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*'))"
        R"(|(<<=|>>=|\.\.\.|->|\+\+|--|<<|>>|<=|>=|==|!=|&&|\|\||\+=|-=|\*=|/=|%=|&=|\|=|\^=|::|##)"
        R"(|[-+*/%=<>!&|^~?:;,.()\[\]{}#]))",
        std::regex::ECMAScript | std::regex::optimize);
    return re;
}

std::string unescape(std::string_view body, std::size_t line, std::size_t column) {
    std::string out;
    for (std::size_t i = 0; i < body.size(); ++i) {
        if (body[i] != '\\') {
            out.push_back(body[i]);
            continue;
        }
        const char e = body[++i];
        switch (e) {
            case 'n': out.push_back('\n'); break;
            case 't': out.push_back('\t'); break;
            case 'r': out.push_back('\r'); break;
            case '0': out.push_back('\0'); break;
            case '\\': case '\'': case '"': out.push_back(e); break;
            default: throw TokenizeError(std::string("unknown escape \\") + e, line, column);
        }
    }
    return out;
}

}  // namespace

std::vector<Token> tokenize_regex(std::string_view src) {
    std::vector<Token> out;
    const char* const begin = src.data();
    const char* const end = begin + src.size();
    const char* p = begin;
    std::size_t line = 1, column = 1;
    std::cmatch m;
    while (p < end) {
        if (!std::regex_search(p, end, m, token_regex(), std::regex_constants::match_continuous)) {
            throw TokenizeError(std::string("unexpected character '") + *p + "'", line, column);
        }
        const std::string_view text(p, static_cast<std::size_t>(m.length(0)));
        Token t{TokenKind::Punct, std::string(text), line, column};
        if (m[4].matched) {
            t.kind = keywords().count(text) ? TokenKind::Keyword : TokenKind::Identifier;
        } else if (m[5].matched) {
            t.kind = TokenKind::Number;
        } else if (m[6].matched) {
            t.kind = TokenKind::String;
            t.text = unescape(text.substr(1, text.size() - 2), line, column);
        }
        if (!m[1].matched && !m[2].matched && !m[3].matched) out.push_back(std::move(t));
        for (const char c : text) {
            if (c == '\n') {
                ++line;
                column = 1;
            } else {
                ++column;
            }
        }
        p += m.length(0);
    }
    return out;
}

std::vector<Token> tokenize(std::string_view src) {
    Tokenizer tk(src);
    std::vector<Token> out;
    for (;;) {
        Token t = tk.next();
        if (t.kind == TokenKind::End) break;
        out.push_back(std::move(t));
    }
    return out;
}

}  // namespace nativecore::text
