//! Semantic Versioning 2.0.0: parsing and precedence.

use std::cmp::Ordering;
use std::fmt;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Ident {
    Numeric(u64),
    Alpha(String),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Version {
    pub major: u64,
    pub minor: u64,
    pub patch: u64,
    pub pre: Vec<Ident>,
    /// Build metadata; ignored for precedence.
    pub build: Vec<String>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Error(pub String);

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "invalid version: {}", self.0)
    }
}

impl std::error::Error for Error {}

fn numeric(part: &str, what: &str) -> Result<u64, Error> {
    if part.is_empty() || !part.bytes().all(|b| b.is_ascii_digit()) {
        return Err(Error(format!("{} '{}' is not a number", what, part)));
    }
    if part.len() > 1 && part.starts_with('0') {
        return Err(Error(format!("{} '{}' has a leading zero", what, part)));
    }
    part.parse::<u64>()
        .map_err(|_| Error(format!("{} '{}' is too large", what, part)))
}

fn identifiers<'a>(s: &'a str, what: &str) -> Result<Vec<&'a str>, Error> {
    let ids: Vec<&str> = s.split('.').collect();
    for id in &ids {
        if id.is_empty() || !id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-') {
            return Err(Error(format!("bad {} identifier '{}'", what, id)));
        }
    }
    Ok(ids)
}

impl Version {
    pub fn parse(s: &str) -> Result<Version, Error> {
        let (rest, build) = match s.find('+') {
            Some(i) => (
                &s[..i],
                identifiers(&s[i + 1..], "build")?
                    .into_iter()
                    .map(String::from)
                    .collect(),
            ),
            None => (s, Vec::new()),
        };
        let (core, pre) = match rest.find('-') {
            Some(i) => {
                let mut pre = Vec::new();
                for id in identifiers(&rest[i + 1..], "pre-release")? {
                    if id.bytes().all(|b| b.is_ascii_digit()) {
                        pre.push(Ident::Numeric(numeric(id, "pre-release")?));
                    } else {
                        pre.push(Ident::Alpha(id.to_string()));
                    }
                }
                (&rest[..i], pre)
            }
            None => (rest, Vec::new()),
        };
        let parts: Vec<&str> = core.split('.').collect();
        if parts.len() != 3 {
            return Err(Error(format!("'{}' is not MAJOR.MINOR.PATCH", core)));
        }
        Ok(Version {
            major: numeric(parts[0], "major")?,
            minor: numeric(parts[1], "minor")?,
            patch: numeric(parts[2], "patch")?,
            pre,
            build,
        })
    }
}

impl Ord for Ident {
    fn cmp(&self, other: &Self) -> Ordering {
        match (self, other) {
            (Ident::Numeric(a), Ident::Numeric(b)) => a.cmp(b),
            (Ident::Numeric(_), Ident::Alpha(_)) => Ordering::Less,
            (Ident::Alpha(_), Ident::Numeric(_)) => Ordering::Greater,
            (Ident::Alpha(a), Ident::Alpha(b)) => a.cmp(b),
        }
    }
}

impl PartialOrd for Ident {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// Precedence per SemVer section 11 (build metadata ignored).
pub fn compare(a: &Version, b: &Version) -> Ordering {
    (a.major, a.minor, a.patch)
        .cmp(&(b.major, b.minor, b.patch))
        .then_with(|| {
            match (a.pre.is_empty(), b.pre.is_empty()) {
                (true, true) => Ordering::Equal,
                (true, false) => Ordering::Greater, // a release ranks above its pre-releases
                (false, true) => Ordering::Less,
                (false, false) => a.pre.cmp(&b.pre),
            }
        })
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.patch)?;
        for (i, id) in self.pre.iter().enumerate() {
            f.write_str(if i == 0 { "-" } else { "." })?;
            match id {
                Ident::Numeric(n) => write!(f, "{}", n)?,
                Ident::Alpha(s) => f.write_str(s)?,
            }
        }
        if !self.build.is_empty() {
            write!(f, "+{}", self.build.join("."))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &str) -> Version {
        Version::parse(s).unwrap()
    }

    #[test]
    fn spec_precedence_chain() {
        let chain = [
            "1.0.0-alpha",
            "1.0.0-alpha.1",
            "1.0.0-alpha.beta",
            "1.0.0-beta",
            "1.0.0-beta.2",
            "1.0.0-beta.11",
            "1.0.0-rc.1",
            "1.0.0",
            "1.0.1",
            "1.1.0",
            "2.0.0",
        ];
        for pair in chain.windows(2) {
            assert_eq!(
                compare(&v(pair[0]), &v(pair[1])),
                Ordering::Less,
                "{} < {}",
                pair[0],
                pair[1]
            );
        }
        assert_eq!(
            compare(&v("1.0.0+build.5"), &v("1.0.0+other")),
            Ordering::Equal
        );
    }

    #[test]
    fn round_trip_and_errors() {
        assert_eq!(v("1.2.3-rc.1+sha.abc").to_string(), "1.2.3-rc.1+sha.abc");
        assert!(Version::parse("1.2").is_err());
        assert!(Version::parse("01.2.3").is_err());
        assert!(Version::parse("1.2.3-").is_err());
        assert!(Version::parse("1.2.3-01").is_err());
        assert!(Version::parse("1.2.3+").is_err());
        assert!(Version::parse("1.2.x").is_err());
        assert!(Version::parse("99999999999999999999.0.0").is_err());
    }
}
