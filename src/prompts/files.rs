//! Prompts in a folder of `{name}.toml` files: the store of a single replica.
//!
//! The file store keeps the last good version of every prompt in memory and looks
//! at the folder again every second, so edits on disk go live without a restart and
//! a broken file never replaces a working prompt (it is reported instead). Names
//! are checked with `valid_name` before any path is built, only regular files are
//! read (a planted symlink is ignored), and writes go to a temporary file in the
//! same folder, are synced, then renamed over the old one, so a crash never leaves a
//! half-written prompt. Replaced and deleted versions go to `.history/{name}/`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::{SystemTime, UNIX_EPOCH};

use super::spec::{Prompt, valid_name};
use super::{PromptStore, Saved, StoreError, Version};
use crate::wall::{rfc3339, unix_millis};

#[derive(Default)]
struct Entry {
    live: Option<Arc<Prompt>>,
    error: Option<String>,
    seen_text: Option<String>,
    /// The file's size and modification time when it was last read: a reload
    /// reads only files whose size or time changed.
    seen_file: Option<(u64, SystemTime)>,
    updated_at: String,
}

/// The largest prompt file read (contract 10); a larger one is a broken prompt.
pub const MAX_PROMPT_BYTES: u64 = 1 << 20;

/// Prompts in a folder of `{name}.toml` files.
pub struct FileStore {
    dir: PathBuf,
    entries: RwLock<BTreeMap<String, Entry>>,
    /// Serializes writes and reloads, so a save and a rollback cannot interleave,
    /// and a reload that read the folder before a save can never install what it
    /// read after it (an admin write is never undone).
    writer: std::sync::Mutex<()>,
    /// Why the folder could not be listed at the last reload (`EMFILE`, the
    /// folder moved away during a deploy): the prompts read before stay live.
    unlisted: RwLock<Option<String>>,
}

impl FileStore {
    /// Opens a folder and loads every prompt in it.
    pub fn open(dir: impl Into<PathBuf>) -> Self {
        let store = FileStore {
            dir: dir.into(),
            entries: RwLock::new(BTreeMap::new()),
            writer: std::sync::Mutex::new(()),
            unlisted: RwLock::new(None),
        };
        store.refresh();
        store
    }

    fn path(&self, name: &str) -> Result<PathBuf, StoreError> {
        if valid_name(name) {
            Ok(self.dir.join(format!("{name}.toml")))
        } else {
            Err(StoreError::BadName(name.to_owned()))
        }
    }

    /// `.history/{name}` inside the folder. Refused when `.history` or its `{name}`
    /// folder is a symlink (or not a folder), so a planted link cannot make the
    /// store read or write history outside the folder.
    fn history_dir(&self, name: &str) -> Result<PathBuf, StoreError> {
        let root = self.dir.join(".history");
        let dir = root.join(name);
        for path in [&root, &dir] {
            match std::fs::symlink_metadata(path) {
                Ok(meta) if !meta.file_type().is_dir() => {
                    return Err(StoreError::Io(format!(
                        "{} is not a plain folder; refusing to use it",
                        path.display()
                    )));
                }
                _ => {}
            }
        }
        Ok(dir)
    }

    fn live_etag(&self, name: &str) -> Option<String> {
        self.get(name).map(|p| p.etag.clone())
    }

    fn check_etag(&self, name: &str, if_match: Option<&str>) -> Result<(), StoreError> {
        match if_match {
            Some(wanted)
                if wanted.trim() != "*"
                    && Some(wanted.trim().to_owned()) != self.live_etag(name) =>
            {
                Err(StoreError::EtagMismatch)
            }
            _ => Ok(()),
        }
    }

    /// Copies the current file into history; quietly does nothing without one.
    fn archive(&self, name: &str) -> Result<(), StoreError> {
        let Some(current) = read_regular(&self.path(name)?) else {
            return Ok(());
        };
        let dir = self.history_dir(name)?;
        std::fs::create_dir_all(&dir).map_err(io)?;
        // Versions sort by their millisecond prefix; two saves within one
        // millisecond must still sort in the order they happened.
        let newest = self
            .history(name)?
            .first()
            .and_then(|v| v.version.split_once('-')?.0.parse::<u64>().ok());
        let millis = version_millis(newest, unix_millis());
        let tag = super::spec::etag(&current);
        let version = format!("{millis:013}-{}", tag.trim_matches('"'));
        write_atomically(&dir.join(format!("{version}.toml")), &current)
    }

    fn install(&self, name: &str, prompt: Prompt, file: Option<(u64, SystemTime)>) {
        let mut entries = self.entries.write().unwrap_or_else(|e| e.into_inner());
        let entry = entries.entry(name.to_owned()).or_default();
        entry.seen_text = Some(prompt.source.clone());
        entry.seen_file = file;
        entry.error = None;
        entry.live = Some(Arc::new(prompt));
        entry.updated_at = now_rfc3339();
    }
}

