//! Signing keys: Ed25519 key pairs in minisign's formats, so `minisign` itself (or
//! `rsign2`) reads and makes the same files.
//!
//! `prosec keygen NAME` writes `NAME.key` (the secret key, readable by its owner only, and
//! encrypted with a password unless made `--without-password`, minisign's `-W`, for
//! unattended builds) and `NAME.pub` (the public key, which hosts pass to `--trust`). A
//! secret key file that other users can read is refused when it has no password, and warned
//! about when it has one.

use bytecode_spec::signature::{KeyId, TrustKey, MAX_KEY_FILE};
use minisign::{KeyPair, SecretKey, SecretKeyBox};
use std::io::Write;
use std::path::{Path, PathBuf};

/// The files `prosec keygen NAME` writes: `NAME.key` and `NAME.pub`.
pub fn key_paths(name: &Path) -> (PathBuf, PathBuf) {
    let with = |ext: &str| {
        let mut s = name.as_os_str().to_owned();
        s.push(ext);
        PathBuf::from(s)
    };
    (with(".key"), with(".pub"))
}

/// Makes a key pair and writes it as `NAME.key` and `NAME.pub`, refusing to replace
/// existing files unless `force`. `password` encrypts the secret key; `None` leaves it
/// unencrypted. Returns the key id.
pub fn keygen(name: &Path, password: Option<String>, force: bool) -> Result<KeyId, String> {
    let (secret, public) = key_paths(name);
    if !force {
        for p in [&secret, &public] {
            if p.exists() {
                return Err(format!(
                    "{} exists; pass --force to replace the key pair",
                    p.display()
                ));
            }
        }
    }
    let encrypted = password.is_some();
    let KeyPair { pk, sk } = match password {
        Some(pw) => KeyPair::generate_encrypted_keypair(Some(pw)),
        None => KeyPair::generate_unencrypted_keypair(),
    }
    .map_err(|e| format!("cannot make a key pair: {e}"))?;
    let id = KeyId(pk.keynum().try_into().map_err(|_| "bad key id")?);
    let comment = if encrypted {
        format!("prosec secret key {id} (encrypted)")
    } else {
        format!("prosec secret key {id} (no password)")
    };
    let sk_text = sk
        .to_box(Some(&comment))
        .map_err(|e| e.to_string())?
        .into_string();
    let pk_text = pk.to_box().map_err(|e| e.to_string())?.into_string();
    write_private(&secret, sk_text.as_bytes())
        .map_err(|e| format!("cannot write {}: {e}", secret.display()))?;
    std::fs::write(&public, pk_text)
        .map_err(|e| format!("cannot write {}: {e}", public.display()))?;
    Ok(id)
}

/// Writes a file only its owner may read or write.
fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let _ = std::fs::remove_file(path);
    let mut opts = std::fs::OpenOptions::new();
    opts.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        opts.mode(0o600);
    }
    opts.open(path)?.write_all(bytes)
}

/// A secret key read from a file, ready to sign.
pub struct SigningKey {
    /// The key.
    pub key: SecretKey,
    /// Its id.
    pub id: KeyId,
    /// What the reader should know (a key others can read).
    pub warnings: Vec<String>,
}

/// Reads the secret key file `path`. An encrypted key is decrypted with the password that
/// `password` gives when asked (a prompt on the terminal, for the command line). A file that
/// users other than its owner can read is refused if the key has no password, and so is
/// anything but a regular file of at most [`MAX_KEY_FILE`] bytes.
pub fn read_secret_key(
    path: &Path,
    password: impl FnOnce() -> Result<String, String>,
) -> Result<SigningKey, String> {
    let shown = path.display();
    let text = bytecode_spec::bounded::read_to_string(path, MAX_KEY_FILE)
        .map_err(|e| format!("cannot read {shown}: {e}"))?;
    let exposed = exposed_mode(path);
    let sk_box = SecretKeyBox::from_string(&text).map_err(|e| format!("{shown}: {e}"))?;
    let mut warnings = Vec::new();
    let key = match unencrypted(&text, sk_box.clone()) {
        Some(key) => {
            let key = key.map_err(|e| format!("{shown}: {e}"))?;
            if let Some(mode) = exposed {
                return Err(format!(
                    "{shown} has no password and other users can read it (mode {mode:03o}); \
                     make it private first: chmod 600 {shown}"
                ));
            }
            key
        }
        None => {
            if let Some(mode) = exposed {
                warnings.push(format!(
                    "{shown} can be read by other users (mode {mode:03o}); it is encrypted, \
                     but make it private: chmod 600 {shown}"
                ));
            }
            let pw = password()?;
            SecretKey::from_box(sk_box, Some(pw)).map_err(|e| format!("{shown}: {e}"))?
        }
    };
    let id = KeyId(
        key.keynum()
            .try_into()
            .map_err(|_| format!("{shown}: not a minisign secret key"))?,
    );
    Ok(SigningKey { key, id, warnings })
}

