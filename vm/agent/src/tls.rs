//! TLS for every HTTP client the VM builds (model APIs, `web_fetch`, MCP servers over HTTP,
//! OpenTelemetry export): rustls with the *ring* crypto provider, certificates checked by
//! the platform's verifier (reqwest's default).

use std::sync::Once;

/// Makes *ring* rustls's crypto provider for the process, once; a provider an embedding
/// program installed first stays. Called before any HTTP client is built.
pub fn install_crypto_provider() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // An error means a provider is already installed, which is as good.
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}
