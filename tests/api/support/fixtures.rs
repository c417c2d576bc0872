//! Files the tests read or make: private copies of the shipped prompts, small
//! prompts of their own, the samples in `tests/fixtures/`, temporary folders.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

/// A fresh folder holding a copy of the shipped prompts.
pub fn prompts_copy() -> PathBuf {
    static COUNTER: AtomicUsize = AtomicUsize::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("ladle-test-{}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("create prompts copy");
    for entry in
        std::fs::read_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/prompts")).expect("read prompts")
    {
        let entry = entry.expect("prompt entry");
        std::fs::copy(entry.path(), dir.join(entry.file_name())).expect("copy prompt");
    }
    dir
}

/// A fresh, empty temporary folder.
pub fn temp_dir(label: &str) -> PathBuf {
    static COUNTER: AtomicUsize = AtomicUsize::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("ladle-admin-{}-{label}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("create a temporary folder");
    dir
}

/// The sorted file names in a folder.
pub fn names_in(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .expect("read the folder")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// A small valid text prompt whose user message carries `marker`.
pub fn small_prompt(marker: &str) -> String {
    format!(
        "description = \"测试用\"\noutput = \"text\"\n\n[variables.dish]\nrequired = true\n\n\
         [messages]\nuser = \"\"\"{marker}：{{{{ dish }}}}\"\"\"\n"
    )
}

/// The shipped recipe prompt's text.
pub fn shipped_recipe() -> String {
    std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/prompts/recipe.toml"))
        .expect("read the shipped recipe prompt")
}

/// A sample from `tests/fixtures/`, as bytes.
pub fn fixture(name: &str) -> Vec<u8> {
    let path = format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read(&path).unwrap_or_else(|e| panic!("read {path}: {e}"))
}

/// A sample from `tests/fixtures/`, as text.
pub fn fixture_text(name: &str) -> String {
    String::from_utf8(fixture(name)).expect("a UTF-8 sample")
}

/// `text` cut into pieces of `size` characters, as a stream writes it.
pub fn pieces(text: &str, size: usize) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    chars.chunks(size).map(|c| c.iter().collect()).collect()
}

/// A file that holds no certificate, for `LADLE_UPSTREAM_CA_FILE`.
pub fn not_a_certificate() -> PathBuf {
    let path = prompts_copy().join("not-a-ca.pem");
    std::fs::write(&path, "just text\n").expect("write");
    path
}

/// JSON text of `levels` nested arrays around a string (deeper than ladle keeps
/// past 64).
pub fn nested_json(levels: usize) -> String {
    format!("{}\"深\"{}", "[".repeat(levels), "]".repeat(levels))
}
