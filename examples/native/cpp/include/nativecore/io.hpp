#pragma once
// CSV (RFC 4180) and a small JSON reader/writer.
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace nativecore::io {

using CsvRow = std::vector<std::string>;
// Throws std::runtime_error on an unterminated quoted field.
std::vector<CsvRow> parse_csv(std::string_view text, char sep = ',');
std::string write_csv(const std::vector<CsvRow>& rows, char sep = ',');

struct JsonValue;
using JsonArray = std::vector<JsonValue>;
using JsonObject = std::vector<std::pair<std::string, JsonValue>>;  // keeps key order
struct JsonValue {
    std::variant<std::nullptr_t, bool, double, std::string, JsonArray, JsonObject> v;
    const JsonValue* get(std::string_view key) const;  // object member, or nullptr
};

std::optional<JsonValue> parse_json(std::string_view text);
std::string to_json(const JsonValue& value);
std::string json_escape(std::string_view s);

}  // namespace nativecore::io
