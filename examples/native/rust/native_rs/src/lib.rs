//! C ABI of `libnative_rs.so`: thin `extern "C"` wrappers over `native_rs_core`.
//!
//! Conventions: strings are NUL-terminated UTF-8; a NULL pointer or invalid UTF-8 yields the
//! documented error value; no panic crosses the boundary (each body runs in `catch_unwind`).

use std::ffi::CStr;
use std::os::raw::{c_char, c_int};
use std::panic::{catch_unwind, AssertUnwindSafe};

use native_rs_core::{checksum, expr, kv, semver, varint};

fn guard<T>(on_panic: T, f: impl FnOnce() -> T) -> T {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or(on_panic)
}

/// # Safety
/// `data` must be NULL (only with `len == 0`) or point to `len` readable bytes.
unsafe fn bytes<'a>(data: *const u8, len: usize) -> &'a [u8] {
    if data.is_null() || len == 0 {
        &[]
    } else {
        std::slice::from_raw_parts(data, len)
    }
}

/// # Safety
/// `s` must be NULL or a valid NUL-terminated string that outlives the result.
unsafe fn text<'a>(s: *const c_char) -> Option<&'a str> {
    if s.is_null() {
        None
    } else {
        CStr::from_ptr(s).to_str().ok()
    }
}

static VERSION: &[u8] = concat!(env!("CARGO_PKG_VERSION"), "\0").as_bytes();

/// Library version, e.g. "0.1.0" (static storage).
#[no_mangle]
pub extern "C" fn nrs_version() -> *const c_char {
    VERSION.as_ptr() as *const c_char
}

/// CRC-32 (IEEE) of `len` bytes at `data`.
///
/// # Safety
/// See [`bytes`].
#[no_mangle]
pub unsafe extern "C" fn nrs_crc32(data: *const u8, len: usize) -> u32 {
    let b = bytes(data, len);
    guard(0, || checksum::crc32(b))
}

/// Adler-32 of `len` bytes at `data`.
///
/// # Safety
/// See [`bytes`].
#[no_mangle]
pub unsafe extern "C" fn nrs_adler32(data: *const u8, len: usize) -> u32 {
    let b = bytes(data, len);
    guard(1, || checksum::adler32(b))
}

/// FNV-1a 64 of `len` bytes at `data`.
///
/// # Safety
/// See [`bytes`].
#[no_mangle]
pub unsafe extern "C" fn nrs_fnv1a64(data: *const u8, len: usize) -> u64 {
    let b = bytes(data, len);
    guard(0, || checksum::fnv1a64(b))
}

/// Evaluates an arithmetic expression with the variable `x` bound; writes the result to `*out`.
/// Returns 0 on success, 1 on a syntax error, 2 on an evaluation error (unknown name,
/// division by zero, domain error), -1 on bad arguments.
///
/// # Safety
/// `src` must be NULL or NUL-terminated; `out` must be NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn nrs_eval(src: *const c_char, x: f64, out: *mut f64) -> c_int {
    let s = match text(src) {
        Some(s) => s,
        None => return -1,
    };
    if out.is_null() {
        return -1;
    }
    guard(-1, || {
        match expr::evaluate(s, &expr::Env::new().with("x", x)) {
            Ok(v) => {
                *out = v;
                0
            }
            Err(e) if e.is_syntax() => 1,
            Err(_) => 2,
        }
    })
}

/// Compares two semantic versions: -1, 0 or 1; -2 if either does not parse or is NULL.
///
/// # Safety
/// `a` and `b` must be NULL or NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn nrs_semver_compare(a: *const c_char, b: *const c_char) -> c_int {
    let (a, b) = match (text(a), text(b)) {
        (Some(a), Some(b)) => (a, b),
        _ => return -2,
    };
    guard(-2, || {
        match (semver::Version::parse(a), semver::Version::parse(b)) {
            (Ok(va), Ok(vb)) => semver::compare(&va, &vb) as c_int,
            _ => -2,
        }
    })
}

/// Number of key/value entries in INI-style text, or -1 if it does not parse.
///
/// # Safety
/// `src` must be NULL or NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn nrs_kv_count(src: *const c_char) -> i64 {
    let s = match text(src) {
        Some(s) => s,
        None => return -1,
    };
    guard(-1, || kv::parse(s).map(|e| e.len() as i64).unwrap_or(-1))
}

