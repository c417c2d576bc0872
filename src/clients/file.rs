//! The client keys file (`LADLE_CLIENT_KEYS_FILE`, contract 8): TOML in, a checked
//! [`KeySet`] out. No I/O: the caller reads the file.

use std::collections::HashSet;

use serde::Deserialize;

/// One client key, as the file declares it (the key itself is never stored).
#[derive(Debug, Clone, PartialEq)]
pub struct ClientKey {
    /// `^[a-z0-9][a-z0-9_-]{0,31}$`: what logs and metrics name.
    pub name: String,
    /// SHA-256 of the key.
    pub digest: [u8; 32],
    /// Requests of this key in flight at once.
    pub max_inflight: Option<u32>,
    /// Requests per second, and the burst: a token bucket.
    pub rate: Option<Rate>,
    /// The tasks this key may run; `None` = all.
    pub tasks: Option<Vec<String>>,
    /// Its unfinished jobs at once (all replicas together with Redis).
    pub max_queued: Option<u32>,
    /// Its job runs at once on a replica; more wait while others' run.
    pub max_running: Option<u32>,
}

/// A token bucket's shape.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rate {
    /// Tokens added per second.
    pub per_s: f64,
    /// The most tokens held.
    pub burst: u32,
}

/// Every key of the file, in its order.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct KeySet {
    /// The keys.
    pub keys: Vec<ClientKey>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    #[serde(default)]
    keys: Vec<Entry>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Entry {
    name: String,
    sha256: String,
    max_inflight: Option<i64>,
    rate_per_s: Option<f64>,
    burst: Option<i64>,
    tasks: Option<Vec<String>>,
    max_queued: Option<i64>,
    max_running: Option<i64>,
}

impl KeySet {
    /// The keys of a file's text, or what is wrong with it (never quoting a
    /// digest).
    pub fn parse(text: &str) -> Result<KeySet, String> {
        let file: File = toml::from_str(text).map_err(|e| {
            let Some(line) = e.span().map(|span| line_of(text, span.start)) else {
                return e.message().to_owned();
            };
            // The field the line sets, if it sets one (never its value: a digest).
            let field = text.lines().nth(line - 1).and_then(|l| l.split_once('='));
            match field {
                Some((field, _)) => format!("line {line} (`{}`): {}", field.trim(), e.message()),
                None => format!("line {line}: {}", e.message()),
            }
        })?;
        let (mut names, mut digests) = (HashSet::new(), HashSet::new());
        let keys = file
            .keys
            .into_iter()
            .enumerate()
            .map(|(index, entry)| {
                let key = entry
                    .checked()
                    .map_err(|why| format!("key {}: {why}", index + 1))?;
                if !names.insert(key.name.clone()) {
                    return Err(format!(
                        "key {}: the name `{}` is used twice",
                        index + 1,
                        key.name
                    ));
                }
                if !digests.insert(key.digest) {
                    return Err(format!("key {}: its sha256 is another key's", index + 1));
                }
                Ok(key)
            })
            .collect::<Result<Vec<_>, String>>()?;
        Ok(KeySet { keys })
    }
}

impl Entry {
    fn checked(self) -> Result<ClientKey, String> {
        if !crate::prompts::valid_name(&self.name) || self.name.len() > 32 {
            return Err("`name` must match ^[a-z0-9][a-z0-9_-]{0,31}$".into());
        }
        let digest = hex_digest(&self.sha256)
            .ok_or("`sha256` must be 64 lower-case hex digits (the key's SHA-256)")?;
        let whole = |value: Option<i64>, field: &str| -> Result<Option<u32>, String> {
            value
                .map(|n| u32::try_from(n).ok().filter(|n| *n >= 1))
                .map(|n| n.ok_or(format!("`{field}` must be a whole number of at least 1")))
                .transpose()
        };
        let max_inflight = whole(self.max_inflight, "max_inflight")?;
        let max_queued = whole(self.max_queued, "max_queued")?;
        let max_running = whole(self.max_running, "max_running")?;
        let burst = whole(self.burst, "burst")?;
        let rate = match self.rate_per_s {
            None if burst.is_some() => return Err("`burst` needs `rate_per_s`".into()),
            None => None,
            Some(per_s) if !(per_s.is_finite() && per_s > 0.0) => {
                return Err("`rate_per_s` must be a number greater than 0".into());
            }
            Some(per_s) => Some(Rate {
                per_s,
                // The default burst is a second's worth, and at least one.
                burst: burst.unwrap_or(per_s.ceil().clamp(1.0, f64::from(u32::MAX)) as u32),
            }),
        };
        Ok(ClientKey {
            name: self.name,
            digest,
            max_inflight,
            rate,
            tasks: self.tasks,
            max_queued,
            max_running,
        })
    }
}