impl PromptStore for FileStore {
    fn get(&self, name: &str) -> Option<Arc<Prompt>> {
        let entries = self.entries.read().unwrap_or_else(|e| e.into_inner());
        entries.get(name).and_then(|e| e.live.clone())
    }

    fn list(&self) -> Vec<(Arc<Prompt>, String)> {
        let entries = self.entries.read().unwrap_or_else(|e| e.into_inner());
        entries
            .values()
            .filter_map(|e| Some((e.live.clone()?, e.updated_at.clone())))
            .collect()
    }

    fn broken(&self) -> Vec<(String, String)> {
        let entries = self.entries.read().unwrap_or_else(|e| e.into_inner());
        entries
            .iter()
            .filter_map(|(name, e)| e.error.clone().map(|why| (name.clone(), why)))
            .collect()
    }

    fn save(&self, name: &str, text: &str, if_match: Option<&str>) -> Result<Saved, StoreError> {
        let path = self.path(name)?;
        let prompt = Prompt::parse(name, text)?;
        let _writer = self.writer.lock().unwrap_or_else(|e| e.into_inner());
        self.check_etag(name, if_match)?;
        let created = read_regular(&path).is_none();
        self.archive(name)?;
        std::fs::create_dir_all(&self.dir).map_err(io)?;
        write_atomically(&path, text)?;
        let etag = prompt.etag.clone();
        self.install(name, prompt, file_stamp(&path));
        Ok(Saved { created, etag })
    }

    fn delete(&self, name: &str, if_match: Option<&str>) -> Result<(), StoreError> {
        let path = self.path(name)?;
        let _writer = self.writer.lock().unwrap_or_else(|e| e.into_inner());
        if read_regular(&path).is_none() && self.get(name).is_none() {
            return Err(StoreError::NotFound(name.to_owned()));
        }
        self.check_etag(name, if_match)?;
        self.archive(name)?;
        match std::fs::remove_file(&path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(io(e)),
        }
        let mut entries = self.entries.write().unwrap_or_else(|e| e.into_inner());
        entries.remove(name);
        Ok(())
    }

    fn history(&self, name: &str) -> Result<Vec<Version>, StoreError> {
        self.path(name)?;
        let Ok(dir) = std::fs::read_dir(self.history_dir(name)?) else {
            return Ok(Vec::new());
        };
        let mut versions: Vec<Version> = dir
            .flatten()
            .filter_map(|entry| {
                let file = entry.file_name().into_string().ok()?;
                let version = file.strip_suffix(".toml")?.to_owned();
                let (millis, tag) = version.split_once('-')?;
                Some(Version {
                    etag: format!("\"{tag}\""),
                    saved_at: rfc3339(millis.parse().ok()?),
                    version,
                })
            })
            .collect();
        versions.sort_by(|a, b| b.version.cmp(&a.version));
        Ok(versions)
    }

    fn rollback(&self, name: &str, version: &str) -> Result<Saved, StoreError> {
        self.path(name)?;
        let known = self
            .history(name)?
            .into_iter()
            .any(|v| v.version == version);
        if !known {
            return Err(StoreError::NotFound(version.to_owned()));
        }
        let text = read_regular(&self.history_dir(name)?.join(format!("{version}.toml")))
            .ok_or_else(|| StoreError::NotFound(version.to_owned()))?;
        self.save(name, &text, None)
    }

