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

/// The module paths a file names, resolved to absolute paths (`a::b::Item`),
/// group imports spelled out: through `crate::`, `self::`, `super::` (as many
/// times as it is written), and through a bare child module's name (`pub use
/// child::Item` in the file that declares `mod child;`), which is how a parent's
/// re-export names its child.
fn paths_named(module: &str, code: &str) -> Vec<String> {
    let children = declared_children(code);
    let mut found = Vec::new();
    let mut rest = code;
    while let Some(start) = next_word(rest) {
        let before = rest[..start].chars().last();
        rest = &rest[start..];
        let word_end = rest
            .find(|c: char| !(c.is_alphanumeric() || c == '_'))
            .unwrap_or(rest.len());
        let word = &rest[..word_end];
        let after = &rest[word_end..];
        let starts_a_path = after.starts_with("::")
            && !before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':');
        let base = match word {
            "crate" => Some(String::new()),
            "self" => Some(module.to_owned()),
            "super" => Some(parent(module)),
            child if children.iter().any(|c| c == child) => Some(join(module, child)),
            _ => None,
        };
        rest = after;
        let (Some(mut base), true) = (base, starts_a_path) else {
            continue;
        };
        let mut tail = &after[2..];
        // `super::super::x`: each `super` is one level up.
        while word == "super" && tail.starts_with("super::") {
            base = parent(&base);
            tail = &tail["super::".len()..];
        }
        let (paths, used) = expand(tail);
        found.extend(paths.iter().map(|path| join(&base, path)));
        if paths.is_empty() {
            found.push(base);
        }
        rest = &tail[used..];
    }
    found
}

/// The modules a file declares (`mod child;`, `pub mod child;`).
fn declared_children(code: &str) -> Vec<String> {
    code.lines()
        .filter_map(|line| {
            let line = line.trim();
            let line = line.strip_prefix("pub ").unwrap_or(line);
            let line = line.strip_prefix("pub(crate) ").unwrap_or(line);
            let name = line.strip_prefix("mod ")?.strip_suffix(';')?;
            Some(name.trim().to_owned())
        })
        .collect()
}

/// Where the next word begins (a letter or `_`), if any.
fn next_word(text: &str) -> Option<usize> {
    text.find(|c: char| c.is_alphabetic() || c == '_')
}

/// The paths a path's tail names (`a::b`, `a::{b, c::{d, e}}`, `{a, b as c}`),
/// and how many bytes of `tail` it took.
fn expand(tail: &str) -> (Vec<String>, usize) {
    let end = tail
        .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
        .unwrap_or(tail.len());
    let head = tail[..end].trim_end_matches(':');
    if !tail[end..].starts_with('{') {
        let paths = if head.is_empty() {
            vec![]
        } else {
            vec![head.to_owned()]
        };
        return (paths, end);
    }
    // A group: its items split at the commas of its own level.
    let group = &tail[end + 1..];
    let (mut depth, mut item_start, mut paths) = (0usize, 0usize, Vec::new());
    let mut close = group.len();
    for (at, c) in group.char_indices() {
        match c {
            '{' => depth += 1,
            '}' if depth == 0 => {
                close = at;
                break;
            }
            '}' => depth -= 1,
            ',' if depth == 0 => {
                paths.extend(group_item(head, &group[item_start..at]));
                item_start = at + 1;
            }
            _ => {}
        }
    }
    paths.extend(group_item(head, &group[item_start..close]));
    (paths, end + 1 + close)
}

/// One item of a group under `head`: `self` is the head itself; `x as y` is `x`.
fn group_item(head: &str, item: &str) -> Vec<String> {
    let item = item.trim();
    let item = item.split(" as ").next().unwrap_or(item).trim();
    if item.is_empty() {
        return Vec::new();
    }
    if item == "self" {
        return vec![head.to_owned()];
    }
    let (inner, _) = expand(item);
    inner.into_iter().map(|path| join(head, &path)).collect()
}

/// `base::tail`, or `tail` at the crate root.
fn join(base: &str, tail: &str) -> String {
    match (base.is_empty(), tail.is_empty()) {
        (_, true) => base.to_owned(),
        (true, false) => tail.to_owned(),
        (false, false) => format!("{base}::{tail}"),
    }
}

