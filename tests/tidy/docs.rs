//! The documentation against the code: the README stays a front door, and every
//! setting the code reads is documented.

use super::code;

#[test]
fn the_readme_is_a_front_door_of_at_most_15000_characters() {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md"))
        .expect("read README.md");
    let characters = readme.chars().count();
    assert!(
        characters <= 15_000,
        "README.md has {characters} characters; move the rest to docs/"
    );
}

#[test]
fn every_setting_is_documented_in_the_configuration_page() {
    let page = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/docs/configuration.md"
    ))
    .expect("read docs/configuration.md");
    let missing: Vec<&str> = ladle::config::settings::SETTINGS
        .iter()
        .map(|(name, _)| *name)
        .filter(|name| !page.contains(&format!("`{name}`")))
        .collect();
    assert_eq!(missing, Vec::<&str>::new());
}

#[test]
fn every_variable_the_code_names_is_in_the_table_of_settings() {
    // A `LADLE_` name written anywhere in `src/` is a setting (or names one in a
    // message); it must be in the one table, so that it has a default, is known to
    // the unknown-variable warning and is documented.
    let known: Vec<&str> = ladle::config::settings::SETTINGS
        .iter()
        .map(|(name, _)| *name)
        .collect();
    let mut unknown = Vec::new();
    for (path, code) in code() {
        let mut rest = code.as_str();
        while let Some(at) = rest.find("\"LADLE_") {
            rest = &rest[at + 1..];
            let end = rest
                .find(|c: char| !(c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_'))
                .unwrap_or(rest.len());
            // Only a whole quoted name is a setting's name (not a prefix, not prose).
            let whole = end > "LADLE_".len() && rest[end..].starts_with('"');
            if whole && !known.contains(&&rest[..end]) {
                unknown.push(format!("{path}: {}", &rest[..end]));
            }
        }
    }
    assert_eq!(unknown, Vec::<String>::new());
}

/// Every file and folder below `dir`, as paths relative to the repository
/// (`src/completion/attempt.rs`, `src/completion/`).
fn tree(dir: &std::path::Path, root: &std::path::Path, out: &mut Vec<String>) {
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        let relative = path
            .strip_prefix(root)
            .expect("under the repository")
            .to_string_lossy()
            .into_owned();
        if path.is_dir() {
            out.push(format!("{relative}/"));
            tree(&path, root, out);
        } else {
            out.push(relative);
        }
    }
}

/// The code-formatted names on a page that look like a file or folder (`x.rs`,
/// `a/b.rs`, `a/`).
fn named_paths(page: &str) -> Vec<&str> {
    page.split('`')
        .skip(1)
        .step_by(2)
        .filter(|name| {
            !name.is_empty()
                && name
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "_/.".contains(c))
                && (name.ends_with(".rs") || name.ends_with('/'))
        })
        .collect()
}

#[test]
fn every_file_the_architecture_page_names_is_there() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let page = std::fs::read_to_string(root.join("docs/architecture.md"))
        .expect("read docs/architecture.md");
    let mut paths = Vec::new();
    for top in ["src", "tests"] {
        paths.push(format!("{top}/"));
        tree(&root.join(top), root, &mut paths);
    }
    // A name stands for a file or folder whose path ends with it (a row names
    // its files relative to its module's folder).
    let gone: Vec<&str> = named_paths(&page)
        .into_iter()
        .filter(|name| {
            !paths
                .iter()
                .any(|path| path == name || path.ends_with(&format!("/{name}")))
        })
        .collect();
    assert_eq!(
        gone,
        Vec::<&str>::new(),
        "docs/architecture.md names what is not there"
    );
    // The check itself: a name that is not there is caught.
    assert_eq!(
        named_paths("`gone/nowhere.rs` and `x`"),
        ["gone/nowhere.rs"]
    );
}

/// The relative link targets of a markdown page (`[text](target)`), without
/// their anchors; web addresses and in-page anchors are left out.
fn linked_files(page: &str) -> Vec<&str> {
    page.split("](")
        .skip(1)
        .filter_map(|rest| rest.split(')').next())
        .map(|target| target.split('#').next().unwrap_or(target))
        .filter(|target| {
            !target.is_empty() && !target.contains("://") && !target.starts_with("mailto:")
        })
        .collect()
}

#[test]
fn every_link_between_the_pages_leads_to_a_file() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut pages = vec![root.join("README.md")];
    let mut folders = vec![root.join("docs")];
    while let Some(folder) = folders.pop() {
        for entry in std::fs::read_dir(&folder).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                folders.push(path);
            } else if path.extension().is_some_and(|e| e == "md") {
                pages.push(path);
            }
        }
    }
    assert!(pages.len() > 100, "the design records are pages too");
    let mut broken = Vec::new();
    for page in &pages {
        let text = std::fs::read_to_string(page).expect("read a page");
        let here = page.parent().expect("a page is in a folder");
        for target in linked_files(&text) {
            if !here.join(target).exists() {
                broken.push(format!("{}: {target}", page.display()));
            }
        }
    }
    assert_eq!(broken, Vec::<String>::new());
    assert_eq!(
        linked_files("[a](x.md#y) [b](https://e.org) [c](#z) [d](../e/)"),
        ["x.md", "../e/"]
    );
}
