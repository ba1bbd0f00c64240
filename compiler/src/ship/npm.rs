//! Packages, fetched through the npm registry protocol from the registry npm itself would
//! use: for a scoped package, an `@scope:registry` setting; otherwise `registry`; each
//! looked up in the environment (`npm_config_registry`, `NPM_CONFIG_REGISTRY`), then the
//! project's `.npmrc` (the nearest one above the program), then the user's
//! (`$npm_config_userconfig`, else `~/.npmrc`); else the public registry. A
//! `//host/path/:_authToken` setting of those files (with `${VAR}` expanded) is sent as a
//! bearer token, only to URLs under that host and path.
//!
//! The version asked for may be exact, a dist-tag (`latest` when none is given) or a range
//! (`^1.2`, `~1`, `>=1 <2`), resolved against the package document (the abbreviated
//! "packument"). The tarball must match the document's `dist.integrity` (SHA-512) before
//! anything in it is read; it is unpacked in memory, never onto the disk.

use super::http::Http;
use super::tree::{Entry, MemoryTree};
use super::{Failure, FetchError};
use base64::Engine;
use bytecode_spec::bundle::is_bundle_path;
use sha2::{Digest, Sha512};
use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};

/// The public registry.
pub const PUBLIC_REGISTRY: &str = "https://registry.npmjs.org/";
/// Largest package document accepted.
const MAX_PACKUMENT: usize = 64 << 20;
/// Largest tarball accepted, compressed.
const MAX_TARBALL: usize = 64 << 20;
/// Most bytes a tarball may unpack to.
const MAX_UNPACKED: u64 = 256 << 20;
/// Most entries a tarball may hold.
const MAX_ENTRIES: usize = 20_000;

/// The settings of the `.npmrc` files that apply, in order of precedence.
#[derive(Clone, Debug, Default)]
pub struct NpmConfig {
    /// `key = value` of each file, most important first, after the environment's.
    layers: Vec<BTreeMap<String, String>>,
}

impl NpmConfig {
    /// The configuration for a program in `dir`.
    pub fn for_dir(dir: &Path) -> NpmConfig {
        let mut layers = Vec::new();
        let mut env = BTreeMap::new();
        for (k, v) in std::env::vars() {
            let lower = k.to_ascii_lowercase();
            if let Some(key) = lower.strip_prefix("npm_config_") {
                // npm reads `npm_config_registry`, `npm_config_@scope:registry`.
                env.insert(key.to_string(), v);
            }
        }
        layers.push(env);
        if let Some(project) = dir
            .ancestors()
            .map(|d| d.join(".npmrc"))
            .find(|p| p.is_file())
        {
            layers.push(read_npmrc(&project));
        }
        let user = std::env::var_os("npm_config_userconfig")
            .or_else(|| std::env::var_os("NPM_CONFIG_USERCONFIG"))
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".npmrc")));
        if let Some(user) = user.filter(|p| p.is_file()) {
            layers.push(read_npmrc(&user));
        }
        NpmConfig { layers }
    }

    fn get(&self, key: &str) -> Option<&str> {
        self.layers
            .iter()
            .find_map(|l| l.get(key))
            .map(String::as_str)
            .filter(|v| !v.is_empty())
    }

    /// The registry for `package`, ending in `/`.
    pub fn registry(&self, package: &str) -> String {
        let scoped = package
            .strip_prefix('@')
            .and_then(|p| p.split_once('/'))
            .and_then(|(scope, _)| self.get(&format!("@{scope}:registry")));
        let url = scoped
            .or_else(|| self.get("registry"))
            .unwrap_or(PUBLIC_REGISTRY);
        if url.ends_with('/') {
            url.to_string()
        } else {
            format!("{url}/")
        }
    }

    /// The token for `url`: the `//host/path/:_authToken` setting with the longest path
    /// that `url` is under.
    pub fn token(&self, url: &str) -> Option<String> {
        let bare = url.split_once("://").map_or(url, |(_, rest)| rest);
        let mut best: Option<(usize, &str)> = None;
        for layer in self.layers.iter().rev() {
            for (k, v) in layer {
                let Some(prefix) = k.strip_prefix("//").and_then(|k| {
                    k.strip_suffix(":_authtoken")
                        .or(k.strip_suffix(":_authToken"))
                }) else {
                    continue;
                };
                if bare.starts_with(prefix) && best.is_none_or(|(n, _)| prefix.len() >= n) {
                    best = Some((prefix.len(), v));
                }
            }
        }
        best.map(|(_, v)| v.to_string())
    }
}

/// The longest `.npmrc` read (one that is longer, or not a regular file, counts as absent).
const MAX_NPMRC: u64 = 1 << 20;

