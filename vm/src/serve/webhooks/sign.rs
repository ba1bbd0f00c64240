//! Signing a delivery as the Standard Webhooks specification (standardwebhooks.com) does, so
//! a receiver can check it was this server that posted it, when, and that nothing changed on
//! the way: the headers `webhook-id` (the delivery's id, the same on every try),
//! `webhook-timestamp` (the try's time, in seconds since 1970) and `webhook-signature`
//! (`v1,` and the base64 HMAC-SHA256, keyed by the server's secret, of
//! `{id}.{timestamp}.{body}`). A receiver drops a delivery whose timestamp is far from its
//! clock (a replay), and one whose id it has taken already (a repeat).

use base64::Engine;
use hmac::{Hmac, Mac};
use sha2::Sha256;

/// The header carrying the delivery's id.
pub const ID: &str = "webhook-id";
/// The header carrying the try's time.
pub const TIMESTAMP: &str = "webhook-timestamp";
/// The header carrying the signature.
pub const SIGNATURE: &str = "webhook-signature";

/// The server's signing secret: the key of the HMAC. Never shown.
#[derive(Clone)]
pub struct Secret(Vec<u8>);

/// How Standard Webhooks writes a secret: this, then the key in base64.
const STANDARD_PREFIX: &str = "whsec_";

impl Secret {
    /// The secret `text` (as its file holds it, without surrounding white space): written
    /// as Standard Webhooks writes secrets (`whsec_` and the key in base64), so that a
    /// receiver's library takes the same text, or else any text, whose bytes are the key.
    pub fn new(text: &str) -> Result<Secret, String> {
        match text.strip_prefix(STANDARD_PREFIX) {
            Some(key) => base64::engine::general_purpose::STANDARD
                .decode(key)
                .map(Secret)
                .map_err(|e| format!("the secret starts with `{STANDARD_PREFIX}` but the rest is not base64 ({e})")),
            None => Ok(Secret(text.as_bytes().to_vec())),
        }
    }

    /// The `webhook-signature` value of `body`, posted as delivery `id` at `timestamp`.
    pub fn sign(&self, id: &str, timestamp: i64, body: &[u8]) -> String {
        // HMAC takes a key of any length: `new_from_slice` cannot fail for it.
        let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(&self.0) else {
            unreachable!("HMAC-SHA256 takes keys of every length")
        };
        mac.update(id.as_bytes());
        mac.update(b".");
        mac.update(timestamp.to_string().as_bytes());
        mac.update(b".");
        mac.update(body);
        let digest = mac.finalize().into_bytes();
        format!(
            "v1,{}",
            base64::engine::general_purpose::STANDARD.encode(digest)
        )
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(…)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The test vector of the Standard Webhooks specification: its secret, message and
    /// signature.
    #[test]
    fn signs_as_the_standard_webhooks_libraries_do() {
        let secret = Secret::new("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").expect("secret");
        let signed = secret.sign(
            "msg_p5jXN8AQM9LWM0D4loKWxJek",
            1614265330,
            br#"{"test": 2432232314}"#,
        );
        assert_eq!(signed, "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=");
        // Any other text is its own key.
        let plain = Secret::new("correct horse battery staple").expect("secret");
        assert_eq!(plain.0, b"correct horse battery staple");
        assert!(Secret::new("whsec_not base64!").is_err());
    }
}