/// 64 lower-case hex digits as 32 bytes.
fn hex_digest(text: &str) -> Option<[u8; 32]> {
    let bytes = text.as_bytes();
    if bytes.len() != 64
        || !bytes
            .iter()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(b))
    {
        return None;
    }
    let mut digest = [0u8; 32];
    for (i, pair) in bytes.chunks(2).enumerate() {
        let text = std::str::from_utf8(pair).ok()?;
        digest[i] = u8::from_str_radix(text, 16).ok()?;
    }
    Some(digest)
}

/// The 1-based line of a byte offset.
fn line_of(text: &str, offset: usize) -> usize {
    text[..offset.min(text.len())].matches('\n').count() + 1
}

#[cfg(test)]
mod tests {
    use super::*;

    const DIGEST: &str = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08";

    #[test]
    fn a_key_takes_its_defaults() {
        let set = KeySet::parse(&format!(
            "[[keys]]\nname = \"miniapp-prod\"\nsha256 = \"{DIGEST}\"\nrate_per_s = 2.5\n"
        ))
        .expect("valid");
        let key = &set.keys[0];
        assert_eq!(key.name, "miniapp-prod");
        assert_eq!(key.digest[0], 0x9f);
        assert_eq!(
            key.rate,
            Some(Rate {
                per_s: 2.5,
                burst: 3
            })
        );
        assert_eq!((key.max_inflight, key.tasks.as_ref()), (None, None));
        assert_eq!(
            KeySet::parse("").expect("valid").keys,
            [],
            "no keys: every request refused"
        );
    }

    #[test]
    fn every_malformed_entry_is_refused_naming_what() {
        let entry = |extra: &str| format!("[[keys]]\nname = \"a\"\nsha256 = \"{DIGEST}\"\n{extra}");
        let second = format!("[[keys]]\nname = \"b\"\nsha256 = \"{DIGEST}\"\n");
        for (text, says) in [
            ("[[keys]\n".to_owned(), "line 1"),
            (entry("colour = \"red\""), "unknown field"),
            (entry("max_inflight = 0"), "`max_inflight`"),
            (entry("max_inflight = 1.5"), "max_inflight"),
            (entry("max_queued = 0"), "`max_queued`"),
            (entry("max_running = -2"), "`max_running`"),
            (entry("rate_per_s = 0"), "`rate_per_s`"),
            (entry("rate_per_s = -1"), "`rate_per_s`"),
            (entry("rate_per_s = 1\nburst = 0"), "`burst`"),
            (entry("burst = 3"), "`burst` needs"),
            (entry("") + &entry(""), "used twice"),
            (entry("") + &second, "another key's"),
            (
                entry("").replace("name = \"a\"", "name = \"Bad Name\""),
                "`name`",
            ),
            (
                entry("").replace(DIGEST, &DIGEST.to_uppercase()),
                "`sha256`",
            ),
            (entry("").replace(DIGEST, "abc"), "`sha256`"),
        ] {
            let error = KeySet::parse(&text).expect_err(&text);
            assert!(error.contains(says), "{text:?}: {error}");
            assert!(!error.contains(DIGEST), "never quoted: {error}");
        }
    }
}
