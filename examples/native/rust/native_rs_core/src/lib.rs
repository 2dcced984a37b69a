//! Small, dependency-free building blocks behind `libnative_rs.so`.
//!
//! Written for Rust 1.63 (Debian bookworm's rustc): no let-else, no GATs, no
//! `std::hint::black_box`, no `OnceLock`, no `core::ffi` C types.

#![forbid(unsafe_code)]

pub mod checksum;
pub mod expr;
pub mod kv;
pub mod lexer;
pub mod semver;
pub mod varint;

/// Crate version, from Cargo.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
