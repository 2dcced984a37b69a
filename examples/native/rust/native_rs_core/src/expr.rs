//! A recursive-descent parser and evaluator for arithmetic expressions.
//!
//! Grammar (lowest precedence first):
//! ```text
//! expr    := term (('+' | '-') term)*
//! term    := unary (('*' | '/' | '%') unary)*
//! unary   := '-' unary | power
//! power   := primary ('^' unary)?          (right-associative)
//! primary := number | ident | ident '(' args ')' | '(' expr ')'
//! ```

use std::collections::HashMap;
use std::fmt;

use crate::lexer::{lex, Spanned, Token};

#[derive(Clone, Debug, PartialEq)]
pub enum Expr {
    Num(f64),
    Var(String),
    Neg(Box<Expr>),
    Bin(char, Box<Expr>, Box<Expr>),
    Call(String, Vec<Expr>),
}

#[derive(Clone, Debug, PartialEq)]
pub enum Error {
    Syntax {
        pos: usize,
        message: String,
    },
    UnknownVariable(String),
    UnknownFunction(String),
    Arity {
        name: String,
        expected: usize,
        got: usize,
    },
    DivisionByZero,
    Domain(String),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Syntax { pos, message } => {
                write!(f, "syntax error at offset {}: {}", pos, message)
            }
            Error::UnknownVariable(n) => write!(f, "unknown variable '{}'", n),
            Error::UnknownFunction(n) => write!(f, "unknown function '{}'", n),
            Error::Arity {
                name,
                expected,
                got,
            } => {
                write!(f, "{}() takes {} argument(s), got {}", name, expected, got)
            }
            Error::DivisionByZero => write!(f, "division by zero"),
            Error::Domain(m) => write!(f, "domain error: {}", m),
        }
    }
}

impl std::error::Error for Error {}

impl Error {
    pub fn is_syntax(&self) -> bool {
        matches!(self, Error::Syntax { .. })
    }
}

struct Parser {
    toks: Vec<Spanned>,
    i: usize,
    end: usize,
}

impl Parser {
    fn peek(&self) -> Option<&Token> {
        self.toks.get(self.i).map(|s| &s.token)
    }

    fn pos(&self) -> usize {
        self.toks.get(self.i).map_or(self.end, |s| s.pos)
    }

    fn syntax<T>(&self, message: &str) -> Result<T, Error> {
        Err(Error::Syntax {
            pos: self.pos(),
            message: message.to_string(),
        })
    }

    fn expr(&mut self) -> Result<Expr, Error> {
        let mut lhs = self.term()?;
        while let Some(Token::Op(op)) = self.peek() {
            let op = *op;
            if op != '+' && op != '-' {
                break;
            }
            self.i += 1;
            let rhs = self.term()?;
            lhs = Expr::Bin(op, Box::new(lhs), Box::new(rhs));
        }
        Ok(lhs)
    }

    fn term(&mut self) -> Result<Expr, Error> {
        let mut lhs = self.unary()?;
        while let Some(Token::Op(op)) = self.peek() {
            let op = *op;
            if op != '*' && op != '/' && op != '%' {
                break;
            }
            self.i += 1;
            let rhs = self.unary()?;
            lhs = Expr::Bin(op, Box::new(lhs), Box::new(rhs));
        }
        Ok(lhs)
    }

    fn unary(&mut self) -> Result<Expr, Error> {
        if let Some(Token::Op('-')) = self.peek() {
            self.i += 1;
            return Ok(Expr::Neg(Box::new(self.unary()?)));
        }
        if let Some(Token::Op('+')) = self.peek() {
            self.i += 1;
            return self.unary();
        }
        self.power()
    }

    fn power(&mut self) -> Result<Expr, Error> {
        let base = self.primary()?;
        if let Some(Token::Op('^')) = self.peek() {
            self.i += 1;
            let exp = self.unary()?;
            return Ok(Expr::Bin('^', Box::new(base), Box::new(exp)));
        }
        Ok(base)
    }

    fn primary(&mut self) -> Result<Expr, Error> {
        let tok = match self.peek() {
            Some(t) => t.clone(),
            None => return self.syntax("unexpected end of input"),
        };
        match tok {
            Token::Number(v) => {
                self.i += 1;
                Ok(Expr::Num(v))
            }
            Token::Ident(name) => {
                self.i += 1;
                if self.peek() != Some(&Token::LParen) {
                    return Ok(Expr::Var(name));
                }
                self.i += 1;
                let mut args = Vec::new();
                if self.peek() == Some(&Token::RParen) {
                    self.i += 1;
                    return Ok(Expr::Call(name, args));
                }
                loop {
                    args.push(self.expr()?);
                    match self.peek() {
                        Some(Token::Comma) => self.i += 1,
                        Some(Token::RParen) => {
                            self.i += 1;
                            return Ok(Expr::Call(name, args));
                        }
                        _ => return self.syntax("expected ',' or ')'"),
                    }
                }
            }
            Token::LParen => {
                self.i += 1;
                let inner = self.expr()?;
                if self.peek() != Some(&Token::RParen) {
                    return self.syntax("expected ')'");
                }
                self.i += 1;
                Ok(inner)
            }
            _ => self.syntax("expected a number, a name or '('"),
        }
    }
}

pub fn parse(src: &str) -> Result<Expr, Error> {
    let toks = lex(src).map_err(|e| Error::Syntax {
        pos: e.pos,
        message: e.message,
    })?;
    let mut p = Parser {
        toks,
        i: 0,
        end: src.len(),
    };
    let e = p.expr()?;
    if p.i != p.toks.len() {
        return p.syntax("unexpected trailing input");
    }
    Ok(e)
}

