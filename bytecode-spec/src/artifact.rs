//! The `.pbc` file: a fixed 64-byte header, then the payload.
//!
//! ```text
//! offset size  field
//!      0    4  magic "PBC\0"
//!      4    2  format version (u16, little-endian)
//!      6    2  reserved, zero
//!      8   16  compiler version (UTF-8, zero-padded)
//!     24   32  SHA-256 of the main program's source text
//!     56    4  payload length in bytes (u32, little-endian)
//!     60    4  CRC-32 (IEEE) of bytes 0..60 followed by the payload
//!     64    n  payload: the decoded size (u32, little-endian), then one zstd frame
//!              holding the bincode encoding of the [`Artifact`]
//!   64+n       optional signature block (see [`crate::signature`]):
//!                  4  magic "PSIG"
//!                  4  length m of the signature (u32, little-endian)
//!                  m  a minisign signature, as text, of bytes 0..64+n
//! ```
//!
//! The checksum does not cover the signature block: signing appends it to a finished file,
//! and removing it leaves the unsigned file as it was written.
//!
//! Reading never trusts the file: lengths are checked against the data before anything is
//! allocated, the checksum covers every byte, and [`load`] runs the verifier.

use crate::module::Artifact;
use crate::verify::{Verified, VerifyError};

/// The first bytes of every `.pbc` artifact.
pub const MAGIC: [u8; 4] = *b"PBC\0";
/// The format version this crate reads and writes.
pub const FORMAT_VERSION: u16 = 3;
/// Size of the fixed header.
pub const HEADER_LEN: usize = 64;
/// The largest decoded payload accepted (a guard against decompression bombs; real
/// artifacts are a few kilobytes).
pub const MAX_PAYLOAD: usize = 16 << 20;
/// The first bytes of the signature block after the payload.
pub const SIGNATURE_MAGIC: [u8; 4] = *b"PSIG";
/// The longest signature text accepted (a minisign signature with its comments is a few
/// hundred bytes).
pub const MAX_SIGNATURE: usize = 4096;
/// The longest artifact file accepted, and so the most a host reads of a `.pbc`
/// ([`read_file`]): the header, the decoded size, a zstd frame of the largest payload (at
/// worst the input and 1/256 of it more, zstd's `ZSTD_COMPRESSBOUND` for inputs of 128 KiB
/// and more), and the largest signature block.
pub const MAX_FILE: usize = HEADER_LEN + 4 + MAX_PAYLOAD + (MAX_PAYLOAD >> 8) + 8 + MAX_SIGNATURE;
/// zstd level used when writing (3: fast, and on small artifacts as small as much higher levels).
const COMPRESSION_LEVEL: i32 = 3;

/// The header fields besides framing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Header {
    /// Version of the compiler that wrote the artifact.
    pub compiler_version: String,
    /// SHA-256 of the main program's source text.
    pub source_hash: [u8; 32],
}

/// Why an artifact cannot be loaded.
#[derive(Debug, PartialEq)]
pub enum LoadError {
    /// The file is shorter than its framing says.
    Truncated {
        /// Bytes the framing needs.
        needed: usize,
        /// Bytes present.
        got: usize,
    },
    /// The file does not start with the magic bytes.
    BadMagic,
    /// The format version is not the one this VM reads.
    UnsupportedVersion(u16),
    /// Bytes follow the payload.
    TrailingBytes(usize),
    /// The checksum does not match: the file is corrupt.
    Checksum {
        /// Checksum in the header.
        stored: u32,
        /// Checksum of the contents.
        actual: u32,
    },
    /// The payload does not decompress or decode.
    Malformed(String),
    /// The decoded program is structurally invalid.
    Invalid(VerifyError),
}

