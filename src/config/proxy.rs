//! `LADLE_UPSTREAM_PROXY` and an upstream's `proxy`, read: the environment's
//! proxies, none, or an explicit URL that may hold credentials (a secret).

use super::{ConfigError, Secret, UpstreamProxy, invalid};

impl UpstreamProxy {
    pub(super) fn parse(text: &str) -> Result<Self, ConfigError> {
        Self::parse_for("LADLE_UPSTREAM_PROXY", text)
    }

    /// `parse`, for a setting named `key`.
    pub(super) fn parse_for(key: &'static str, text: &str) -> Result<Self, ConfigError> {
        let text = text.trim();
        if text.eq_ignore_ascii_case("none") {
            return Ok(UpstreamProxy::Off);
        }
        // The value is never echoed: it may carry a password.
        let usable = url::Url::parse(text).is_ok_and(|url| {
            matches!(url.scheme(), "http" | "https" | "socks5" | "socks5h") && url.has_host()
        });
        if usable {
            Ok(UpstreamProxy::Url(Secret::new(text)))
        } else {
            Err(invalid(
                key,
                "must be `none` or a URL starting with http://, https:// or socks5:// and naming a host",
            ))
        }
    }
}
