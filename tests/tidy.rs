//! Tidy checks over `src/`, run by `cargo test` (as rust-analyzer does): the
//! architecture's invariants, stated as absences, checked by reading the code.

use std::path::{Path, PathBuf};

fn sources(dir: &Path, found: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read src") {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            sources(&path, found);
        } else if path.extension().is_some_and(|e| e == "rs") {
            found.push(path);
        }
    }
}

/// Every source file under `src/`, with its path relative to `src/` and its code
/// (the part before any `#[cfg(test)]`, comments left out).
fn code() -> Vec<(String, String)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    sources(&root, &mut files);
    files
        .into_iter()
        .map(|path| {
            let text = std::fs::read_to_string(&path).expect("read source");
            let code: String = text
                .split("#[cfg(test)]")
                .next()
                .unwrap_or_default()
                .lines()
                .filter(|line| !line.trim_start().starts_with("//"))
                .map(|line| format!("{line}\n"))
                .collect();
            let relative = path
                .strip_prefix(&root)
                .expect("under src")
                .to_string_lossy()
                .replace('\\', "/");
            (relative, code)
        })
        .collect()
}

fn offenders(pattern: &str, allowed: &[&str]) -> Vec<String> {
    code()
        .into_iter()
        .filter(|(path, code)| {
            code.contains(pattern) && !allowed.iter().any(|a| path.starts_with(a))
        })
        .map(|(path, _)| path)
        .collect()
}

/// The names a file takes from `module`, in any form: `module::Name`,
/// `module::{A, B}` (across lines too) or `module::sub::Name`.
fn names_from(code: &str, module: &str) -> Vec<String> {
    let prefix = format!("{module}::");
    let mut names = Vec::new();
    let mut rest = code;
    while let Some(at) = rest.find(&prefix) {
        rest = &rest[at + prefix.len()..];
        let taken = if let Some(group) = rest.strip_prefix('{') {
            &group[..group.find('}').unwrap_or(group.len())]
        } else {
            let end = rest
                .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
                .unwrap_or(rest.len());
            &rest[..end]
        };
        names.extend(
            taken
                .split([',', ':'])
                .map(str::trim)
                .filter(|name| !name.is_empty())
                .map(str::to_owned),
        );
    }
    names
}

#[test]
fn std_instant_is_not_used_so_there_is_one_clock() {
    let users: Vec<String> = code()
        .into_iter()
        .filter(|(_, code)| names_from(code, "std::time").iter().any(|n| n == "Instant"))
        .map(|(path, _)| path)
        .collect();
    assert_eq!(users, Vec::<String>::new());
}

#[test]
fn the_import_reader_sees_every_form() {
    let forms = [
        "use std::time::Instant;",
        "use std::time::{Duration, Instant};",
        "use std::time::{\n    Duration,\n    Instant,\n};",
        "let t = std::time::Instant::now();",
    ];
    for form in forms {
        assert!(
            names_from(form, "std::time").iter().any(|n| n == "Instant"),
            "{form}"
        );
    }
    assert!(!names_from("use std::time::Duration;", "std::time").contains(&"Instant".into()));
}

#[test]
fn only_the_attempt_loop_sleeps() {
    // The retry waits live in `completion`. Besides it, only timers that guard the
    // server's own sockets may wait (a pause after a failed accept, a client's body
    // deadline), and what paces its own output: the demo's simulated upstream and
    // the keep-alive comments of a waiting stream. And what paces background
    // rounds (the one owner of background work runs every loop), and a repeat's
    // polls of a run on another replica in Redis.
    let allowed = [
        "completion/",
        "background.rs",
        "idempotency/redis.rs",
        "demo/",
        "server/accept.rs",
        "ops/request_body.rs",
        "relay/commit.rs",
    ];
    assert_eq!(offenders("sleep", &allowed), Vec::<String>::new());
}

#[test]
fn only_the_upstream_module_is_an_http_client() {
    for client in ["hyper::client", "tokio_rustls", "reqwest"] {
        assert_eq!(offenders(client, &["upstream/"]), Vec::<String>::new());
    }
}

#[test]
fn pure_modules_do_no_io_and_read_no_clock() {
    let pure = [
        "retry.rs",
        "upstream/sse.rs",
        "upstream/chunk.rs",
        "upstream/scan.rs",
        "normalize/",
        "prompts/spec.rs",
        "prompts/render.rs",
    ];
    for (path, code) in code() {
        if !pure.iter().any(|p| path.starts_with(p)) {
            continue;
        }
        for banned in [
            "std::fs",
            "tokio::fs",
            "Instant::now",
            "SystemTime",
            "tokio::net",
        ] {
            assert!(!code.contains(banned), "{path} uses {banned}");
        }
    }
}

#[test]
fn nothing_on_the_request_path_spawns_tasks() {
    // Serving itself may spawn (the prompt reloader, the demo upstream); handlers,
    // relays and the attempt loop must not, so no task outlives its request.
    // Any spawn counts: `tokio::spawn`, `task::spawn`, `spawn_local`,
    // `spawn_blocking`, a `JoinSet`'s `spawn`. The one exception is the admin API's
    // file I/O on the blocking pool: a save that has begun finishes even if its
    // client leaves, so a prompt file is never left half-replaced.
    let request_path = ["routes/", "relay/", "completion/", "upstream/"];
    for (path, code) in code() {
        if path == "routes/admin/mod.rs" {
            assert_eq!(
                code.matches("spawn").count(),
                1,
                "{path}: only its file I/O"
            );
            continue;
        }
        if request_path.iter().any(|p| path.starts_with(p)) {
            assert!(!code.contains("spawn"), "{path} spawns a task");
        }
    }
}

#[test]
fn no_unwrap_outside_tests() {
    assert_eq!(offenders(".unwrap()", &[]), Vec::<String>::new());
}

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

/// Whether one module is the other or inside it (`a` and `a::b`).
fn related(a: &str, b: &str) -> bool {
    let inside = |inner: &str, outer: &str| {
        outer.is_empty() || inner == outer || inner.starts_with(&format!("{outer}::"))
    };
    inside(a, b) || inside(b, a)
}

/// Module → modules it imports, between files that are not parent and child.
fn import_graph() -> std::collections::BTreeMap<String, std::collections::BTreeSet<String>> {
    let files = code();
    let modules: Vec<String> = files.iter().map(|(path, _)| module_of(path)).collect();
    let mut graph = std::collections::BTreeMap::new();
    for (path, code) in &files {
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
                && !related(&module, target)
            {
                edges.insert(target.clone());
            }
        }
    }
    graph
}

#[test]
fn no_module_imports_one_that_imports_it_back() {
    let graph = import_graph();
    let mut cycles = Vec::new();
    for (from, targets) in &graph {
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
    assert_eq!(cycles, Vec::<String>::new());
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
    assert!(related("upstream", "upstream::chunk") && !related("upstream", "upstreams"));
}

#[test]
fn every_source_and_test_file_stays_under_400_lines() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    sources(&root.join("src"), &mut files);
    sources(&root.join("tests"), &mut files);
    let long: Vec<String> = files
        .iter()
        .filter_map(|path| {
            let lines = std::fs::read_to_string(path).ok()?.lines().count();
            (lines > 400).then(|| format!("{} ({lines})", path.display()))
        })
        .collect();
    assert_eq!(long, Vec::<String>::new(), "split them by what they own");
}