impl std::fmt::Display for LoadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LoadError::Truncated { needed, got } => {
                write!(f, "truncated artifact: needs {needed} bytes, has {got}")
            }
            LoadError::BadMagic => write!(f, "not a .pbc artifact (bad magic bytes)"),
            LoadError::UnsupportedVersion(v) => write!(
                f,
                "unsupported artifact format version {v} (this build reads version {FORMAT_VERSION}); rebuild it with a matching prosec"
            ),
            LoadError::TrailingBytes(n) => write!(f, "{n} unexpected bytes after the payload"),
            LoadError::Checksum { stored, actual } => write!(
                f,
                "checksum mismatch (stored {stored:08x}, computed {actual:08x}): the artifact is corrupt"
            ),
            LoadError::Malformed(m) => write!(f, "malformed payload: {m}"),
            LoadError::Invalid(e) => write!(f, "invalid bytecode: {e}"),
        }
    }
}

impl std::error::Error for LoadError {}

/// The one place the payload encoding is chosen.
mod encoding {
    use crate::module::Artifact;

    use bincode::config::{Configuration, Limit, LittleEndian, Varint};

    /// Little-endian, variable-length integers, and a cap on what decoding may allocate.
    fn config() -> Configuration<LittleEndian, Varint, Limit<{ super::MAX_PAYLOAD }>> {
        bincode::config::standard()
            .with_little_endian()
            .with_variable_int_encoding()
            .with_limit::<{ super::MAX_PAYLOAD }>()
    }

    /// Encodes an artifact.
    pub fn encode(a: &Artifact) -> Result<Vec<u8>, String> {
        bincode::serde::encode_to_vec(a, config()).map_err(|e| e.to_string())
    }

    /// Decodes an artifact.
    pub fn decode(bytes: &[u8]) -> Result<Artifact, String> {
        let (a, used) =
            bincode::serde::decode_from_slice(bytes, config()).map_err(|e| e.to_string())?;
        if used != bytes.len() {
            return Err(format!(
                "{} bytes left after the encoded program",
                bytes.len() - used
            ));
        }
        Ok(a)
    }
}

/// Appends the zstd frame of `input` to `out`, reusing one compression context per thread
/// (creating one costs more than compressing a typical artifact).
fn compress(input: &[u8], out: &mut Vec<u8>) {
    use std::cell::RefCell;
    thread_local! {
        static COMPRESSOR: RefCell<Option<zstd::bulk::Compressor<'static>>> = const { RefCell::new(None) };
    }
    COMPRESSOR.with(|cell| {
        let mut slot = cell.borrow_mut();
        if slot.is_none() {
            *slot = zstd::bulk::Compressor::new(COMPRESSION_LEVEL).ok();
        }
        let frame = match slot.as_mut() {
            Some(c) => c.compress(input),
            None => zstd::bulk::compress(input, COMPRESSION_LEVEL),
        };
        // Compressing into memory only fails if zstd cannot allocate.
        out.extend(frame.unwrap_or_default());
    });
}

/// Decompresses one zstd frame of exactly `size` bytes, reusing a context per thread.
fn decompress(frame: &[u8], size: usize) -> Result<Vec<u8>, String> {
    use std::cell::RefCell;
    thread_local! {
        static DECOMPRESSOR: RefCell<Option<zstd::bulk::Decompressor<'static>>> = const { RefCell::new(None) };
    }
    DECOMPRESSOR.with(|cell| {
        let mut slot = cell.borrow_mut();
        if slot.is_none() {
            *slot = zstd::bulk::Decompressor::new().ok();
        }
        let data = match slot.as_mut() {
            Some(d) => d.decompress(frame, size),
            None => zstd::bulk::decompress(frame, size),
        }
        .map_err(|e| e.to_string())?;
        if data.len() != size {
            return Err(format!(
                "payload decodes to {} bytes, header says {size}",
                data.len()
            ));
        }
        Ok(data)
    })
}

fn checksum(header: &[u8], payload: &[u8]) -> u32 {
    let mut h = crc32fast::Hasher::new();
    h.update(&header[..60]);
    h.update(payload);
    h.finalize()
}

