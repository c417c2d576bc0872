//! Signing as the Standard Webhooks specification says: `webhook-signature` is
//! `v1,` and the base64 of an HMAC-SHA256 over `{id}.{timestamp}.{body}`, keyed by
//! the base64-decoded part of a `whsec_` secret. Pure; the secret's bytes never
//! leave this module.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use hmac::{Hmac, Mac};
use sha2::Sha256;

/// The fewest bytes a decoded secret may have.
pub const MIN_SECRET_BYTES: usize = 24;

/// A webhook signing key, from its `whsec_` form.
#[derive(Clone)]
pub struct SigningKey(Vec<u8>);

impl std::fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SigningKey([redacted])")
    }
}

impl SigningKey {
    /// The key of a `whsec_` secret; what is wrong with it otherwise (never
    /// quoting it).
    pub fn parse(secret: &str) -> Result<SigningKey, String> {
        let encoded = secret
            .strip_prefix("whsec_")
            .ok_or_else(|| "must start with whsec_".to_owned())?;
        let key = STANDARD
            .decode(encoded)
            .map_err(|_| "the part after whsec_ is not base64".to_owned())?;
        if key.len() < MIN_SECRET_BYTES {
            return Err(format!("must decode to at least {MIN_SECRET_BYTES} bytes"));
        }
        Ok(SigningKey(key))
    }

    /// The `webhook-signature` value for one attempt.
    pub fn sign(&self, id: &str, timestamp: u64, body: &[u8]) -> String {
        // Any key length is valid for HMAC.
        let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(&self.0) else {
            return String::new();
        };
        mac.update(id.as_bytes());
        mac.update(b".");
        mac.update(timestamp.to_string().as_bytes());
        mac.update(b".");
        mac.update(body);
        format!("v1,{}", STANDARD.encode(mac.finalize().into_bytes()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_specifications_example_signs_as_published() {
        // The example of the Standard Webhooks specification.
        let key =
            SigningKey::parse("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").expect("a valid secret");
        let signature = key.sign(
            "msg_p5jXN8AQM9LWM0D4loKWxJek",
            1614265330,
            br#"{"test": 2432232314}"#,
        );
        assert_eq!(signature, "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=");
    }

    #[test]
    fn a_malformed_secret_is_refused_without_being_quoted() {
        for bad in [
            "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
            "whsec_not*base64",
            "whsec_c2hvcnQ=",
        ] {
            let why = SigningKey::parse(bad).expect_err("refused");
            assert!(!why.contains(bad) && !why.contains("c2hvcnQ"), "{why}");
        }
        assert!(format!("{:?}", SigningKey(vec![1; 32])).contains("redacted"));
    }
}
