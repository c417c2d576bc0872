//! The real binary before it serves: a keys file that is missing or malformed
//! stops `ladle serve` naming `LADLE_CLIENT_KEYS_FILE` (never quoting a digest);
//! `ladle keys add NAME` shows a new key once with the lines to paste, and those
//! lines let that key in.

use std::process::{Command, Output};

use super::*;
use crate::support::mock_upstream::*;
use crate::support::process::{finished, ladle_command, serve_before_a_closed_port, text_of};

/// `ladle serve` in front of a closed port, with client keys from `path`, in a
/// folder of its own (its state file is no other test's).
fn serve_with_keys(path: &Path) -> Command {
    let mut command = serve_before_a_closed_port();
    command
        .current_dir(temp_dir("client-keys-serve"))
        .env("LADLE_CLIENT_KEYS_FILE", path);
    command
}

#[tokio::test]
async fn a_missing_keys_file_stops_serve_naming_ladle_client_keys_file() {
    let missing = temp_dir("client-keys").join("no-such-keys.toml");
    let output = finished(serve_with_keys(&missing)).await;
    let text = text_of(&output);
    assert!(!output.status.success(), "{text}");
    assert!(text.contains("LADLE_CLIENT_KEYS_FILE"), "{text}");
}

#[tokio::test]
async fn a_malformed_keys_file_stops_serve_naming_ladle_client_keys_file_without_a_digest() {
    let digest = sha256_hex(KEY_A);
    let good = keys_toml(&[("miniapp", KEY_A, "")]);
    for text in [
        // A TOML error on the digest's line.
        good.replace(&format!("\"{digest}\""), &format!("\"{digest}")),
        good.replace(&digest, &digest.to_uppercase()),
        keys_toml(&[("miniapp", KEY_A, "colour = \"red\"")]),
        keys_toml(&[("Bad Name", KEY_A, "")]),
    ] {
        let path = temp_dir("client-keys").join("keys.toml");
        std::fs::write(&path, &text).expect("write the keys file");
        let output = finished(serve_with_keys(&path)).await;
        let said = text_of(&output);
        assert!(!output.status.success(), "{text}\n{said}");
        assert!(said.contains("LADLE_CLIENT_KEYS_FILE"), "{said}");
        assert!(
            !said.to_lowercase().contains(&digest),
            "a digest quoted: {said}"
        );
    }
}

/// `ladle keys add NAME`'s output.
fn keys_add(name: &str) -> Output {
    ladle_command()
        .args(["keys", "add", name])
        .output()
        .expect("run ladle keys add")
}

/// The key a `keys add` printed: its one line that starts with two spaces and
/// `lk_`.
fn printed_key(stdout: &str) -> String {
    let keys: Vec<&str> = stdout.lines().filter(|l| l.starts_with("  lk_")).collect();
    assert_eq!(keys.len(), 1, "{stdout}");
    keys[0].trim().to_owned()
}

#[tokio::test]
async fn keys_add_prints_a_key_once_and_the_lines_that_let_it_in() {
    let output = keys_add("miniapp-prod");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(output.status.success(), "{}", text_of(&output));
    let key = printed_key(&stdout);
    assert_eq!(
        stdout.matches(key.as_str()).count(),
        1,
        "shown once: {stdout}"
    );
    assert!(key.len() > 40, "a long random key: {key}");
    // The lines to paste: the entry, with the key's SHA-256 and not the key.
    let entry = &stdout[stdout.find("[[keys]]").expect("the [[keys]] lines")..];
    assert!(entry.contains("name = \"miniapp-prod\"\n"), "{entry}");
    let sha256 = entry
        .lines()
        .find_map(|l| l.strip_prefix("sha256 = \"")?.strip_suffix('"'))
        .expect("a sha256 line");
    assert_eq!(sha256, sha256_hex(&key));
    // Another run, another key.
    let again = printed_key(&String::from_utf8_lossy(&keys_add("miniapp-prod").stdout));
    assert_ne!(again, key);
    // Pasted into a keys file, the lines let the key in (and only it).
    let path = temp_dir("client-keys").join("keys.toml");
    std::fs::write(&path, entry).expect("write the keys file");
    let gateway = keyed_gateway(&path).await;
    gateway.upstream().cycle([sse_answer(&["好"])]);
    assert_eq!(chat_as(&gateway, &key).await.status(), 200);
    assert_eq!(chat_as(&gateway, &again).await.status(), 401);
}

#[test]
fn keys_add_refuses_a_name_the_file_would_refuse() {
    for name in [
        "Bad Name",
        "",
        "_underscore-first",
        "UPPER",
        &"a".repeat(33),
    ] {
        let output = keys_add(name);
        let text = text_of(&output);
        assert!(!output.status.success(), "{name:?}: {text}");
        assert!(!text.contains("lk_"), "no key for {name:?}: {text}");
        assert!(text.contains("name"), "{name:?}: {text}");
    }
}
