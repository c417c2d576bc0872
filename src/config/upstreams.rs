//! Several upstreams (contract 6.1): `LADLE_UPSTREAMS` (a JSON array) or
//! `[[upstreams]]` tables in the file, each entry checked field by field. Errors name
//! `LADLE_UPSTREAMS`, the entry and the field, never a value: an entry holds an API
//! key and may hold a proxy password.

use serde_json::{Map, Value};

use super::settings::Sources;
use super::{ConfigError, Secret, UpstreamProxy, UpstreamSettings, invalid};
use crate::engine::upstream::continuation::Continuation;

/// The key every error of the list names.
const KEY: &str = "LADLE_UPSTREAMS";

/// The fields an entry may have.
const FIELDS: [&str; 10] = [
    "name",
    "url",
    "api_key",
    "proxy",
    "model",
    "priority",
    "weight",
    "attempts",
    "max_inflight",
    "continuation",
];

/// The upstreams (the list, or the single-upstream settings as one named
/// `default`; never both), and the proxy setting.
pub fn load(src: &Sources<'_>) -> Result<(Vec<UpstreamSettings>, UpstreamProxy), ConfigError> {
    let url: Option<String> = src.optional("LADLE_UPSTREAM_URL")?;
    let continuation = match src.optional::<String>("LADLE_UPSTREAM_CONTINUATION")? {
        None => None,
        Some(word) => Some(
            Continuation::parse(&word)
                .ok_or_else(|| invalid("LADLE_UPSTREAM_CONTINUATION", one_of_the_words()))?,
        ),
    };
    let api_key = Secret::new(src.get::<String>("LADLE_UPSTREAM_API_KEY")?);
    let proxy = match src.optional::<String>("LADLE_UPSTREAM_PROXY")? {
        None => UpstreamProxy::FromEnvironment,
        Some(text) => UpstreamProxy::parse(&text)?,
    };
    if let Some(url) = &url
        && !(url.starts_with("http://") || url.starts_with("https://"))
    {
        return Err(invalid(
            "LADLE_UPSTREAM_URL",
            "must start with http:// or https://",
        ));
    }
    let upstreams = match src.list(KEY)? {
        Some(_)
            if url.is_some()
                || !api_key.is_empty()
                || proxy != UpstreamProxy::FromEnvironment
                || continuation.is_some() =>
        {
            return Err(invalid(
                KEY,
                "is given with LADLE_UPSTREAM_URL, LADLE_UPSTREAM_API_KEY, \
                 LADLE_UPSTREAM_PROXY or LADLE_UPSTREAM_CONTINUATION: use one form, \
                 the list or the single settings",
            ));
        }
        Some(list) => parse(&list)?,
        None => url
            .iter()
            .map(|url| UpstreamSettings {
                continuation: continuation.unwrap_or_default(),
                ..UpstreamSettings::single(url, api_key.clone(), proxy.clone())
            })
            .collect(),
    };
    Ok((upstreams, proxy))
}

/// The list from its JSON form (the TOML tables are converted to JSON first).
pub fn parse(list: &Value) -> Result<Vec<UpstreamSettings>, ConfigError> {
    let entries = list
        .as_array()
        .ok_or_else(|| invalid(KEY, "must be an array of upstream objects"))?;
    if entries.is_empty() {
        return Err(invalid(KEY, "must name at least one upstream"));
    }
    let mut upstreams: Vec<UpstreamSettings> = Vec::with_capacity(entries.len());
    for (index, entry) in entries.iter().enumerate() {
        let at = |problem: String| invalid(KEY, format!("entry {}: {problem}", index + 1));
        let fields = entry
            .as_object()
            .ok_or_else(|| at("must be an object".into()))?;
        let upstream = entry_settings(fields).map_err(at)?;
        if upstreams.iter().any(|u| u.name == upstream.name) {
            return Err(at(format!("the name `{}` is used twice", upstream.name)));
        }
        upstreams.push(upstream);
    }
    Ok(upstreams)
}

fn entry_settings(fields: &Map<String, Value>) -> Result<UpstreamSettings, String> {
    if let Some(unknown) = fields.keys().find(|k| !FIELDS.contains(&k.as_str())) {
        return Err(format!("unknown field `{unknown}`"));
    }
    let text = |field: &str| -> Result<Option<&str>, String> {
        match fields.get(field) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(text)) => Ok(Some(text)),
            Some(_) => Err(format!("`{field}` must be a string")),
        }
    };
    let number = |field: &str, default: u32, least: u32| -> Result<u32, String> {
        match fields.get(field) {
            None | Some(Value::Null) => Ok(default),
            Some(value) => value
                .as_u64()
                .and_then(|n| u32::try_from(n).ok())
                .filter(|n| *n >= least)
                .ok_or_else(|| format!("`{field}` must be a whole number of at least {least}")),
        }
    };
    let name = text("name")?.ok_or("`name` is required")?;
    if !valid_name(name) {
        return Err("`name` must match ^[a-z0-9][a-z0-9_-]{0,31}$".into());
    }
    let url = text("url")?.ok_or("`url` is required")?;
    if !(url.starts_with("http://") || url.starts_with("https://")) {
        return Err("`url` must start with http:// or https://".into());
    }
    let proxy = match text("proxy")? {
        None => UpstreamProxy::FromEnvironment,
        Some(proxy) => UpstreamProxy::parse_for(KEY, proxy).map_err(|e| match e {
            ConfigError::Invalid { problem, .. } => format!("`proxy` {problem}"),
            other => other.to_string(),
        })?,
    };
    let continuation = match text("continuation")? {
        None => Continuation::None,
        Some(word) => Continuation::parse(word)
            .ok_or_else(|| format!("`continuation` {}", one_of_the_words()))?,
    };
    Ok(UpstreamSettings {
        name: name.to_owned(),
        url: url.to_owned(),
        api_key: Secret::new(text("api_key")?.unwrap_or_default()),
        proxy,
        model: text("model")?.filter(|m| !m.is_empty()).map(str::to_owned),
        priority: number("priority", 0, 0)?,
        weight: number("weight", 1, 1)?,
        attempts: number("attempts", 1, 1)?,
        max_inflight: fields
            .get("max_inflight")
            .filter(|v| !v.is_null())
            .map(|_| number("max_inflight", 1, 1))
            .transpose()?,
        continuation,
    })
}