/// Why an artifact cannot be written.
#[derive(Debug, PartialEq, Eq)]
pub enum WriteError {
    /// The encoded program exceeds [`MAX_PAYLOAD`], so no reader would accept it.
    TooLarge(usize),
    /// The encoder failed.
    Encode(String),
}

impl std::fmt::Display for WriteError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WriteError::TooLarge(n) => write!(
                f,
                "the compiled program takes {n} bytes, more than the {MAX_PAYLOAD} an artifact may hold"
            ),
            WriteError::Encode(e) => write!(f, "cannot encode the program: {e}"),
        }
    }
}

impl std::error::Error for WriteError {}

/// Writes an artifact file. Anything written here is accepted by [`read`].
pub fn write(artifact: &Artifact, header: &Header) -> Result<Vec<u8>, WriteError> {
    let encoded = encoding::encode(artifact).map_err(WriteError::Encode)?;
    if encoded.len() > MAX_PAYLOAD {
        return Err(WriteError::TooLarge(encoded.len()));
    }
    let mut payload = (encoded.len() as u32).to_le_bytes().to_vec();
    compress(&encoded, &mut payload);
    let mut out = Vec::with_capacity(HEADER_LEN + payload.len());
    out.extend_from_slice(&MAGIC);
    out.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
    out.extend_from_slice(&[0, 0]);
    // Cut to the field at a character boundary, so that the text stays UTF-8 and `read`
    // accepts what `write` produced.
    let mut version = [0u8; 16];
    let v = &header.compiler_version;
    let mut cut = v.len().min(16);
    while !v.is_char_boundary(cut) {
        cut -= 1;
    }
    version[..cut].copy_from_slice(&v.as_bytes()[..cut]);
    out.extend_from_slice(&version);
    out.extend_from_slice(&header.source_hash);
    out.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    out.extend_from_slice(&[0; 4]);
    let crc = checksum(&out, &payload);
    out[60..64].copy_from_slice(&crc.to_le_bytes());
    out.extend_from_slice(&payload);
    Ok(out)
}

/// The bytes of the artifact file at `path`, read as [`crate::bounded::read`] reads: a
/// regular file of at most [`MAX_FILE`] bytes, else an error saying what it is.
pub fn read_file(path: &std::path::Path) -> std::io::Result<Vec<u8>> {
    crate::bounded::read(path, MAX_FILE as u64)
}

/// Reads and decodes an artifact without verifying its bytecode.
pub fn read(bytes: &[u8]) -> Result<(Header, Artifact), LoadError> {
    let (bytes, _) = split_signature(bytes)?;
    let u32_at =
        |at: usize| u32::from_le_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]]);
    let payload = &bytes[HEADER_LEN..];
    let stored = u32_at(60);
    let actual = checksum(bytes, payload);
    if stored != actual {
        return Err(LoadError::Checksum { stored, actual });
    }
    if bytes[6] != 0 || bytes[7] != 0 {
        return Err(LoadError::Malformed(
            "reserved header bytes are not zero".into(),
        ));
    }
    let version_text = &bytes[8..24];
    let end = version_text.iter().position(|&b| b == 0).unwrap_or(16);
    let compiler_version = std::str::from_utf8(&version_text[..end])
        .map_err(|_| LoadError::Malformed("compiler version is not UTF-8".into()))?
        .to_string();
    let mut source_hash = [0u8; 32];
    source_hash.copy_from_slice(&bytes[24..56]);
    if payload.len() < 4 {
        return Err(LoadError::Malformed("payload too short".into()));
    }
    let size = u32::from_le_bytes([payload[0], payload[1], payload[2], payload[3]]) as usize;
    if size > MAX_PAYLOAD {
        return Err(LoadError::Malformed(format!(
            "payload claims {size} decoded bytes, more than the {MAX_PAYLOAD} allowed"
        )));
    }
    // The frame records its own content size; it must agree before anything is allocated.
    match zstd::zstd_safe::get_frame_content_size(&payload[4..]) {
        Ok(Some(n)) if n == size as u64 => {}
        Ok(Some(n)) => {
            return Err(LoadError::Malformed(format!(
                "payload claims {size} decoded bytes but its frame holds {n}"
            )))
        }
        _ => {
            return Err(LoadError::Malformed(
                "payload is not a zstd frame with a known size".into(),
            ))
        }
    }
    let decoded = decompress(&payload[4..], size)
        .map_err(|e| LoadError::Malformed(format!("cannot decompress: {e}")))?;
    let artifact = encoding::decode(&decoded).map_err(LoadError::Malformed)?;
    Ok((
        Header {
            compiler_version,
            source_hash,
        },
        artifact,
    ))
}

