// RFC 4180 CSV: quoted fields, doubled quotes, CRLF or LF line ends.
#include <stdexcept>

#include "nativecore/io.hpp"

namespace nativecore::io {

std::vector<CsvRow> parse_csv(std::string_view text, char sep) {
    std::vector<CsvRow> rows;
    CsvRow row;
    std::string field;
    bool in_quotes = false;
    bool field_started = false;
    std::size_t i = 0;
    auto end_field = [&] {
        row.push_back(std::move(field));
        field.clear();
        field_started = false;
    };
    auto end_row = [&] {
        end_field();
        rows.push_back(std::move(row));
        row.clear();
    };
    while (i < text.size()) {
        const char c = text[i];
        if (in_quotes) {
            if (c == '"') {
                if (i + 1 < text.size() && text[i + 1] == '"') {
                    field.push_back('"');
                    i += 2;
                    continue;
                }
                in_quotes = false;
            } else {
                field.push_back(c);
            }
            ++i;
            continue;
        }
        if (c == '"' && !field_started) {
            in_quotes = true;
            field_started = true;
        } else if (c == sep) {
            end_field();
        } else if (c == '\n' || (c == '\r' && i + 1 < text.size() && text[i + 1] == '\n')) {
            if (c == '\r') ++i;
            end_row();
        } else {
            field.push_back(c);
            field_started = true;
        }
        ++i;
    }
    if (in_quotes) throw std::runtime_error("parse_csv: unterminated quoted field");
    if (field_started || !row.empty()) end_row();
    return rows;
}

std::string write_csv(const std::vector<CsvRow>& rows, char sep) {
    std::string out;
    for (const CsvRow& row : rows) {
        for (std::size_t i = 0; i < row.size(); ++i) {
            if (i) out.push_back(sep);
            const std::string& f = row[i];
            const bool quote = f.find_first_of(std::string("\"\r\n") + sep) != std::string::npos;
            if (!quote) {
                out += f;
                continue;
            }
            out.push_back('"');
            for (const char c : f) {
                if (c == '"') out.push_back('"');
                out.push_back(c);
            }
            out.push_back('"');
        }
        out += "\r\n";
    }
    return out;
}

}  // namespace nativecore::io
