//! The module graph: no module imports one that imports it back.

use super::code;

/// The module a file under `src/` is (`upstream/chunk.rs` → `upstream::chunk`,
/// `upstream/mod.rs` → `upstream`, `lib.rs` → the crate root, ``).
fn module_of(path: &str) -> String {
    let path = path.trim_end_matches(".rs");
    let path = path.strip_suffix("/mod").unwrap_or(path);
    if path == "lib" {
        String::new()
    } else {
        path.replace('/', "::")
    }
}

/// The module paths a file names through `crate::`, `super::` and `self::`,
/// resolved to absolute paths (`a::b::Item`), group imports spelled out.
fn paths_named(module: &str, is_mod_file: bool, code: &str) -> Vec<String> {
    let parent = |m: &str| {
        m.rsplit_once("::")
            .map_or(String::new(), |(p, _)| p.to_owned())
    };
    // In `a/mod.rs`, `self` is `a` and `super` its parent; in `a/b.rs` (module
    // `a::b`), `self` is `a::b` and `super` is `a`.
    let bases = [
        ("crate::", String::new()),
        ("super::", parent(module)),
        ("self::", module.to_owned()),
    ];
    let mut found = Vec::new();
    for (prefix, base) in bases {
        let _ = is_mod_file;
        let mut rest = code;
        while let Some(at) = rest.find(prefix) {
            let before = rest[..at].chars().last();
            rest = &rest[at + prefix.len()..];
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
                continue;
            }
            let join = |tail: &str| {
                if base.is_empty() {
                    tail.to_owned()
                } else {
                    format!("{base}::{tail}")
                }
            };
            if let Some(group) = rest.strip_prefix('{') {
                let group = &group[..group.find('}').unwrap_or(group.len())];
                found.extend(
                    group
                        .split(',')
                        .map(str::trim)
                        .filter(|t| !t.is_empty())
                        .map(join),
                );
            } else {
                let end = rest
                    .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
                    .unwrap_or(rest.len());
                let path = rest[..end].trim_end_matches(':');
                let path = path.strip_suffix("::{").unwrap_or(path);
                found.push(join(path));
                // `crate::a::{b, c}`: the group belongs to `a`.
                if rest[end..].starts_with('{') || rest[..end].ends_with("::") {
                    let group = &rest[end..];
                    let group = group.trim_start_matches('{');
                    let group = &group[..group.find('}').unwrap_or(group.len())];
                    let head = rest[..end].trim_end_matches(':');
                    found.extend(
                        group
                            .split(',')
                            .map(str::trim)
                            .filter(|t| !t.is_empty())
                            .map(|t| join(&format!("{head}::{t}"))),
                    );
                }
            }
        }
    }
    found
}

/// Whether `inner` is `outer` or inside it (`a::b` in `a`; everything in the
/// crate root, ``).
fn inside(inner: &str, outer: &str) -> bool {
    outer.is_empty() || inner == outer || inner.starts_with(&format!("{outer}::"))
}

/// Module → modules it imports. A child's use of its own ancestors is left out (it
/// lives inside them); a parent's use of its child is kept, so that a way round
/// through another module and back in by the parent's door is a cycle too.
fn import_graph(files: &[(String, String)]) -> Graph {
    let modules: Vec<String> = files.iter().map(|(path, _)| module_of(path)).collect();
    let mut graph = std::collections::BTreeMap::new();
    for (path, code) in files {
        if path == "main.rs" {
            continue;
        }
        let module = module_of(path);
        let edges: &mut std::collections::BTreeSet<String> =
            graph.entry(module.clone()).or_default();
        for named in paths_named(&module, path.ends_with("mod.rs"), code) {
            // The longest module that is a prefix of the path is the file it names.
            let target = modules
                .iter()
                .filter(|m| !m.is_empty() && (named == **m || named.starts_with(&format!("{m}::"))))
                .max_by_key(|m| m.len());
            if let Some(target) = target
                && !inside(&module, target)
            {
                edges.insert(target.clone());
            }
        }
    }
    graph
}

type Graph = std::collections::BTreeMap<String, std::collections::BTreeSet<String>>;

/// Each way from a module back to itself, as `a -> b -> a`.
fn cycles(graph: &Graph) -> Vec<String> {
    let mut cycles = Vec::new();
    for (from, targets) in graph {
        for to in targets {
            // A path back from `to` to `from`?
            let mut seen = std::collections::BTreeSet::new();
            let mut stack = vec![vec![to.clone()]];
            while let Some(trail) = stack.pop() {
                let last = trail.last().expect("a trail has a module");
                if last == from {
                    cycles.push(format!("{from} -> {}", trail.join(" -> ")));
                    break;
                }
                if !seen.insert(last.clone()) {
                    continue;
                }
                for next in graph.get(last).into_iter().flatten() {
                    let mut longer = trail.clone();
                    longer.push(next.clone());
                    stack.push(longer);
                }
            }
        }
    }
    cycles
}

#[test]
fn no_module_imports_one_that_imports_it_back() {
    assert_eq!(cycles(&import_graph(&code())), Vec::<String>::new());
}

#[test]
fn a_way_back_in_through_a_parent_is_a_cycle_and_a_child_using_its_parent_is_not() {
    let file = |path: &str, code: &str| (path.to_owned(), code.to_owned());
    // `config` names `store`, whose `mod.rs` re-exports its child `run`, which
    // names `config` again.
    let round = [
        file("config.rs", "use crate::store::Limits;\n"),
        file(
            "store/mod.rs",
            "pub use self::run::detached;\npub struct Limits;\n",
        ),
        file("store/run.rs", "use crate::config::Config;\n"),
    ];
    assert_eq!(
        cycles(&import_graph(&round)),
        [
            "config -> store -> store::run -> config",
            "store -> store::run -> config -> store",
            "store::run -> config -> store -> store::run",
        ]
    );
    // The settings in a leaf of their own: no way back.
    let leaf = [
        file("config.rs", "use crate::store::limits::Limits;\n"),
        file(
            "store/mod.rs",
            "pub use self::run::detached;\npub use self::limits::Limits;\n",
        ),
        file("store/limits.rs", "pub struct Limits;\n"),
        file(
            "store/run.rs",
            "use crate::config::Config;\nuse super::Limits;\n",
        ),
    ];
    assert_eq!(cycles(&import_graph(&leaf)), Vec::<String>::new());
}

#[test]
fn the_import_graph_sees_crate_super_self_and_groups() {
    let named = paths_named(
        "relay::openai",
        false,
        "use crate::error::{ApiError, StreamError};\nuse super::task_events;\nuse crate::{config, ops::metrics::Metrics};\n",
    );
    for expected in [
        "error::ApiError",
        "relay::task_events",
        "config",
        "ops::metrics::Metrics",
    ] {
        assert!(
            named.iter().any(|n| n == expected),
            "{expected} not in {named:?}"
        );
    }
    assert!(inside("upstream::chunk", "upstream") && !inside("upstream", "upstream::chunk"));
    assert!(!inside("upstreams", "upstream"));
}
