//! The URLs a server lets runs post their ends to (`--webhook-allow`): a client names a
//! webhook's URL, and only the server's list decides whether it is posted to. An entry is a
//! URL; a webhook's URL is allowed by it when both have the same scheme, host and port and
//! the webhook's path is the entry's path or under it (`https://hooks.example/prose` allows
//! `https://hooks.example/prose/runs?team=a`, not `https://hooks.example/prose-evil` nor
//! `https://hooks.example.evil/prose`).

use reqwest::Url;

/// One entry of the allow-list.
#[derive(Clone, Debug)]
pub struct Allowed {
    url: Url,
}

/// Why a URL is not one a webhook may have.
fn unfit(url: &Url) -> Option<&'static str> {
    if !matches!(url.scheme(), "http" | "https") {
        return Some("its scheme is not http or https");
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Some("it names no host");
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Some(
            "it carries credentials (user:password@): sign with the server's secret instead",
        );
    }
    if url.fragment().is_some() {
        return Some("it has a fragment (#...), which is never sent");
    }
    None
}

impl Allowed {
    /// The entry `text` (an `http` or `https` URL without credentials, query or fragment).
    pub fn parse(text: &str) -> Result<Allowed, String> {
        let url = Url::parse(text.trim())
            .map_err(|e| format!("--webhook-allow {text:?}: not a URL ({e})"))?;
        if let Some(why) = unfit(&url) {
            return Err(format!("--webhook-allow {text:?}: {why}"));
        }
        if url.query().is_some() {
            return Err(format!(
                "--webhook-allow {text:?}: it has a query; an entry allows a scheme, host, port and path"
            ));
        }
        Ok(Allowed { url })
    }

    /// Whether `url` (already read, and fit for a webhook) is allowed by this entry.
    fn allows(&self, url: &Url) -> bool {
        let (mine, theirs) = (self.url.path(), url.path());
        let under = theirs == mine
            || (mine.ends_with('/') && theirs.starts_with(mine))
            || theirs
                .strip_prefix(mine)
                .is_some_and(|rest| rest.starts_with('/'));
        self.url.scheme() == url.scheme()
            && self.url.host_str() == url.host_str()
            && self.url.port_or_known_default() == url.port_or_known_default()
            && under
    }
}

impl std::fmt::Display for Allowed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.url.as_str())
    }
}

/// Why a server without an allow-list takes no webhook.
pub const OFF: &str =
    "this server posts no webhooks: its operator allows their URLs with --webhook-allow";

/// `text` as a webhook's URL, when one of `list` allows it (in its normal form: as it is
/// posted to); else why not.
pub fn admit(list: &[Allowed], text: &str) -> Result<String, String> {
    if list.is_empty() {
        return Err(OFF.into());
    }
    let url = Url::parse(text).map_err(|e| format!("webhook {text:?}: not a URL ({e})"))?;
    if let Some(why) = unfit(&url) {
        return Err(format!("webhook {text:?}: {why}"));
    }
    if !list.iter().any(|a| a.allows(&url)) {
        return Err(format!(
            "webhook {text:?}: this server's --webhook-allow list does not allow it"
        ));
    }
    Ok(url.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(entries: &[&str]) -> Vec<Allowed> {
        entries
            .iter()
            .map(|e| Allowed::parse(e).expect("entry"))
            .collect()
    }

    #[test]
    fn only_urls_under_an_entry_are_allowed() {
        let l = list(&["https://hooks.example/prose", "http://127.0.0.1:9000/"]);
        for ok in [
            "https://hooks.example/prose",
            "https://hooks.example/prose/runs?team=a",
            "https://HOOKS.example:443/prose/x",
            "http://127.0.0.1:9000/anything",
        ] {
            assert!(admit(&l, ok).is_ok(), "{ok}");
        }
        for refused in [
            "https://hooks.example/prose-evil",
            "https://hooks.example/pros",
            "https://hooks.example.evil/prose",
            "http://hooks.example/prose",
            "https://hooks.example:8443/prose",
            "https://user:pw@hooks.example/prose",
            "https://hooks.example/prose#x",
            "http://127.0.0.1:9001/",
            "http://localhost:9000/",
            "file:///etc/passwd",
            "not a url",
        ] {
            assert!(admit(&l, refused).is_err(), "{refused}");
        }
        assert!(admit(&[], "https://hooks.example/prose")
            .err()
            .is_some_and(|e| e.contains("--webhook-allow")));
    }

    #[test]
    fn entries_are_plain_http_urls() {
        for bad in [
            "ftp://x.example/",
            "https://x.example/?a=b",
            "https://u:p@x.example/",
            "/relative",
            "https://",
        ] {
            assert!(Allowed::parse(bad).is_err(), "{bad}");
        }
    }
}
