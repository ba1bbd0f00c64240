//! TLS to the Postgres store, as libpq's URL parameters ask for it, over rustls:
//!
//! - `sslmode`: `disable` (never), `prefer` (the default: TLS if the server offers it, the
//!   certificate unchecked, else in clear), `require` (TLS, the certificate unchecked unless
//!   `sslrootcert` names roots, which makes it `verify-ca`, as in libpq), `verify-ca` (the
//!   certificate must chain to a trusted root) and `verify-full` (that, and it must name the
//!   host the URL connects to);
//! - `sslrootcert`: a PEM file of the roots to trust, or `system`; without it, the platform's
//!   roots and verifier (what the VM's HTTP clients use);
//! - `sslcert` and `sslkey`: the client's certificate chain and key (PEM), for servers that
//!   authenticate clients by certificate. The key must be readable by its owner only, as
//!   libpq requires.
//!
//! tokio-postgres reads the rest of the URL; these parameters are taken out of it first.

use super::PgError;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{
    CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme,
};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tokio_postgres::config::SslMode;
use tokio_postgres_rustls::MakeRustlsConnect;

/// How much of the server's certificate is checked (`sslmode`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Mode {
    /// No TLS.
    Disable,
    /// TLS if the server offers it, unchecked; else in clear.
    #[default]
    Prefer,
    /// TLS, unchecked (checked as `verify-ca` when roots are named).
    Require,
    /// TLS, the certificate chaining to a trusted root.
    VerifyCa,
    /// TLS, the certificate chaining to a trusted root and naming the host.
    VerifyFull,
}

impl Mode {
    const NAMES: [(&'static str, Mode); 5] = [
        ("disable", Mode::Disable),
        ("prefer", Mode::Prefer),
        ("require", Mode::Require),
        ("verify-ca", Mode::VerifyCa),
        ("verify-full", Mode::VerifyFull),
    ];

    fn parse(value: &str) -> Result<Mode, PgError> {
        Mode::NAMES
            .iter()
            .find(|(n, _)| *n == value)
            .map(|(_, m)| *m)
            .ok_or_else(|| {
                let names: Vec<&str> = Mode::NAMES.iter().map(|(n, _)| *n).collect();
                PgError::Url(format!(
                    "sslmode `{value}` is not one of {}",
                    names.join(", ")
                ))
            })
    }

    /// What tokio-postgres is told: whether TLS is tried, and whether it is required.
    fn ssl_mode(self) -> SslMode {
        match self {
            Mode::Disable => SslMode::Disable,
            Mode::Prefer => SslMode::Prefer,
            Mode::Require | Mode::VerifyCa | Mode::VerifyFull => SslMode::Require,
        }
    }
}

/// The roots a certificate is checked against (`sslrootcert`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Roots {
    /// The platform's (`sslrootcert=system`, or none named).
    Platform,
    /// The certificates in this PEM file.
    File(PathBuf),
}

/// What a store URL says about TLS.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Params {
    /// `sslmode`.
    pub mode: Mode,
    /// `sslrootcert`, if given.
    pub roots: Option<Roots>,
    /// `sslcert` and `sslkey`: the client's certificate chain and its key.
    pub client: Option<(PathBuf, PathBuf)>,
}

impl Params {
    /// Whether the server's certificate is checked, and how: `None` unchecked, `Some(true)`
    /// with the host's name, `Some(false)` without.
    fn check(&self) -> Option<bool> {
        match self.mode {
            Mode::Disable | Mode::Prefer => None,
            Mode::Require => self.roots.is_some().then_some(false),
            Mode::VerifyCa => Some(false),
            Mode::VerifyFull => Some(true),
        }
    }
}

/// The parameters tokio-postgres does not know, which this module reads.
const OURS: [&str; 4] = ["sslmode", "sslrootcert", "sslcert", "sslkey"];

