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