/// Variables for evaluation. `pi` and `e` are always defined.
#[derive(Clone, Debug, Default)]
pub struct Env {
    vars: HashMap<String, f64>,
}

impl Env {
    pub fn new() -> Self {
        Env::default()
    }

    pub fn with(mut self, name: &str, value: f64) -> Self {
        self.vars.insert(name.to_string(), value);
        self
    }

    fn get(&self, name: &str) -> Option<f64> {
        match self.vars.get(name) {
            Some(v) => Some(*v),
            None => match name {
                "pi" => Some(std::f64::consts::PI),
                "e" => Some(std::f64::consts::E),
                _ => None,
            },
        }
    }
}

fn call(name: &str, args: &[f64]) -> Result<f64, Error> {
    let arity = |expected: usize| -> Result<(), Error> {
        if args.len() == expected {
            Ok(())
        } else {
            Err(Error::Arity {
                name: name.to_string(),
                expected,
                got: args.len(),
            })
        }
    };
    match name {
        "sqrt" => {
            arity(1)?;
            if args[0] < 0.0 {
                return Err(Error::Domain("sqrt of a negative number".to_string()));
            }
            Ok(args[0].sqrt())
        }
        "ln" => {
            arity(1)?;
            if args[0] <= 0.0 {
                return Err(Error::Domain("ln of a non-positive number".to_string()));
            }
            Ok(args[0].ln())
        }
        "exp" => arity(1).map(|_| args[0].exp()),
        "abs" => arity(1).map(|_| args[0].abs()),
        "sin" => arity(1).map(|_| args[0].sin()),
        "cos" => arity(1).map(|_| args[0].cos()),
        "pow" => arity(2).map(|_| args[0].powf(args[1])),
        "min" | "max" => {
            if args.is_empty() {
                return Err(Error::Arity {
                    name: name.to_string(),
                    expected: 1,
                    got: 0,
                });
            }
            let pick = if name == "min" { f64::min } else { f64::max };
            Ok(args[1..].iter().fold(args[0], |acc, &v| pick(acc, v)))
        }
        _ => Err(Error::UnknownFunction(name.to_string())),
    }
}

pub fn eval(e: &Expr, env: &Env) -> Result<f64, Error> {
    match e {
        Expr::Num(v) => Ok(*v),
        Expr::Var(name) => env
            .get(name)
            .ok_or_else(|| Error::UnknownVariable(name.clone())),
        Expr::Neg(inner) => Ok(-eval(inner, env)?),
        Expr::Bin(op, l, r) => {
            let a = eval(l, env)?;
            let b = eval(r, env)?;
            match op {
                '+' => Ok(a + b),
                '-' => Ok(a - b),
                '*' => Ok(a * b),
                '/' | '%' if b == 0.0 => Err(Error::DivisionByZero),
                '/' => Ok(a / b),
                '%' => Ok(a % b),
                '^' => Ok(a.powf(b)),
                _ => unreachable!("parser only produces + - * / % ^"),
            }
        }
        Expr::Call(name, args) => {
            let vals = args
                .iter()
                .map(|a| eval(a, env))
                .collect::<Result<Vec<_>, _>>()?;
            call(name, &vals)
        }
    }
}

/// Parses and evaluates in one step.
pub fn evaluate(src: &str, env: &Env) -> Result<f64, Error> {
    eval(&parse(src)?, env)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(src: &str) -> f64 {
        evaluate(src, &Env::new()).unwrap()
    }

    #[test]
    fn precedence_and_associativity() {
        assert_eq!(ev("2*(3+4)-5/2"), 11.5);
        assert_eq!(ev("2^3^2"), 512.0);
        assert_eq!(ev("-2^2"), -4.0);
        assert_eq!(ev("2^-1"), 0.5);
        assert_eq!(ev("10 - 4 - 3"), 3.0);
        assert_eq!(ev("7 % 4 * 2"), 6.0);
    }

    #[test]
    fn functions_and_variables() {
        let env = Env::new().with("x", 3.0);
        assert_eq!(evaluate("max(1, x, 2) + min(4, 5)", &env).unwrap(), 7.0);
        assert_eq!(evaluate("sqrt(x*x + 16)", &env).unwrap(), 5.0);
        assert!((evaluate("cos(pi) + ln(e)", &env).unwrap()).abs() < 1e-15);
    }

    #[test]
    fn errors() {
        let env = Env::new();
        assert!(evaluate("1 +", &env).unwrap_err().is_syntax());
        assert!(evaluate("(1", &env).unwrap_err().is_syntax());
        assert!(evaluate("1 2", &env).unwrap_err().is_syntax());
        assert_eq!(evaluate("1/0", &env), Err(Error::DivisionByZero));
        assert_eq!(
            evaluate("y", &env),
            Err(Error::UnknownVariable("y".to_string()))
        );
        assert_eq!(
            evaluate("foo(1)", &env),
            Err(Error::UnknownFunction("foo".to_string()))
        );
        assert_eq!(
            evaluate("pow(1)", &env),
            Err(Error::Arity {
                name: "pow".to_string(),
                expected: 2,
                got: 1
            })
        );
        assert!(matches!(evaluate("sqrt(-1)", &env), Err(Error::Domain(_))));
        match parse("2 * )") {
            Err(Error::Syntax { pos, .. }) => assert_eq!(pos, 4),
            other => panic!("unexpected {:?}", other),
        }
    }

    #[test]
    fn ast_shape() {
        assert_eq!(
            parse("-a*2").unwrap(),
            Expr::Bin(
                '*',
                Box::new(Expr::Neg(Box::new(Expr::Var("a".to_string())))),
                Box::new(Expr::Num(2.0))
            )
        );
    }
}
