//! Signed artifacts: who built a `.pbc`, and whether it changed since.
//!
//! A signature is a [minisign](https://jedisct1.github.io/minisign/) signature (Ed25519 over
//! the BLAKE2b-512 hash of the message) of the artifact as written, header and payload,
//! carried in the artifact's signature block ([`crate::artifact`]), so a signed artifact is
//! still one file. Keys are minisign keys: a `.pub` file made by `prosec keygen` or by
//! `minisign -G` serves as a trust key ([`TrustKey`]).
//!
//! [`check`] tells a host, before anything runs, which of four things holds: the artifact
//! is [unsigned](Trust::Unsigned), [signed by a key it was not given](Trust::Foreign),
//! [altered after signing](Trust::Altered) (the signature names a trusted key but does not
//! match the bytes), or [trusted](Trust::Trusted).

use crate::artifact::{split_signature, with_signature, LoadError};
use std::fmt;
use std::io::Cursor;
use std::path::Path;

/// A key id: the 8 bytes minisign puts in a key and in every signature it makes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct KeyId(pub [u8; 8]);

impl KeyId {
    fn of(bytes: &[u8]) -> KeyId {
        let mut id = [0u8; 8];
        id.copy_from_slice(&bytes[..8]);
        KeyId(id)
    }
}

impl fmt::Display for KeyId {
    /// As minisign shows it: 16 upper-case hex digits of the id read as a little-endian
    /// number.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:016X}", u64::from_le_bytes(self.0))
    }
}

/// The longest key file read, public or secret: a minisign key file is a few hundred bytes,
/// its comment lines included.
pub const MAX_KEY_FILE: u64 = 64 << 10;

/// A public key trusted to sign artifacts.
#[derive(Clone, Debug)]
pub struct TrustKey {
    key: minisign::PublicKey,
    id: KeyId,
}

impl TrustKey {
    /// Parses a public key: a minisign `.pub` file (an `untrusted comment:` line, then the
    /// key in base64), or the base64 line alone.
    pub fn parse(text: &str) -> Result<TrustKey, String> {
        let line = text
            .lines()
            .map(str::trim)
            .find(|l| !l.is_empty() && !l.starts_with("untrusted comment:"))
            .ok_or("no key in it")?;
        let key = minisign::PublicKey::from_base64(line)
            .map_err(|e| format!("not a minisign public key: {e}"))?;
        let id = KeyId::of(key.keynum());
        Ok(TrustKey { key, id })
    }

    /// Reads a public key file: a regular file of at most [`MAX_KEY_FILE`] bytes.
    pub fn read(path: &Path) -> Result<TrustKey, String> {
        let text = crate::bounded::read_to_string(path, MAX_KEY_FILE)
            .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        TrustKey::parse(&text).map_err(|e| format!("{}: {e}", path.display()))
    }

    /// The key's id.
    pub fn id(&self) -> KeyId {
        self.id
    }
}

/// What a host may conclude about an artifact from the keys it trusts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Trust {
    /// The artifact carries no signature.
    Unsigned,
    /// Signed, by a key that is not among those trusted.
    Foreign {
        /// The id of the key that signed it.
        key: KeyId,
    },
    /// The signature names a trusted key but does not match the bytes (or cannot be read):
    /// the artifact, or its signature, was changed after signing.
    Altered {
        /// The id the signature names, when it can be read.
        key: Option<KeyId>,
        /// What failed.
        reason: String,
    },
    /// Signed by a trusted key, and unchanged since.
    Trusted {
        /// The id of the key.
        key: KeyId,
        /// The signature's trusted comment (when and what was signed).
        comment: String,
    },
}

impl fmt::Display for Trust {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Trust::Unsigned => write!(f, "the artifact is not signed"),
            Trust::Foreign { key } => {
                write!(
                    f,
                    "the artifact is signed by key {key}, which is not trusted"
                )
            }
            Trust::Altered {
                key: Some(key),
                reason,
            } => write!(
                f,
                "the artifact was altered after key {key} signed it ({reason})"
            ),
            Trust::Altered { key: None, reason } => {
                write!(f, "the artifact's signature is damaged ({reason})")
            }
            Trust::Trusted { key, .. } => write!(f, "signed by trusted key {key}"),
        }
    }
}

impl Trust {
    /// Whether a host that requires trust may run the artifact.
    pub fn is_trusted(&self) -> bool {
        matches!(self, Trust::Trusted { .. })
    }
}

/// The id of the key that signed `bytes`, without checking the signature: `None` for an
/// unsigned artifact.
pub fn signer(bytes: &[u8]) -> Result<Option<KeyId>, LoadError> {
    let (_, signature) = split_signature(bytes)?;
    Ok(signature.and_then(|s| {
        minisign::SignatureBox::from_string(s)
            .ok()
            .map(|b| KeyId::of(b.keynum()))
    }))
}

/// Checks the signature of the artifact file `bytes` against the trusted `keys`. Fails only
/// when the file is not framed as an artifact at all; everything about the signature is in
/// the [`Trust`] returned.
pub fn check(bytes: &[u8], keys: &[TrustKey]) -> Result<Trust, LoadError> {
    let (signed, signature) = split_signature(bytes)?;
    let Some(signature) = signature else {
        return Ok(Trust::Unsigned);
    };
    let sig = match minisign::SignatureBox::from_string(signature) {
        Ok(sig) => sig,
        Err(e) => {
            return Ok(Trust::Altered {
                key: None,
                reason: format!("the signature cannot be read: {e}"),
            })
        }
    };
    let id = KeyId::of(sig.keynum());
    let Some(key) = keys.iter().find(|k| k.id == id) else {
        return Ok(Trust::Foreign { key: id });
    };
    if let Err(e) = minisign::verify(&key.key, &sig, Cursor::new(signed), true, false, false) {
        return Ok(Trust::Altered {
            key: Some(id),
            reason: e.to_string(),
        });
    }
    Ok(Trust::Trusted {
        key: id,
        comment: sig.trusted_comment().unwrap_or_default(),
    })
}

/// Signs the artifact file `bytes` with `key` (an unencrypted or decrypted minisign secret
/// key), putting `comment` in the signature's trusted comment; returns the signed file (any
/// earlier signature replaced).
pub fn sign(bytes: &[u8], key: &minisign::SecretKey, comment: &str) -> Result<Vec<u8>, String> {
    let (signed, _) = split_signature(bytes).map_err(|e| e.to_string())?;
    // The comment is one line of the signature's text.
    let comment = comment.replace(['\n', '\r'], " ");
    let sig = minisign::sign(
        None,
        key,
        Cursor::new(signed),
        Some(&comment),
        Some("signature of a prose artifact"),
    )
    .map_err(|e| e.to_string())?;
    with_signature(signed, &sig.into_string()).map_err(|e| e.to_string())
}