/// Splits `url` into the URL tokio-postgres is given (the TLS parameters taken out) and what
/// those parameters say.
pub fn split(url: &str) -> Result<(String, Params), PgError> {
    let Some((base, query)) = url.split_once('?') else {
        return Ok((url.to_string(), Params::default()));
    };
    let decode = |s: &str| {
        percent_encoding::percent_decode_str(s)
            .decode_utf8()
            .map(|c| c.into_owned())
            .map_err(|_| PgError::Url("a parameter is not UTF-8 once decoded".into()))
    };
    let mut rest = Vec::new();
    let (mut mode, mut roots, mut cert, mut key) = (None, None, None, None);
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        let key_name = decode(k)?;
        if !OURS.contains(&key_name.as_str()) {
            rest.push(pair);
            continue;
        }
        let value = decode(v)?;
        match key_name.as_str() {
            "sslmode" => mode = Some(Mode::parse(&value)?),
            "sslrootcert" if value == "system" => roots = Some(Roots::Platform),
            "sslrootcert" => roots = Some(Roots::File(PathBuf::from(value))),
            "sslcert" => cert = Some(PathBuf::from(value)),
            _ => key = Some(PathBuf::from(value)),
        }
    }
    let client = match (cert, key) {
        (Some(c), Some(k)) => Some((c, k)),
        (None, None) => None,
        (Some(_), None) => return Err(PgError::Url("sslcert needs sslkey (its key)".into())),
        (None, Some(_)) => return Err(PgError::Url("sslkey needs sslcert".into())),
    };
    let params = Params {
        mode: mode.unwrap_or_default(),
        roots,
        client,
    };
    let url = if rest.is_empty() {
        base.to_string()
    } else {
        format!("{base}?{}", rest.join("&"))
    };
    Ok((url, params))
}

/// Sets `config`'s TLS mode as `params` say and gives the connector that checks the
/// server's certificate as they ask (files named are read now, so a missing one is an error
/// before any connection).
pub fn apply(
    config: &mut tokio_postgres::Config,
    params: &Params,
) -> Result<MakeRustlsConnect, PgError> {
    config.ssl_mode(params.mode.ssl_mode());
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let verifier: Arc<dyn ServerCertVerifier> = match params.check() {
        None => Arc::new(Unchecked(provider.clone())),
        Some(with_name) => {
            let chain = chain_verifier(params.roots.as_ref(), provider.clone())?;
            if with_name {
                chain
            } else {
                Arc::new(AnyName(chain))
            }
        }
    };
    let tls = |e: rustls::Error| PgError::Url(format!("TLS: {e}"));
    let builder = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(tls)?
        .dangerous()
        .with_custom_certificate_verifier(verifier);
    let client_config = match &params.client {
        None => builder.with_no_client_auth(),
        Some((cert, key)) => builder
            .with_client_auth_cert(certificates(cert, "sslcert")?, private_key(key)?)
            .map_err(tls)?,
    };
    Ok(MakeRustlsConnect::new(client_config))
}

/// The verifier of a certificate's chain (and name) against `roots`.
fn chain_verifier(
    roots: Option<&Roots>,
    provider: Arc<CryptoProvider>,
) -> Result<Arc<dyn ServerCertVerifier>, PgError> {
    match roots {
        Some(Roots::File(path)) => {
            let mut store = RootCertStore::empty();
            for cert in certificates(path, "sslrootcert")? {
                store
                    .add(cert)
                    .map_err(|e| PgError::Url(format!("sslrootcert {}: {e}", path.display())))?;
            }
            let verifier = WebPkiServerVerifier::builder_with_provider(Arc::new(store), provider)
                .build()
                .map_err(|e| PgError::Url(format!("sslrootcert {}: {e}", path.display())))?;
            Ok(verifier)
        }
        None | Some(Roots::Platform) => {
            let verifier = rustls_platform_verifier::Verifier::new(provider)
                .map_err(|e| PgError::Url(format!("the platform's certificate roots: {e}")))?;
            Ok(Arc::new(verifier))
        }
    }
}

