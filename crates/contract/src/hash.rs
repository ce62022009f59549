//! Content hashes in the `sha256:<hex>` form the SkillOpt packages carry (facts §1, §2).

use sha2::{Digest, Sha256};

/// Prefix of every content hash on the wire.
pub const SHA256_PREFIX: &str = "sha256:";

/// Why a declared artifact hash could not be normalised (facts §2, check 1).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HashError {
    /// Not exactly 64 hex characters after the optional `sha256:` prefix.
    #[error("artifact hash must be 64 hex characters")]
    Length,
    /// 64 characters, but not all hexadecimal.
    #[error("artifact hash is not valid hex")]
    NotHex,
}

/// SHA-256 of `bytes` as lowercase hex (64 characters), no prefix.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// Content hash of `bytes` as `sha256:<64 lowercase hex>`, the form of
/// `template.content_hash` and artifact `hash` fields (facts §1).
pub fn content_hash(bytes: impl AsRef<[u8]>) -> String {
    format!("{SHA256_PREFIX}{}", sha256_hex(bytes.as_ref()))
}

/// Normalises a declared hash: trims, accepts an optional `sha256:` prefix (any case),
/// lowercases, and returns `sha256:<64 hex>` (facts §2, candidate artifact hash).
///
/// # Errors
/// [`HashError::Length`] unless 64 characters remain; [`HashError::NotHex`] if any is not hex.
pub fn normalize_hash(declared: &str) -> Result<String, HashError> {
    let trimmed = declared.trim();
    let hex_part = match trimmed.get(..SHA256_PREFIX.len()) {
        Some(prefix) if prefix.eq_ignore_ascii_case(SHA256_PREFIX) => {
            &trimmed[SHA256_PREFIX.len()..]
        }
        _ => trimmed,
    };
    if hex_part.len() != 64 {
        return Err(HashError::Length);
    }
    if !hex_part.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(HashError::NotHex);
    }
    Ok(format!("{SHA256_PREFIX}{}", hex_part.to_ascii_lowercase()))
}

/// The 64-hex part of a normalised `sha256:<hex>` hash (the blob path key, `sha256/<hex[:2]>/<hex>`).
/// Returns the input unchanged when it has no prefix.
pub fn hash_hex(hash: &str) -> &str {
    hash.strip_prefix(SHA256_PREFIX).unwrap_or(hash)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_hash_of_empty_input() {
        assert_eq!(
            content_hash(""),
            "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
    }

    #[test]
    fn normalize_hash_cases() {
        let hex = "E3B0C44298FC1C149AFBF4C8996FB92427AE41E4649B934CA495991B7852B855";
        let want = format!("sha256:{}", hex.to_lowercase());
        let table: &[(&str, Result<String, HashError>)] = &[
            (hex, Ok(want.clone())),
            (&format!("sha256:{hex}"), Ok(want.clone())),
            (&format!("  SHA256:{hex} "), Ok(want.clone())),
            ("sha256:abc", Err(HashError::Length)),
            (&"z".repeat(64), Err(HashError::NotHex)),
        ];
        for (input, expected) in table {
            assert_eq!(&normalize_hash(input), expected, "input {input:?}");
        }
        assert_eq!(hash_hex(&want), hex.to_lowercase());
    }
}