/// A module's parent (the crate root's is itself).
fn parent(module: &str) -> String {
    module
        .rsplit_once("::")
        .map_or(String::new(), |(parent, _)| parent.to_owned())
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
        for named in paths_named(&module, code) {
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

#[test]
fn the_reader_sees_every_form_of_a_path_and_finds_the_cycle_each_makes() {
    let file = |path: &str, code: &str| (path.to_owned(), code.to_owned());
    // Each pair closes a round through one form of path; the reader must see it.
    // (the form, the files that use it, the cycle it closes)
    type Form<'a> = (&'a str, &'a [(&'a str, &'a str)], &'a str);
    let forms: [Form; 4] = [
        (
            "crate::x",
            &[
                ("x.rs", "fn f() { crate::y::go(); }\n"),
                ("y.rs", "use crate::x::Thing;\n"),
            ],
            "x -> y -> x",
        ),
        (
            "super::super::x",
            &[
                ("p/q/r.rs", "use super::super::z::Thing;\n"),
                ("p/z.rs", "use crate::p::q::r::Other;\n"),
            ],
            "p::q::r -> p::z -> p::q::r",
        ),
        (
            "a bare child re-export",
            &[
                ("a/mod.rs", "mod b;\npub use b::Thing;\n"),
                ("a/b.rs", "use crate::c::Other;\n"),
                ("c.rs", "use crate::a::Thing;\n"),
            ],
            "a -> a::b -> c -> a",
        ),
        (
            "a use group",
            &[
                ("k.rs", "use crate::{m::A, n::{B, self}};\n"),
                ("n.rs", "use crate::k::C;\n"),
            ],
            "k -> n -> k",
        ),
    ];
    for (form, files, cycle) in forms {
        let mut all: Vec<(String, String)> = files.iter().map(|(p, c)| file(p, c)).collect();
        // Every module the files name exists, as in a real tree.
        for leaf in ["m.rs", "p/mod.rs", "p/q/mod.rs"] {
            all.push(file(leaf, ""));
        }
        let found = cycles(&import_graph(&all));
        assert!(
            found.iter().any(|c| c == cycle),
            "{form}: {cycle} not in {found:?}"
        );
    }
    // A child's own use of its ancestors is no cycle; a name that only looks
    // like a child (no `mod` for it) is no path.
    let calm = [
        file("a/mod.rs", "mod b;\n"),
        file("a/b.rs", "use super::Thing;\nfn f() { c::go(); }\n"),
        file("c.rs", "use crate::a::b::Other;\n"),
    ];
    assert_eq!(cycles(&import_graph(&calm)), Vec::<String>::new());
}

/// Every path a file under `engine/` names that lies outside it, as
/// `file: path`.
fn outside_the_engine(files: &[(String, String)]) -> Vec<String> {
    let mut found = Vec::new();
    for (path, code) in files {
        if !path.starts_with("engine/") {
            continue;
        }
        for named in paths_named(&module_of(path), code) {
            if !inside(&named, "engine") || named.is_empty() {
                found.push(format!("{path}: {named}"));
            }
        }
    }
    found
}

#[test]
fn the_engine_names_nothing_outside_it() {
    assert_eq!(outside_the_engine(&code()), Vec::<String>::new());
}

#[test]
fn the_engine_boundary_sees_every_form_of_a_way_out() {
    let file = |path: &str, code: &str| (path.to_owned(), code.to_owned());
    let files = [
        file("engine/a.rs", "use crate::config::Config;\n"),
        file("engine/p.rs", "use super::super::routes::Thing;\n"),
        file(
            "engine/g.rs",
            "use crate::{engine::retry::Deadline, error::ApiError};\n",
        ),
        // A bare child's path stays inside (its parent is inside).
        file("engine/c/mod.rs", "mod d;\npub use d::Inner;\n"),
        file("engine/c/d.rs", "use super::super::retry::Deadline;\n"),
    ];
    assert_eq!(
        outside_the_engine(&files),
        [
            "engine/a.rs: config::Config",
            "engine/p.rs: routes::Thing",
            "engine/g.rs: error::ApiError",
        ]
    );
}