/// The settings of one `.npmrc`: `key=value` lines, `;` and `#` comments, `${VAR}` expanded.
fn read_npmrc(path: &Path) -> BTreeMap<String, String> {
    let text = bytecode_spec::bounded::read_to_string(path, MAX_NPMRC).unwrap_or_default();
    let mut out = BTreeMap::new();
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with(';') || line.starts_with('#') {
            continue;
        }
        let Some((k, v)) = line.split_once('=') else {
            continue;
        };
        let v = v.trim().trim_matches('"');
        out.insert(k.trim().to_string(), expand(v));
    }
    out
}

/// `${VAR}` replaced by the variable's value (empty when unset).
fn expand(v: &str) -> String {
    let mut out = String::new();
    let mut rest = v;
    while let Some(at) = rest.find("${") {
        out.push_str(&rest[..at]);
        match rest[at + 2..].find('}') {
            Some(end) => {
                let name = &rest[at + 2..at + 2 + end];
                out.push_str(&std::env::var(name).unwrap_or_default());
                rest = &rest[at + 3 + end..];
            }
            None => {
                out.push_str(&rest[at..]);
                rest = "";
            }
        }
    }
    out.push_str(rest);
    out
}

/// A version of a package, chosen.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Resolved {
    /// The version.
    pub version: String,
    /// The tarball's URL.
    pub tarball: String,
    /// `sha512-<base64>`.
    pub integrity: String,
}

/// The SHA-512 an integrity string gives (the first `sha512-` entry of the list).
pub fn sha512_of(integrity: &str) -> Option<Vec<u8>> {
    integrity.split_whitespace().find_map(|h| {
        let b64 = h.strip_prefix("sha512-")?;
        let b64 = b64.split('?').next()?;
        base64::engine::general_purpose::STANDARD
            .decode(b64)
            .ok()
            .filter(|d| d.len() == 64)
    })
}

/// The URL of `package`'s document on `registry` (a scoped name's `/` escaped).
fn packument_url(registry: &str, package: &str) -> String {
    format!("{registry}{}", package.replace('/', "%2f"))
}

/// Chooses the version of `package` that `request` asks for, from the registry.
pub fn resolve(
    http: &Http,
    config: &NpmConfig,
    package: &str,
    request: Option<&str>,
) -> Result<Resolved, FetchError> {
    let registry = config.registry(package);
    let url = packument_url(&registry, package);
    let resp = http.get(
        &url,
        "application/vnd.npm.install-v1+json; q=1.0, application/json; q=0.8, */*",
        config.token(&url).as_deref(),
        MAX_PACKUMENT,
    )?;
    match resp.status {
        200 => {}
        404 => {
            return Err(FetchError::new(
                Failure::NotFound,
                format!("the registry {registry} has no package `{package}`"),
            ))
        }
        s => {
            return Err(FetchError::new(
                Failure::Failed,
                format!("the registry {registry} answered {s} for `{package}`"),
            ))
        }
    }
    let doc: serde_json::Value = serde_json::from_slice(&resp.body).map_err(|e| {
        FetchError::new(
            Failure::Failed,
            format!("the registry's document for `{package}` is not JSON: {e}"),
        )
    })?;
    choose(&doc, package, request)
}

/// The version of a package document that `request` asks for.
pub fn choose(
    doc: &serde_json::Value,
    package: &str,
    request: Option<&str>,
) -> Result<Resolved, FetchError> {
    let versions = doc["versions"].as_object().cloned().unwrap_or_default();
    let wanted = request.unwrap_or("latest");
    let by_tag = doc["dist-tags"][wanted].as_str().map(str::to_string);
    let chosen = match by_tag {
        Some(v) => Some(v),
        None if versions.contains_key(wanted) => Some(wanted.to_string()),
        None => nodejs_semver::Range::parse(wanted).ok().and_then(|range| {
            let parsed: Vec<nodejs_semver::Version> = versions
                .keys()
                .filter_map(|v| nodejs_semver::Version::parse(v).ok())
                .collect();
            range.max_satisfying(&parsed).map(|v| v.to_string())
        }),
    };
    let version = chosen.filter(|v| versions.contains_key(v)).ok_or_else(|| {
        let mut known: Vec<&String> = versions.keys().collect();
        known.reverse();
        known.truncate(8);
        let list: Vec<&str> = known.iter().map(|s| s.as_str()).collect();
        FetchError::new(
            Failure::NoSuchRef,
            format!("no version of `{package}` matches `{wanted}`"),
        )
        .with_help(if list.is_empty() {
            "the package has no versions".to_string()
        } else {
            format!("it has {}", list.join(", "))
        })
    })?;
    let dist = &versions[&version]["dist"];
    let tarball = dist["tarball"].as_str().unwrap_or_default().to_string();
    if tarball.is_empty() {
        return Err(FetchError::new(
            Failure::Failed,
            format!("the registry gives no tarball for `{package}@{version}`"),
        ));
    }
    let integrity = dist["integrity"].as_str().unwrap_or_default().to_string();
    if sha512_of(&integrity).is_none() {
        return Err(FetchError::new(
            Failure::Integrity,
            format!("the registry gives no SHA-512 integrity for `{package}@{version}`, so its tarball cannot be checked"),
        ));
    }
    Ok(Resolved {
        version,
        tarball,
        integrity,
    })
}