/// Zigzag-LEB128 encodes `n` values into `buf` (capacity `cap` bytes). Returns the encoded
/// length; a value greater than `cap` means `buf` was too small and nothing was written.
///
/// # Safety
/// `values` must point to `n` readable i64; `buf` to `cap` writable bytes (or be NULL with cap 0).
#[no_mangle]
pub unsafe extern "C" fn nrs_varint_encode(
    values: *const i64,
    n: usize,
    buf: *mut u8,
    cap: usize,
) -> usize {
    if values.is_null() && n != 0 {
        return 0;
    }
    let vals: &[i64] = if n == 0 {
        &[]
    } else {
        std::slice::from_raw_parts(values, n)
    };
    let encoded = guard(Vec::new(), || varint::encode_all(vals));
    if encoded.len() <= cap && !buf.is_null() {
        std::ptr::copy_nonoverlapping(encoded.as_ptr(), buf, encoded.len());
    }
    encoded.len()
}

/// Runs the built-in known-answer checks; returns the number of failures (0 = good).
#[no_mangle]
pub extern "C" fn nrs_selftest() -> c_int {
    guard(1, || {
        let env = expr::Env::new().with("x", 2.0);
        let checks = [
            checksum::crc32(b"123456789") == 0xCBF4_3926,
            checksum::adler32(b"Wikipedia") == 0x11E6_0398,
            checksum::fnv1a64(b"a") == 0xaf63_dc4c_8601_ec8c,
            checksum::fletcher16(b"abcde") == 0xC8F0,
            expr::evaluate("2*(3+4)-5/2", &env) == Ok(11.5),
            expr::evaluate("x^10 - 1000", &env) == Ok(24.0),
            kv::parse("a = 1\n[s]\nb = \"two\"\n").map(|e| e.len()) == Ok(2),
            semver::Version::parse("1.0.0-rc.1")
                .and_then(|a| semver::Version::parse("1.0.0").map(|b| semver::compare(&a, &b)))
                == Ok(std::cmp::Ordering::Less),
            varint::decode_all(&varint::encode_all(&[0, -1, 300, i64::MIN]))
                == Ok(vec![0, -1, 300, i64::MIN]),
        ];
        checks.iter().filter(|ok| !**ok).count() as c_int
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::CString;

    #[test]
    fn checksums_through_the_abi() {
        let d = b"123456789";
        unsafe {
            assert_eq!(nrs_crc32(d.as_ptr(), d.len()), 0xCBF4_3926);
            assert_eq!(nrs_adler32(std::ptr::null(), 0), 1);
            assert_eq!(nrs_fnv1a64(std::ptr::null(), 0), 0xcbf2_9ce4_8422_2325);
        }
    }

    #[test]
    fn eval_status_codes() {
        let mut out = 0.0;
        unsafe {
            let ok = CString::new("x*x + 1").unwrap();
            assert_eq!(nrs_eval(ok.as_ptr(), 3.0, &mut out), 0);
            assert_eq!(out, 10.0);
            let bad = CString::new("1 +").unwrap();
            assert_eq!(nrs_eval(bad.as_ptr(), 0.0, &mut out), 1);
            let div = CString::new("1/0").unwrap();
            assert_eq!(nrs_eval(div.as_ptr(), 0.0, &mut out), 2);
            assert_eq!(nrs_eval(std::ptr::null(), 0.0, &mut out), -1);
            assert_eq!(nrs_eval(ok.as_ptr(), 0.0, std::ptr::null_mut()), -1);
        }
    }

    #[test]
    fn semver_kv_and_varint() {
        let a = CString::new("1.0.0-beta.11").unwrap();
        let b = CString::new("1.0.0-beta.2").unwrap();
        let junk = CString::new("1.x").unwrap();
        let ini = CString::new("[a]\nk = v\nj = w\n").unwrap();
        unsafe {
            assert_eq!(nrs_semver_compare(a.as_ptr(), b.as_ptr()), 1);
            assert_eq!(nrs_semver_compare(b.as_ptr(), a.as_ptr()), -1);
            assert_eq!(nrs_semver_compare(a.as_ptr(), junk.as_ptr()), -2);
            assert_eq!(nrs_kv_count(ini.as_ptr()), 2);
            let values = [300i64, -1];
            let mut buf = [0u8; 8];
            assert_eq!(
                nrs_varint_encode(values.as_ptr(), 2, buf.as_mut_ptr(), buf.len()),
                3
            );
            assert_eq!(&buf[..3], &[0xD8, 0x04, 0x01]);
            assert_eq!(
                nrs_varint_encode(values.as_ptr(), 2, buf.as_mut_ptr(), 2),
                3
            );
        }
    }

    #[test]
    fn selftest_and_version() {
        assert_eq!(nrs_selftest(), 0);
        let v = unsafe { CStr::from_ptr(nrs_version()) };
        assert_eq!(v.to_str().unwrap(), native_rs_core::VERSION);
    }
}
