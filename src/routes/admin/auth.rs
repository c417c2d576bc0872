//! Who may use the admin API, and which names it accepts.
//!
//! Both checks are extractors, so a handler cannot forget them: taking an
//! [`Admin`] argument proves the bearer token matched, and a [`PromptName`] is a
//! name that passed `prompts::valid_name` before any path was built from it.
//! Handlers list `Admin` first, so an unauthenticated caller learns nothing about
//! names. The token is compared in constant time and never logged or echoed.

use axum::extract::{FromRequestParts, Path};
use axum::http::header::AUTHORIZATION;
use axum::http::request::Parts;

use subtle::ConstantTimeEq;

use crate::error::ApiError;
use crate::prompts::valid_name;
use crate::state::AppState;

/// Proof that the request carried `Authorization: Bearer $LADLE_ADMIN_TOKEN`.
///
/// With no token configured (unset or empty) the admin API does not exist: every
/// API route answers `404 not_found` with the same message as an unknown route,
/// so a scan cannot tell a disabled admin API from an absent one. The editor page
/// (`GET /admin`) is still served, because it holds no data and no secret; its
/// calls then get those 404s and it says the admin API is disabled.
#[derive(Debug, Clone, Copy)]
pub struct Admin;

impl FromRequestParts<AppState> for Admin {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, app: &AppState) -> Result<Self, ApiError> {
        let expected = app
            .config
            .admin_token
            .as_ref()
            .map(|token| token.expose().as_bytes())
            .filter(|token| !token.is_empty());
        let Some(expected) = expected else {
            return Err(ApiError::NotFound(format!(
                "no route for {} {}",
                parts.method,
                parts.uri.path()
            )));
        };
        let given = parts
            .headers
            .get(AUTHORIZATION)
            .and_then(|value| bearer(value.as_bytes()));
        match given {
            Some(given) if constant_time_eq(given, expected) => Ok(Admin),
            _ => Err(ApiError::Unauthorized),
        }
    }
}

/// A prompt name from the path that matches `^[a-z0-9][a-z0-9_-]{0,63}$`.
#[derive(Debug, Clone)]
pub struct PromptName(pub String);

impl<S: Send + Sync> FromRequestParts<S> for PromptName {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        let Path(name) = Path::<String>::from_request_parts(parts, state)
            .await
            .map_err(|e| ApiError::InvalidRequest(format!("bad prompt name in the path: {e}")))?;
        if valid_name(&name) {
            Ok(PromptName(name))
        } else {
            let shown: String = name.chars().take(80).collect();
            Err(ApiError::InvalidRequest(format!(
                "{shown:?} is not a valid prompt name (^[a-z0-9][a-z0-9_-]{{0,63}}$)"
            )))
        }
    }
}

/// The credentials of a `Bearer` authorization value (scheme case-insensitive).
fn bearer(value: &[u8]) -> Option<&[u8]> {
    let (scheme, rest) = value.split_at_checked(6)?;
    if !scheme.eq_ignore_ascii_case(b"bearer") || !rest.starts_with(b" ") {
        return None;
    }
    Some(rest.trim_ascii())
}

/// Whether the given token is the secret, compared in constant time (subtle's
/// `ct_eq`; a length mismatch is answered at once, which tells nothing of the
/// bytes).
pub fn constant_time_eq(given: &[u8], secret: &[u8]) -> bool {
    given.ct_eq(secret).into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn constant_time_eq_accepts_only_the_identical_token() {
        assert!(constant_time_eq(b"s3cret", b"s3cret"));
        assert!(!constant_time_eq(b"s3cres", b"s3cret"));
        assert!(!constant_time_eq(b"s3cre", b"s3cret"));
        assert!(!constant_time_eq(b"s3cret\0", b"s3cret"));
        assert!(!constant_time_eq(b"", b"s3cret"));
    }

    #[test]
    fn bearer_takes_the_credentials_after_a_case_insensitive_scheme() {
        assert_eq!(bearer(b"Bearer abc"), Some(&b"abc"[..]));
        assert_eq!(bearer(b"bearer   abc "), Some(&b"abc"[..]));
        assert_eq!(bearer(b"Basic abc"), None);
        assert_eq!(bearer(b"Bearerabc"), None);
        assert_eq!(bearer(b"Bear"), None);
    }
}
