//! Tokens for the arithmetic expression language in [`crate::expr`].

use std::fmt;

#[derive(Clone, Debug, PartialEq)]
pub enum Token {
    Number(f64),
    Ident(String),
    Op(char),
    LParen,
    RParen,
    Comma,
}

/// A token and the byte offset where it starts.
#[derive(Clone, Debug, PartialEq)]
pub struct Spanned {
    pub token: Token,
    pub pos: usize,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LexError {
    pub pos: usize,
    pub message: String,
}

impl fmt::Display for LexError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} at offset {}", self.message, self.pos)
    }
}

impl std::error::Error for LexError {}

pub fn lex(src: &str) -> Result<Vec<Spanned>, LexError> {
    let bytes = src.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i];
        if c.is_ascii_whitespace() {
            i += 1;
            continue;
        }
        let start = i;
        let token = if c.is_ascii_digit()
            || (c == b'.' && bytes.get(i + 1).map_or(false, |b| b.is_ascii_digit()))
        {
            while i < bytes.len() && (bytes[i].is_ascii_digit() || bytes[i] == b'.') {
                i += 1;
            }
            if i < bytes.len() && (bytes[i] == b'e' || bytes[i] == b'E') {
                let mut j = i + 1;
                if j < bytes.len() && (bytes[j] == b'+' || bytes[j] == b'-') {
                    j += 1;
                }
                if j < bytes.len() && bytes[j].is_ascii_digit() {
                    i = j;
                    while i < bytes.len() && bytes[i].is_ascii_digit() {
                        i += 1;
                    }
                }
            }
            let text = &src[start..i];
            match text.parse::<f64>() {
                Ok(v) => Token::Number(v),
                Err(_) => {
                    return Err(LexError {
                        pos: start,
                        message: format!("malformed number '{}'", text),
                    });
                }
            }
        } else if c.is_ascii_alphabetic() || c == b'_' {
            while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_') {
                i += 1;
            }
            Token::Ident(src[start..i].to_string())
        } else {
            i += 1;
            match c {
                b'+' | b'-' | b'*' | b'/' | b'%' | b'^' => Token::Op(c as char),
                b'(' => Token::LParen,
                b')' => Token::RParen,
                b',' => Token::Comma,
                _ => {
                    let ch = src[start..].chars().next().unwrap_or('?');
                    return Err(LexError {
                        pos: start,
                        message: format!("unexpected character '{}'", ch),
                    });
                }
            }
        };
        out.push(Spanned { token, pos: start });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(src: &str) -> Vec<Token> {
        lex(src).unwrap().into_iter().map(|s| s.token).collect()
    }

    #[test]
    fn numbers_identifiers_and_operators() {
        assert_eq!(
            kinds("2.5e3*x_1 + max(1,.5)"),
            vec![
                Token::Number(2500.0),
                Token::Op('*'),
                Token::Ident("x_1".to_string()),
                Token::Op('+'),
                Token::Ident("max".to_string()),
                Token::LParen,
                Token::Number(1.0),
                Token::Comma,
                Token::Number(0.5),
                Token::RParen,
            ]
        );
    }

    #[test]
    fn exponent_without_digits_is_not_consumed() {
        assert_eq!(
            kinds("2e"),
            vec![Token::Number(2.0), Token::Ident("e".to_string())]
        );
    }

    #[test]
    fn positions_and_errors() {
        let toks = lex("  a +b").unwrap();
        assert_eq!(toks[1].pos, 4);
        let err = lex("1 + $").unwrap_err();
        assert_eq!(err.pos, 4);
        assert!(err.to_string().contains("unexpected character '$'"));
        assert_eq!(lex("1.2.3").unwrap_err().pos, 0);
        assert_eq!(lex("é").unwrap_err().message, "unexpected character 'é'");
    }
}