/// What a `continuation` word must be.
fn one_of_the_words() -> String {
    format!("must be one of {}", Continuation::WORDS.join(", "))
}

/// `^[a-z0-9][a-z0-9_-]{0,31}$`.
fn valid_name(name: &str) -> bool {
    let bytes = name.as_bytes();
    !bytes.is_empty()
        && bytes.len() <= 32
        && (bytes[0].is_ascii_lowercase() || bytes[0].is_ascii_digit())
        && bytes
            .iter()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'_' || *b == b'-')
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn problem(list: Value) -> String {
        match parse(&list) {
            Err(ConfigError::Invalid { key, problem }) => {
                assert_eq!(key, KEY);
                problem
            }
            other => panic!("expected an invalid list, got {other:?}"),
        }
    }

    #[test]
    fn an_upstreams_max_inflight_is_a_whole_number_of_at_least_one() {
        let one = |extra: Value| {
            let mut entry = json!({"name": "a", "url": "http://a.example/v1"});
            entry
                .as_object_mut()
                .expect("an object")
                .extend(extra.as_object().cloned().unwrap_or_default());
            json!([entry])
        };
        let list = parse(&one(json!({"max_inflight": 8}))).expect("valid");
        assert_eq!(list[0].max_inflight, Some(8));
        assert_eq!(parse(&one(json!({}))).expect("valid")[0].max_inflight, None);
        for bad in [json!(0), json!(1.5), json!("8")] {
            let problem = problem(one(json!({"max_inflight": bad})));
            assert!(problem.contains("`max_inflight`"), "{problem}");
        }
    }

    #[test]
    fn entries_take_their_defaults() {
        let list = parse(&json!([
            {"name": "zhipu", "url": "https://a.example/v1", "api_key": "sk-a"},
            {"name": "deepseek-2", "url": "http://b.example/v1", "model": "deepseek-chat",
             "priority": 1, "weight": 3, "proxy": "none", "continuation": "prefix"},
        ]))
        .expect("valid");
        assert_eq!(list[0].priority, 0);
        assert_eq!(list[0].weight, 1);
        assert_eq!(list[0].proxy, UpstreamProxy::FromEnvironment);
        assert_eq!(list[1].model.as_deref(), Some("deepseek-chat"));
        assert_eq!((list[1].priority, list[1].weight), (1, 3));
        assert_eq!((list[0].attempts, list[1].attempts), (1, 1));
        assert_eq!(list[1].proxy, UpstreamProxy::Off);
        assert_eq!(list[0].continuation, Continuation::None);
        assert_eq!(list[1].continuation, Continuation::Prefix);
    }

    #[test]
    fn every_contract_error_names_the_list_and_never_a_value() {
        let cases = [
            (json!([]), "at least one"),
            (json!({"name": "a"}), "array"),
            (json!([{"url": "http://a/v1"}]), "`name` is required"),
            (json!([{"name": "a"}]), "`url` is required"),
            (
                json!([{"name": "A", "url": "http://a/v1"}]),
                "`name` must match",
            ),
            (json!([{"name": "a", "url": "ftp://a/v1"}]), "`url`"),
            (
                json!([{"name": "a", "url": "http://a/v1", "weight": 0}]),
                "`weight`",
            ),
            (
                json!([{"name": "a", "url": "http://a/v1", "priority": -1}]),
                "`priority`",
            ),
            (
                json!([{"name": "a", "url": "http://a/v1", "attempts": 0}]),
                "`attempts`",
            ),
            (
                json!([{"name": "a", "url": "http://a/v1", "continuation": "Prefix"}]),
                "`continuation` must be one of prefix, partial, continue_final_message, none",
            ),
            (
                json!([{"name": "a", "url": "http://a/v1", "colour": "red"}]),
                "unknown field `colour`",
            ),
            (
                json!([{"name": "a", "url": "http://a/v1"}, {"name": "a", "url": "http://b/v1"}]),
                "used twice",
            ),
            (
                json!([{"name": "a", "url": "http://a/v1", "api_key": 42}]),
                "`api_key` must be a string",
            ),
            (
                json!([{"name": "a", "url": "http://a/v1", "proxy": "ftp://u:s3cr3t@p"}]),
                "`proxy`",
            ),
        ];
        for (list, expected) in cases {
            let problem = problem(list.clone());
            assert!(problem.contains(expected), "{list} → {problem}");
            assert!(!problem.contains("s3cr3t"), "{problem}");
        }
    }
}
