#pragma once
// A small tokenizer for C-like source text: identifiers, numbers, string literals,
// punctuation (longest match among multi-character operators), comments skipped.
#include <cstddef>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace nativecore::text {

enum class TokenKind { Identifier, Keyword, Number, String, Punct, End };

const char* token_kind_name(TokenKind kind) noexcept;

struct Token {
    TokenKind kind = TokenKind::End;
    std::string text;
    std::size_t line = 1;
    std::size_t column = 1;
};

class TokenizeError : public std::runtime_error {
public:
    TokenizeError(const std::string& what, std::size_t line, std::size_t column);
    std::size_t line() const noexcept { return line_; }
    std::size_t column() const noexcept { return column_; }

private:
    std::size_t line_;
    std::size_t column_;
};

class Tokenizer {
public:
    explicit Tokenizer(std::string_view src) : src_(src) {}
    Token next();

private:
    char peek(std::size_t ahead = 0) const noexcept;
    char advance() noexcept;
    void skip_space_and_comments();
    Token lex_number();
    Token lex_string(char quote);

    std::string_view src_;
    std::size_t pos_ = 0;
    std::size_t line_ = 1;
    std::size_t column_ = 1;
};

// All tokens, without the final End token. Throws TokenizeError.
std::vector<Token> tokenize(std::string_view src);

// The same token grammar as one std::regex alternation: much slower, kept as an
// independent reference to cross-check Tokenizer on valid input. Throws TokenizeError
// where no token matches (it is more lenient than Tokenizer about number suffixes).
std::vector<Token> tokenize_regex(std::string_view src);

}  // namespace nativecore::text