/// Splits a file into the artifact as written (header and payload) and the text of its
/// signature block, if it has one. Checks only the framing: the magic bytes, the version,
/// the lengths and that the signature is UTF-8 text.
pub fn split_signature(bytes: &[u8]) -> Result<(&[u8], Option<&str>), LoadError> {
    if bytes.len() < 4 || bytes[..4] != MAGIC {
        return Err(if bytes.len() < 4 && MAGIC.starts_with(bytes) {
            LoadError::Truncated {
                needed: HEADER_LEN,
                got: bytes.len(),
            }
        } else {
            LoadError::BadMagic
        });
    }
    if bytes.len() < HEADER_LEN {
        return Err(LoadError::Truncated {
            needed: HEADER_LEN,
            got: bytes.len(),
        });
    }
    let version = u16::from_le_bytes([bytes[4], bytes[5]]);
    if version != FORMAT_VERSION {
        return Err(LoadError::UnsupportedVersion(version));
    }
    let len = u32::from_le_bytes([bytes[56], bytes[57], bytes[58], bytes[59]]) as usize;
    let needed = HEADER_LEN.saturating_add(len);
    if bytes.len() < needed {
        return Err(LoadError::Truncated {
            needed,
            got: bytes.len(),
        });
    }
    let (artifact, rest) = bytes.split_at(needed);
    if rest.is_empty() {
        return Ok((artifact, None));
    }
    if rest.len() < 8 || rest[..4] != SIGNATURE_MAGIC {
        return Err(LoadError::TrailingBytes(rest.len()));
    }
    let m = u32::from_le_bytes([rest[4], rest[5], rest[6], rest[7]]) as usize;
    if m > MAX_SIGNATURE {
        return Err(LoadError::Malformed(format!(
            "the signature block claims {m} bytes, more than the {MAX_SIGNATURE} allowed"
        )));
    }
    if rest.len() - 8 != m {
        return Err(LoadError::Malformed(format!(
            "the signature block claims {m} bytes but holds {}",
            rest.len() - 8
        )));
    }
    let text = std::str::from_utf8(&rest[8..])
        .map_err(|_| LoadError::Malformed("the signature is not UTF-8 text".into()))?;
    Ok((artifact, Some(text)))
}

/// The file `bytes` (an artifact, signed or not) with `signature` as its signature block,
/// replacing any it had.
pub fn with_signature(bytes: &[u8], signature: &str) -> Result<Vec<u8>, LoadError> {
    if signature.len() > MAX_SIGNATURE {
        return Err(LoadError::Malformed(format!(
            "a signature of {} bytes is more than the {MAX_SIGNATURE} allowed",
            signature.len()
        )));
    }
    let (artifact, _) = split_signature(bytes)?;
    let mut out = Vec::with_capacity(artifact.len() + 8 + signature.len());
    out.extend_from_slice(artifact);
    out.extend_from_slice(&SIGNATURE_MAGIC);
    out.extend_from_slice(&(signature.len() as u32).to_le_bytes());
    out.extend_from_slice(signature.as_bytes());
    Ok(out)
}

/// Reads, decodes and verifies an artifact: the only way the VM accepts one.
pub fn load(bytes: &[u8]) -> Result<(Header, Verified), LoadError> {
    let (header, artifact) = read(bytes)?;
    let verified = Verified::check(artifact).map_err(LoadError::Invalid)?;
    Ok((header, verified))
}