/// Downloads a tarball and checks it against `integrity`.
pub fn download(
    http: &Http,
    config: &NpmConfig,
    package: &str,
    pin: &Resolved,
) -> Result<Vec<u8>, FetchError> {
    let resp = http.get(
        &pin.tarball,
        "application/octet-stream, */*",
        config.token(&pin.tarball).as_deref(),
        MAX_TARBALL,
    )?;
    match resp.status {
        200 => {}
        404 => {
            return Err(FetchError::new(
                Failure::NotFound,
                format!(
                    "the tarball of `{package}@{}` is gone ({})",
                    pin.version, pin.tarball
                ),
            ))
        }
        s => {
            return Err(FetchError::new(
                Failure::Failed,
                format!("{} answered {s}", pin.tarball),
            ))
        }
    }
    let want = sha512_of(&pin.integrity).unwrap_or_default();
    if Sha512::digest(&resp.body).as_slice() != want.as_slice() {
        return Err(FetchError::new(
            Failure::Integrity,
            format!(
                "the tarball of `{package}@{}` does not match its integrity {}",
                pin.version, pin.integrity
            ),
        )
        .with_help(
            "the registry served other bytes than it (or prose.lock) promised: do not use it",
        ));
    }
    Ok(resp.body)
}

/// Unpacks a package tarball in memory: its entries without their first path component
/// (`package/`), regular files with their bytes, links kept as links (refused if a skill
/// holds one). A name that is not a safe relative path is an error.
pub fn unpack(tgz: &[u8], what: &str) -> Result<MemoryTree, FetchError> {
    let bad = |why: String| FetchError::new(Failure::InvalidSkill, format!("{what}: {why}"));
    let gz = flate2::read::GzDecoder::new(tgz);
    let mut archive = tar::Archive::new(gz.take(MAX_UNPACKED + 1));
    let mut entries = BTreeMap::new();
    let mut total = 0u64;
    for entry in archive
        .entries()
        .map_err(|e| bad(format!("not a tarball: {e}")))?
    {
        let mut entry = entry.map_err(|e| bad(format!("damaged tarball: {e}")))?;
        if entries.len() >= MAX_ENTRIES {
            return Err(bad(format!("more than {MAX_ENTRIES} entries")));
        }
        let kind = entry.header().entry_type();
        let raw = entry.path_bytes().into_owned();
        let name =
            String::from_utf8(raw).map_err(|_| bad("an entry's name is not UTF-8".into()))?;
        let name = name.trim_start_matches("./");
        let rel = match name.split_once('/') {
            Some((_, rest)) => rest.trim_end_matches('/'),
            None => continue,
        };
        if rel.is_empty()
            || kind.is_dir()
            || kind.is_pax_global_extensions()
            || kind.is_pax_local_extensions()
            || kind.is_gnu_longname()
            || kind.is_gnu_longlink()
        {
            continue;
        }
        if !is_bundle_path(rel) {
            return Err(bad(format!(
                "the entry {rel:?} is not a safe relative path"
            )));
        }
        if kind.is_file() {
            let size = entry.size();
            total += size;
            if total > MAX_UNPACKED {
                return Err(bad(format!("it unpacks to more than {MAX_UNPACKED} bytes")));
            }
            let mut bytes = Vec::with_capacity(size.min(1 << 20) as usize);
            entry
                .read_to_end(&mut bytes)
                .map_err(|e| bad(format!("damaged tarball: {e}")))?;
            entries.insert(rel.to_string(), Entry::File(bytes));
        } else if kind.is_symlink() || kind.is_hard_link() {
            entries.insert(rel.to_string(), Entry::Link);
        } else {
            // A FIFO, a device: said as what it is, never taken for a link.
            entries.insert(rel.to_string(), Entry::Other);
        }
    }
    Ok(MemoryTree::new(entries))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn doc() -> serde_json::Value {
        let dist = |v: &str| {
            json!({"dist": {
                "tarball": format!("http://r/x/-/x-{v}.tgz"),
                "integrity": format!("sha512-{}", base64::engine::general_purpose::STANDARD.encode([7u8; 64]))
            }})
        };
        json!({
            "name": "x",
            "dist-tags": {"latest": "1.2.0", "next": "2.0.0-beta.1"},
            "versions": {
                "1.0.0": dist("1.0.0"),
                "1.2.0": dist("1.2.0"),
                "1.3.0": dist("1.3.0"),
                "2.0.0-beta.1": dist("2.0.0-beta.1")
            }
        })
    }

    #[test]
    fn versions_are_chosen_by_tag_exact_version_or_range() {
        let v = |req: Option<&str>| choose(&doc(), "x", req).map(|r| r.version);
        assert_eq!(v(None).as_deref(), Ok("1.2.0"));
        assert_eq!(v(Some("next")).as_deref(), Ok("2.0.0-beta.1"));
        assert_eq!(v(Some("1.0.0")).as_deref(), Ok("1.0.0"));
        assert_eq!(v(Some("^1.0")).as_deref(), Ok("1.3.0"));
        assert_eq!(v(Some("~1.2")).as_deref(), Ok("1.2.0"));
        let e = v(Some("^3")).unwrap_err();
        assert_eq!(e.kind, Failure::NoSuchRef);
        assert!(
            e.message.contains("no version of `x` matches `^3`"),
            "{}",
            e.message
        );
    }

    #[test]
    fn registries_and_tokens_follow_npm() {
        let mut c = NpmConfig::default();
        c.layers.push(BTreeMap::from([
            ("registry".to_string(), "http://127.0.0.1:9/".to_string()),
            (
                "@acme:registry".to_string(),
                "http://127.0.0.1:8/npm".to_string(),
            ),
            (
                "//127.0.0.1:8/npm/:_authToken".to_string(),
                "secret".to_string(),
            ),
        ]));
        assert_eq!(c.registry("left-pad"), "http://127.0.0.1:9/");
        assert_eq!(c.registry("@acme/skills"), "http://127.0.0.1:8/npm/");
        assert_eq!(
            c.token("http://127.0.0.1:8/npm/@acme%2fskills").as_deref(),
            Some("secret")
        );
        // Never to another host or path.
        assert_eq!(c.token("http://127.0.0.1:9/left-pad"), None);
        assert_eq!(c.token("http://127.0.0.1:8/other/x"), None);
        assert_eq!(NpmConfig::default().registry("x"), PUBLIC_REGISTRY);
        assert_eq!(packument_url("http://r/", "@a/b"), "http://r/@a%2fb");
    }

    #[test]
    fn npmrc_values_expand_variables() {
        std::env::set_var("PROSE_TEST_NPM_TOKEN", "t0k");
        assert_eq!(expand("${PROSE_TEST_NPM_TOKEN}"), "t0k");
        assert_eq!(expand("a${PROSE_TEST_NPM_UNSET_VAR}b"), "ab");
        assert_eq!(expand("x${y"), "x${y");
    }

    #[test]
    fn integrity_strings_give_their_sha512() {
        let b64 = base64::engine::general_purpose::STANDARD.encode([1u8; 64]);
        assert_eq!(
            sha512_of(&format!("sha1-abc sha512-{b64}")),
            Some(vec![1u8; 64])
        );
        assert_eq!(sha512_of("sha1-abc"), None);
        assert_eq!(sha512_of("sha512-short"), None);
    }

    #[test]
    fn fifos_and_devices_are_told_from_links() {
        use crate::ship::tree::{Kind, Tree};
        let mut data = Vec::new();
        {
            let gz = flate2::write::GzEncoder::new(&mut data, flate2::Compression::fast());
            let mut tar = tar::Builder::new(gz);
            for (name, kind) in [
                ("package/pipe", tar::EntryType::Fifo),
                ("package/dev", tar::EntryType::Char),
                ("package/link", tar::EntryType::Symlink),
            ] {
                let mut h = tar::Header::new_gnu();
                h.set_entry_type(kind);
                h.set_size(0);
                h.set_mode(0o644);
                if kind == tar::EntryType::Symlink {
                    h.set_link_name("SKILL.md").unwrap();
                }
                tar.append_data(&mut h, name, std::io::empty()).unwrap();
            }
            tar.into_inner().unwrap().finish().unwrap();
        }
        let tree = unpack(&data, "x").expect("unpacks");
        assert_eq!(tree.kind("pipe"), Some(Kind::Other));
        assert_eq!(tree.kind("dev"), Some(Kind::Other));
        assert_eq!(tree.kind("link"), Some(Kind::Link));
        assert!(tree
            .read("pipe")
            .unwrap_err()
            .contains("not a regular file"));
    }
}
