//! Secrets taken out of text that came from outside. An upstream that rejects a
//! key often echoes it, and not always as it was sent: upper-cased, base64 (a
//! Basic header it decoded), or cut to a prefix or a suffix ("sk-abc…wxyz").
//! Every such copy of at least `SHORTEST` bytes (or of the whole secret, if it
//! is shorter) is replaced by `[redacted]`.

use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};

/// The shortest piece of a secret that counts as a copy of it.
const SHORTEST: usize = 8;
/// What a copy is replaced by.
const REDACTED: &str = "[redacted]";

/// `text` with every copy of each secret (as given or base64-encoded, in any
/// letter case, whole or cut at either end) replaced.
pub fn redact(text: &str, secrets: &[&str]) -> String {
    let mut spans: Vec<(usize, usize)> = Vec::new();
    let lower = text.to_ascii_lowercase();
    for secret in secrets.iter().filter(|s| s.len() >= 4) {
        for form in [
            secret.to_string(),
            STANDARD.encode(secret),
            URL_SAFE_NO_PAD.encode(secret),
        ] {
            copies(
                lower.as_bytes(),
                form.to_ascii_lowercase().as_bytes(),
                &mut spans,
            );
        }
    }
    if spans.is_empty() {
        return text.to_owned();
    }
    spans.sort_unstable();
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    for (start, end) in spans {
        if start < at {
            // Overlapping copies (a base64 form with and without its padding)
            // are one.
            at = at.max(end);
            continue;
        }
        out.push_str(&text[at..start]);
        out.push_str(REDACTED);
        at = end;
    }
    out.push_str(&text[at..]);
    out
}

/// The spans of `text` that copy `secret`'s start or end: each place its first
/// (or last) `SHORTEST` bytes occur, grown for as long as the text goes on
/// matching it. Both are ASCII-lowercased; spans lie on character boundaries
/// because a secret's bytes are ASCII.
fn copies(text: &[u8], secret: &[u8], spans: &mut Vec<(usize, usize)>) {
    if !secret.is_ascii() {
        return;
    }
    let piece = SHORTEST.min(secret.len());
    let (head, tail) = (&secret[..piece], &secret[secret.len() - piece..]);
    for start in memchr::memmem::find_iter(text, head) {
        let same = text[start..]
            .iter()
            .zip(secret)
            .take_while(|(a, b)| a == b)
            .count();
        spans.push((start, start + same));
    }
    for start in memchr::memmem::find_iter(text, tail) {
        let end = start + piece;
        let same = text[..end]
            .iter()
            .rev()
            .zip(secret.iter().rev())
            .take_while(|(a, b)| a == b)
            .count();
        spans.push((end - same, end));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &str = "sk-Live0123456789abcdefXYZ";

    #[test]
    fn every_copy_of_a_secret_is_redacted() {
        let base64 = STANDARD.encode(KEY);
        for (text, left) in [
            (format!("bad key {KEY}."), "bad key [redacted]."),
            (
                format!("BAD KEY {}", KEY.to_uppercase()),
                "BAD KEY [redacted]",
            ),
            (format!("auth {base64}"), "auth [redacted]"),
            (
                format!("key {}… rejected", &KEY[..12]),
                "key [redacted]… rejected",
            ),
            (
                format!("key …{} 无效", &KEY[KEY.len() - 9..]),
                "key …[redacted] 无效",
            ),
            (format!("{KEY}{KEY}"), "[redacted][redacted]"),
        ] {
            assert_eq!(redact(&text, &[KEY]), left, "{text}");
        }
    }

    #[test]
    fn short_pieces_and_other_text_stay() {
        let text = format!(
            "sk-Live is not enough, 访问量较大 {}",
            &KEY[KEY.len() - 7..]
        );
        assert_eq!(redact(&text, &[KEY]), text);
        assert_eq!(
            redact("pass pr0xy here", &["pr0xy"]),
            "pass [redacted] here"
        );
        assert_eq!(
            redact("abc", &["abc"]),
            "abc",
            "a secret under 4 bytes is not looked for"
        );
    }
}
