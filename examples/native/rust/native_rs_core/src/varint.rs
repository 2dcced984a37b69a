//! LEB128 variable-length integers (as in protobuf and WebAssembly) and zigzag encoding.

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DecodeError {
    /// The input ended inside a varint.
    Truncated,
    /// More than 10 bytes, or bits beyond 64.
    Overflow,
}

pub fn encode_u64(mut v: u64, out: &mut Vec<u8>) {
    loop {
        let byte = (v & 0x7F) as u8;
        v >>= 7;
        if v == 0 {
            out.push(byte);
            return;
        }
        out.push(byte | 0x80);
    }
}

/// Decodes one value; returns it and the number of bytes read.
pub fn decode_u64(buf: &[u8]) -> Result<(u64, usize), DecodeError> {
    let mut result = 0u64;
    for (i, &byte) in buf.iter().enumerate() {
        if i == 10 {
            return Err(DecodeError::Overflow);
        }
        let low = u64::from(byte & 0x7F);
        if i == 9 && low > 1 {
            return Err(DecodeError::Overflow);
        }
        result |= low << (7 * i);
        if byte & 0x80 == 0 {
            return Ok((result, i + 1));
        }
    }
    if buf.len() >= 10 {
        Err(DecodeError::Overflow)
    } else {
        Err(DecodeError::Truncated)
    }
}

pub fn zigzag_encode(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

pub fn zigzag_decode(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

pub fn encode_all(values: &[i64]) -> Vec<u8> {
    let mut out = Vec::with_capacity(values.len());
    for &v in values {
        encode_u64(zigzag_encode(v), &mut out);
    }
    out
}

pub fn decode_all(mut buf: &[u8]) -> Result<Vec<i64>, DecodeError> {
    let mut out = Vec::new();
    while !buf.is_empty() {
        let (v, n) = decode_u64(buf)?;
        out.push(zigzag_decode(v));
        buf = &buf[n..];
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn enc(v: u64) -> Vec<u8> {
        let mut out = Vec::new();
        encode_u64(v, &mut out);
        out
    }

    #[test]
    fn known_encodings() {
        assert_eq!(enc(0), vec![0x00]);
        assert_eq!(enc(1), vec![0x01]);
        assert_eq!(enc(127), vec![0x7F]);
        assert_eq!(enc(128), vec![0x80, 0x01]);
        assert_eq!(enc(300), vec![0xAC, 0x02]);
        assert_eq!(enc(624_485), vec![0xE5, 0x8E, 0x26]);
        assert_eq!(enc(u64::MAX).len(), 10);
    }

    #[test]
    fn decode_errors() {
        assert_eq!(decode_u64(&[0x80, 0x80]), Err(DecodeError::Truncated));
        assert_eq!(decode_u64(&[0xFF; 11]), Err(DecodeError::Overflow));
        let mut too_big = vec![0xFF; 9];
        too_big.push(0x02);
        assert_eq!(decode_u64(&too_big), Err(DecodeError::Overflow));
        assert_eq!(decode_u64(&enc(u64::MAX)), Ok((u64::MAX, 10)));
    }

    #[test]
    fn zigzag_and_round_trip() {
        assert_eq!(zigzag_encode(0), 0);
        assert_eq!(zigzag_encode(-1), 1);
        assert_eq!(zigzag_encode(1), 2);
        assert_eq!(zigzag_encode(-2), 3);
        assert_eq!(zigzag_encode(i64::MIN), u64::MAX);
        let values = [0, -1, 1, 63, -64, 64, 1 << 40, i64::MIN, i64::MAX];
        assert_eq!(decode_all(&encode_all(&values)).unwrap(), values.to_vec());
    }
}