/// The key in the secret key file `text` (boxed as `sk_box`) when it has no password (its
/// KDF algorithm bytes are zero), else `None`. Keys made by `minisign -G -W` carry no
/// checksum (those bytes are zero too), where rsign and `prosec keygen` write one; both are
/// read, and a key without a checksum proves itself by signing a test message its own public
/// half verifies, so a damaged one is refused rather than signing with garbage.
fn unencrypted(text: &str, sk_box: SecretKeyBox) -> Option<Result<SecretKey, String>> {
    use base64::Engine;
    /// Where the KDF algorithm and the checksum are in a secret key's bytes.
    const KDF_ALG: std::ops::Range<usize> = 2..4;
    const CHECKSUM_LEN: usize = 32;
    let line = text.lines().nth(1)?;
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(line.trim())
        .ok()?;
    if bytes.get(KDF_ALG)? != [0, 0] {
        return None;
    }
    let checksum = &bytes[bytes.len().saturating_sub(CHECKSUM_LEN)..];
    if checksum.iter().any(|&b| b != 0) {
        return Some(SecretKey::from_unencrypted_box(sk_box).map_err(|e| e.to_string()));
    }
    Some((|| {
        let key = SecretKey::from_bytes(&bytes).map_err(|e| e.to_string())?;
        let public = minisign::PublicKey::from_secret_key(&key).map_err(|e| e.to_string())?;
        minisign::sign(Some(&public), &key, &b"prosec"[..], None, None)
            .map_err(|_| "the key is damaged: its two halves do not match".to_string())?;
        Ok(key)
    })())
}

/// The permission bits of `path` when group or others may read it.
fn exposed_mode(path: &Path) -> Option<u32> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(path).ok()?.permissions().mode() & 0o777;
        (mode & 0o044 != 0).then_some(mode)
    }
    #[cfg(not(unix))]
    {
        let _ = path;
        None
    }
}

/// Asks for a key's password on the terminal.
pub fn prompt_password(prompt: &str) -> Result<String, String> {
    rpassword::prompt_password(prompt).map_err(|e| {
        format!(
            "cannot ask for the key's password ({e}); for builds with no one at a terminal, \
             make a key without one: prosec keygen NAME --without-password"
        )
    })
}

/// The trusted comment put in an artifact's signature: when, which file, which compiler.
pub fn signature_comment(file_name: &str) -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    format!(
        "timestamp:{now}\tfile:{file_name}\t{}",
        crate::COMPILER_VERSION
    )
}

/// The environment variable naming trusted public key files, separated as `PATH` is.
pub const TRUST_ENV: &str = "PROSE_TRUST";

/// The keys a host trusts: the files `flags` name (`--trust`), then those of
/// [`TRUST_ENV`], then `[trust] keys` of `settings`. A file that cannot be read or is not a
/// minisign public key is an error naming it.
pub fn trusted(
    flags: &[PathBuf],
    settings: &prose_settings::Settings,
) -> Result<Vec<TrustKey>, String> {
    let from_env: Vec<PathBuf> = std::env::var_os(TRUST_ENV)
        .map(|v| {
            std::env::split_paths(&v)
                .filter(|p| !p.as_os_str().is_empty())
                .collect()
        })
        .unwrap_or_default();
    flags
        .iter()
        .chain(&from_env)
        .chain(&settings.trust.keys)
        .map(|p| TrustKey::read(p))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("prosec-keys-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn an_encrypted_key_needs_its_password() {
        let dir = scratch("enc");
        let name = dir.join("release");
        let id = keygen(&name, Some("hunter2".into()), false).expect("keygen");
        let (sk, pk) = key_paths(&name);
        let pub_text = std::fs::read_to_string(&pk).unwrap();
        let trust = bytecode_spec::signature::TrustKey::parse(&pub_text).unwrap();
        assert_eq!(trust.id(), id);
        let k = read_secret_key(&sk, || Ok("hunter2".into())).expect("right password");
        assert_eq!(k.id, id);
        let wrong = read_secret_key(&sk, || Ok("nope".into()))
            .err()
            .expect("wrong password");
        assert!(wrong.contains("Wrong password"), "{wrong}");
        // Not replaced without --force.
        assert!(keygen(&name, None, false).unwrap_err().contains("--force"));
        assert_ne!(keygen(&name, None, true).expect("forced"), id);
    }

    #[cfg(unix)]
    #[test]
    fn a_readable_key_without_password_is_refused() {
        use std::os::unix::fs::PermissionsExt;
        let dir = scratch("perm");
        let name = dir.join("ci");
        keygen(&name, None, false).expect("keygen");
        let (sk, _) = key_paths(&name);
        let mode = std::fs::metadata(&sk).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let asked = std::cell::Cell::new(false);
        let k = read_secret_key(&sk, || {
            asked.set(true);
            Err("no".into())
        })
        .expect("private, no password");
        assert!(k.warnings.is_empty() && !asked.get());
        std::fs::set_permissions(&sk, std::fs::Permissions::from_mode(0o644)).unwrap();
        let e = read_secret_key(&sk, || Err("no".into()))
            .err()
            .expect("refused");
        assert!(e.contains("chmod 600"), "{e}");
        // An encrypted key readable by others is used, with a warning.
        let name = dir.join("enc");
        keygen(&name, Some("pw".into()), false).expect("keygen");
        let (sk, _) = key_paths(&name);
        std::fs::set_permissions(&sk, std::fs::Permissions::from_mode(0o640)).unwrap();
        let k = read_secret_key(&sk, || Ok("pw".into())).expect("usable");
        assert_eq!(k.warnings.len(), 1);
    }

    #[cfg(unix)]
    #[test]
    fn a_secret_key_that_does_not_end_is_refused() {
        let e = read_secret_key(Path::new("/dev/zero"), || Err("no".into()))
            .err()
            .expect("a device is refused");
        assert!(e.contains("a character device, not a regular file"), "{e}");
        let dir = scratch("long");
        let long = dir.join("long.key");
        std::fs::write(&long, vec![b'a'; MAX_KEY_FILE as usize + 1]).unwrap();
        let e = read_secret_key(&long, || Err("no".into()))
            .err()
            .expect("a long file is refused");
        assert!(
            e.contains(&format!("larger than {MAX_KEY_FILE} bytes")),
            "{e}"
        );
    }
}
