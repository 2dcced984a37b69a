//! An INI-style key/value parser.
//!
//! ```text
//! # comment            ; comment
//! top = level           (section "")
//! [server]
//! host = "example.org"  (double-quoted values support \" \\ \n \t escapes)
//! port=8080
//! ```
//! Keys are `[A-Za-z0-9_.-]+`; a key may appear once per section.

use std::fmt;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    pub section: String,
    pub key: String,
    pub value: String,
    pub line: usize,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseError {
    pub line: usize,
    pub message: String,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}: {}", self.line, self.message)
    }
}

impl std::error::Error for ParseError {}

fn valid_name(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'.' || b == b'-')
}

fn unquote(raw: &str, line: usize) -> Result<String, ParseError> {
    let err = |m: &str| ParseError {
        line,
        message: m.to_string(),
    };
    if !raw.starts_with('"') {
        // Unquoted: an inline comment starts at " #" or " ;".
        let mut end = raw.len();
        for (i, _) in raw.match_indices(['#', ';']) {
            if i > 0 && raw[..i].ends_with(char::is_whitespace) {
                end = i;
                break;
            }
        }
        return Ok(raw[..end].trim_end().to_string());
    }
    let mut out = String::new();
    let mut chars = raw[1..].char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '"' => {
                let rest = raw[1 + i + 1..].trim();
                if !rest.is_empty() && !rest.starts_with('#') && !rest.starts_with(';') {
                    return Err(err("text after closing quote"));
                }
                return Ok(out);
            }
            '\\' => match chars.next() {
                Some((_, 'n')) => out.push('\n'),
                Some((_, 't')) => out.push('\t'),
                Some((_, '"')) => out.push('"'),
                Some((_, '\\')) => out.push('\\'),
                Some((_, other)) => return Err(err(&format!("unknown escape '\\{}'", other))),
                None => break,
            },
            _ => out.push(c),
        }
    }
    Err(err("unterminated quoted value"))
}

pub fn parse(text: &str) -> Result<Vec<Entry>, ParseError> {
    let mut entries: Vec<Entry> = Vec::new();
    let mut section = String::new();
    for (idx, raw_line) in text.lines().enumerate() {
        let line_no = idx + 1;
        let line = raw_line.trim();
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        if line.starts_with('[') {
            if !line.ends_with(']') {
                return Err(ParseError {
                    line: line_no,
                    message: "unterminated section header".to_string(),
                });
            }
            let name = line[1..line.len() - 1].trim();
            if !valid_name(name) {
                return Err(ParseError {
                    line: line_no,
                    message: format!("invalid section name '{}'", name),
                });
            }
            section = name.to_string();
            continue;
        }
        let eq = match line.find('=') {
            Some(i) => i,
            None => {
                return Err(ParseError {
                    line: line_no,
                    message: "expected key = value".to_string(),
                })
            }
        };
        let key = line[..eq].trim();
        if !valid_name(key) {
            return Err(ParseError {
                line: line_no,
                message: format!("invalid key '{}'", key),
            });
        }
        if entries.iter().any(|e| e.section == section && e.key == key) {
            return Err(ParseError {
                line: line_no,
                message: format!("duplicate key '{}'", key),
            });
        }
        let value = unquote(line[eq + 1..].trim(), line_no)?;
        entries.push(Entry {
            section: section.clone(),
            key: key.to_string(),
            value,
            line: line_no,
        });
    }
    Ok(entries)
}

/// Looks up `section.key` (or `key` for the top-level section).
pub fn get<'a>(entries: &'a [Entry], path: &str) -> Option<&'a str> {
    let (section, key) = match path.rfind('.') {
        Some(i) if entries.iter().any(|e| e.section == path[..i]) => (&path[..i], &path[i + 1..]),
        _ => ("", path),
    };
    entries
        .iter()
        .find(|e| e.section == section && e.key == key)
        .map(|e| e.value.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = "# settings\nname = demo ; inline comment\n\n[server]\nhost = \"example.org\"\nport=8080\nmotd = \"say \\\"hi\\\"\\n\" # trailing\n[build.cache]\nurl = s3://bucket/prefix#frag\n";

    #[test]
    fn parses_sections_and_values() {
        let e = parse(SAMPLE).unwrap();
        assert_eq!(e.len(), 5);
        assert_eq!(get(&e, "name"), Some("demo"));
        assert_eq!(get(&e, "server.host"), Some("example.org"));
        assert_eq!(get(&e, "server.port"), Some("8080"));
        assert_eq!(get(&e, "server.motd"), Some("say \"hi\"\n"));
        assert_eq!(get(&e, "build.cache.url"), Some("s3://bucket/prefix#frag"));
        assert_eq!(e[2].line, 6);
        assert_eq!(get(&e, "server.missing"), None);
    }

    #[test]
    fn reports_errors_with_lines() {
        assert_eq!(parse("a = 1\nb\n").unwrap_err().line, 2);
        assert_eq!(
            parse("[x\n").unwrap_err().message,
            "unterminated section header"
        );
        assert_eq!(
            parse("a = 1\na = 2\n").unwrap_err().message,
            "duplicate key 'a'"
        );
        assert_eq!(
            parse("a = \"open\n").unwrap_err().message,
            "unterminated quoted value"
        );
        assert_eq!(
            parse("a = \"x\" y\n").unwrap_err().message,
            "text after closing quote"
        );
        assert_eq!(
            parse("bad key = 1\n").unwrap_err().message,
            "invalid key 'bad key'"
        );
        assert!(parse("a = \"\\q\"")
            .unwrap_err()
            .message
            .contains("unknown escape"));
    }

    #[test]
    fn same_key_in_different_sections() {
        let e = parse("k = 1\n[s]\nk = 2\n").unwrap();
        assert_eq!(get(&e, "k"), Some("1"));
        assert_eq!(get(&e, "s.k"), Some("2"));
    }
}