/// The certificates in the PEM file at `path` (parameter `param`); none is an error.
fn certificates(path: &Path, param: &str) -> Result<Vec<CertificateDer<'static>>, PgError> {
    let bad = |e: &dyn std::fmt::Display| PgError::Url(format!("{param} {}: {e}", path.display()));
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(path)
        .map_err(|e| bad(&e))?
        .collect::<Result<_, _>>()
        .map_err(|e| bad(&e))?;
    if certs.is_empty() {
        return Err(bad(&"no certificate in it"));
    }
    Ok(certs)
}

/// The private key in the PEM file at `path`, refused (as libpq does) when others than its
/// owner may read it: 0600 or less, or 0640 or less for a key owned by root.
fn private_key(path: &Path) -> Result<PrivateKeyDer<'static>, PgError> {
    use std::os::unix::fs::MetadataExt;
    let bad = |e: &dyn std::fmt::Display| PgError::Url(format!("sslkey {}: {e}", path.display()));
    let meta = std::fs::metadata(path).map_err(|e| bad(&e))?;
    // SAFETY: geteuid has no preconditions and touches no memory.
    let me = unsafe { libc::geteuid() };
    let mode = meta.mode();
    if (meta.uid() == me && mode & 0o077 != 0) || (meta.uid() == 0 && mode & 0o037 != 0) {
        return Err(bad(&format_args!(
            "others may read it (mode {:o}): it must be u=rw (0600) or less, or u=rw,g=r (0640) or less if owned by root",
            mode & 0o777
        )));
    }
    PrivateKeyDer::from_pem_file(path).map_err(|e| bad(&e))
}

/// Checks nothing of the server's certificate (`prefer`, `require`): the connection is
/// encrypted, not authenticated. The handshake's signatures are still checked.
#[derive(Debug)]
struct Unchecked(Arc<CryptoProvider>);

impl ServerCertVerifier for Unchecked {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// Checks the certificate's chain as the inner verifier does, but not the name it is for
/// (`verify-ca`). The inner verifiers check the chain before the name, so a name mismatch
/// is only ever reported for a chain that holds.
#[derive(Debug)]
struct AnyName(Arc<dyn ServerCertVerifier>);

impl ServerCertVerifier for AnyName {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        match self
            .0
            .verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
        {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tls_parameters_are_taken_out_of_the_url() {
        let (url, p) = split(
            "postgres://u:p%3Fw@db.example:5432/runs?application_name=x&sslmode=verify-full&sslrootcert=%2Fetc%2Fca%20s.pem&connect_timeout=3",
        )
        .expect("parses");
        assert_eq!(
            url,
            "postgres://u:p%3Fw@db.example:5432/runs?application_name=x&connect_timeout=3"
        );
        assert_eq!(p.mode, Mode::VerifyFull);
        assert_eq!(p.roots, Some(Roots::File(PathBuf::from("/etc/ca s.pem"))));
        assert_eq!(p.client, None);
        assert_eq!(p.check(), Some(true));
        let (url, p) = split("postgres://h/db?sslmode=require").expect("parses");
        assert_eq!((url.as_str(), p.check()), ("postgres://h/db", None));
        let (_, p) = split("postgres://h/db?sslmode=require&sslrootcert=system").expect("parses");
        assert_eq!(p.check(), Some(false), "require with roots is verify-ca");
        let (url, p) = split("postgres://h/db").expect("parses");
        assert_eq!((url.as_str(), p.mode), ("postgres://h/db", Mode::Prefer));
    }

    #[test]
    fn bad_tls_parameters_are_refused_saying_why() {
        let err = |url: &str| split(url).expect_err("refused").to_string();
        assert_eq!(
            err("postgres://h/db?sslmode=verify"),
            "the store URL: sslmode `verify` is not one of disable, prefer, require, verify-ca, verify-full"
        );
        assert_eq!(
            err("postgres://h/db?sslcert=/c.pem"),
            "the store URL: sslcert needs sslkey (its key)"
        );
        let p = split("postgres://h/db?sslmode=verify-full&sslrootcert=/nonexistent/ca.pem")
            .expect("parses")
            .1;
        let mut config = tokio_postgres::Config::new();
        let e = apply(&mut config, &p).err().expect("refused").to_string();
        assert!(e.contains("sslrootcert /nonexistent/ca.pem"), "{e}");
    }
}