    fn folder_unreadable(&self) -> Option<String> {
        self.unlisted
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    fn refresh(&self) {
        let _writer = self.writer.lock().unwrap_or_else(|e| e.into_inner());
        let listed = scan(&self.dir);
        {
            let mut unlisted = self.unlisted.write().unwrap_or_else(|e| e.into_inner());
            // Logged once per change of state, not once a second.
            match (&listed, unlisted.as_deref()) {
                (Err(why), seen) if seen != Some(why.as_str()) => {
                    tracing::warn!(error = %why, "the prompts folder cannot be listed; every prompt read before stays live");
                }
                (Ok(_), Some(_)) => tracing::info!("the prompts folder can be listed again"),
                _ => {}
            }
            *unlisted = listed.as_ref().err().cloned();
        }
        // A folder that cannot be listed says nothing of its prompts.
        let Ok(found) = listed else {
            return;
        };
        let mut entries = self.entries.write().unwrap_or_else(|e| e.into_inner());
        entries.retain(|name, _| found.contains_key(name));
        for (name, (path, stamp)) in found {
            let entry = entries.entry(name.clone()).or_default();
            if entry.seen_file == Some(stamp) {
                continue;
            }
            entry.seen_file = Some(stamp);
            let text = match read_prompt(&path, stamp.0) {
                Ok(text) if entry.seen_text.as_deref() == Some(text.as_str()) => continue,
                Ok(text) => text,
                Err(Unread::Io(why)) => {
                    // Not the file's fault (no descriptor left, say): read again
                    // at the next reload, the last good version live meanwhile.
                    tracing::warn!(prompt = %name, error = %why, "prompt file cannot be opened; the last good version stays live");
                    entry.seen_file = None;
                    continue;
                }
                Err(Unread::Broken(why)) => {
                    tracing::warn!(prompt = %name, error = %why, "prompt file is broken; the last good version stays live");
                    entry.error = Some(why);
                    continue;
                }
            };
            match Prompt::parse(&name, &text) {
                Ok(prompt) => {
                    tracing::info!(prompt = %name, etag = %prompt.etag, "prompt loaded");
                    entry.live = Some(Arc::new(prompt));
                    entry.error = None;
                    entry.updated_at = now_rfc3339();
                }
                Err(error) => {
                    let at = error
                        .line
                        .map(|l| format!(" (line {l})"))
                        .unwrap_or_default();
                    tracing::warn!(prompt = %name, error = %error, "prompt file is broken{at}; the last good version stays live");
                    entry.error = Some(format!("{error}{at}"));
                }
            }
            entry.seen_text = Some(text);
        }
    }
}

/// The prompts a folder lists.
type Listing = BTreeMap<String, (PathBuf, (u64, SystemTime))>;

/// Every `{valid-name}.toml` regular file in the folder, with its path, size and
/// modification time (nothing is read yet); or why the folder could not be
/// listed whole (never its path).
fn scan(dir: &Path) -> Result<Listing, String> {
    let listing = std::fs::read_dir(dir).map_err(|e| e.to_string())?;
    let mut found = Listing::new();
    for entry in listing {
        let entry = entry.map_err(|e| e.to_string())?;
        let Ok(file) = entry.file_name().into_string() else {
            continue;
        };
        let Some(name) = file.strip_suffix(".toml").filter(|n| valid_name(n)) else {
            continue;
        };
        let path = entry.path();
        if let Some(stamp) = file_stamp(&path) {
            found.insert(name.to_owned(), (path, stamp));
        }
    }
    Ok(found)
}

/// Why a prompt file's text was not read.
enum Unread {
    /// The file itself is unusable (too large, not UTF-8): a broken prompt.
    Broken(String),
    /// It could not be opened or read: worth another try.
    Io(String),
}

/// A regular file's size and modification time; `None` for anything else
/// (symlinks are not followed).
fn file_stamp(path: &Path) -> Option<(u64, SystemTime)> {
    let meta = std::fs::symlink_metadata(path).ok()?;
    if !meta.file_type().is_file() {
        return None;
    }
    Some((meta.len(), meta.modified().unwrap_or(UNIX_EPOCH)))
}

/// A prompt file's text, refused past `MAX_PROMPT_BYTES` without reading it.
fn read_prompt(path: &Path, size: u64) -> Result<String, Unread> {
    if size > MAX_PROMPT_BYTES {
        return Err(Unread::Broken(format!(
            "the file is over {MAX_PROMPT_BYTES} bytes"
        )));
    }
    match std::fs::read(path) {
        Ok(bytes) => String::from_utf8(bytes)
            .map_err(|_| Unread::Broken("the file cannot be read as UTF-8 text".to_owned())),
        Err(e) => Err(Unread::Io(e.to_string())),
    }
}

/// The text of a regular file; symlinks and anything else are not followed.
fn read_regular(path: &Path) -> Option<String> {
    let meta = std::fs::symlink_metadata(path).ok()?;
    if !meta.file_type().is_file() {
        return None;
    }
    std::fs::read_to_string(path).ok()
}

fn write_atomically(path: &Path, text: &str) -> Result<(), StoreError> {
    use std::io::Write;
    let dir = path.parent().unwrap_or(Path::new("."));
    let file_name = path
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or("prompt");
    let temp = dir.join(format!(".{file_name}.{}.tmp", std::process::id()));
    // `create_new` does not follow a symlink planted at the temporary name; a
    // leftover from a crash (or such a link) is removed first, never written through.
    let _ = std::fs::remove_file(&temp);
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&temp)
        .map_err(io)?;
    file.write_all(text.as_bytes()).map_err(io)?;
    file.sync_all().map_err(io)?;
    std::fs::rename(&temp, path).map_err(io)?;
    if let Ok(dir) = std::fs::File::open(dir) {
        let _ = dir.sync_all();
    }
    Ok(())
}

/// The millisecond prefix of a new history version: now, but always after the
/// newest existing version (two saves in one millisecond, or a clock set back).
pub(crate) fn version_millis(newest: Option<u64>, now: u64) -> u64 {
    newest.map_or(now, |newest| now.max(newest + 1))
}

fn io(error: std::io::Error) -> StoreError {
    StoreError::Io(error.to_string())
}

fn now_rfc3339() -> String {
    rfc3339(unix_millis())
}
