//! The configuration loader against the contract's rules.

use super::*;

fn env_of(pairs: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
    move |key| {
        pairs
            .iter()
            .find(|(k, _)| *k == key)
            .map(|(_, v)| v.to_string())
    }
}

fn error_key(result: Result<Config, ConfigError>) -> &'static str {
    match result {
        Err(ConfigError::Invalid { key, .. }) => key,
        other => panic!("expected an invalid key, got {other:?}"),
    }
}

#[test]
fn defaults_match_the_contract() {
    let config = Config::load(None, &env_of(&[])).expect("defaults are valid");
    assert_eq!(config.listen.to_string(), "127.0.0.1:8080");
    assert_eq!(config.timeouts.idle, Duration::from_secs(30));
    assert_eq!(config.deadline, Duration::from_secs(120));
    assert_eq!(config.retry.max_attempts, 5);
    assert_eq!(config.max_body_bytes, 262_144);
    assert!(config.busy_keywords.matches("当前模型访问量较大"));
    assert!(config.admin_token.is_none());
}

#[test]
fn environment_wins_over_the_file() {
    let file = "idle_timeout_ms = 1000\nmax_attempts = 3\nmodel = \"from-file\"";
    let config =
        Config::load(Some(file), &env_of(&[("LADLE_IDLE_TIMEOUT_MS", "250")])).expect("valid");
    assert_eq!(config.timeouts.idle, Duration::from_millis(250));
    assert_eq!(config.retry.max_attempts, 3);
    assert_eq!(config.model.as_deref(), Some("from-file"));
}

#[test]
fn invalid_values_name_their_key() {
    assert_eq!(
        error_key(Config::load(
            None,
            &env_of(&[("LADLE_IDLE_TIMEOUT_MS", "soon")])
        )),
        "LADLE_IDLE_TIMEOUT_MS"
    );
    assert_eq!(
        error_key(Config::load(None, &env_of(&[("LADLE_LISTEN", "nowhere")]))),
        "LADLE_LISTEN"
    );
    assert_eq!(
        error_key(Config::load(None, &env_of(&[("LADLE_LOG_FORMAT", "xml")]))),
        "LADLE_LOG_FORMAT"
    );
    assert_eq!(
        error_key(Config::load(Some("max_attempts = 0"), &env_of(&[]))),
        "LADLE_MAX_ATTEMPTS"
    );
}

#[test]
fn an_unknown_key_in_the_file_stops_start_up_naming_it() {
    match Config::load(Some("idle_timout_ms = 5000"), &env_of(&[])) {
        Err(error @ ConfigError::UnknownKey(_)) => {
            assert!(error.to_string().contains("idle_timout_ms"), "{error}");
        }
        other => panic!("expected an unknown key, got {other:?}"),
    }
    // A variable name is not a file key either.
    assert!(Config::load(Some("LADLE_IDLE_TIMEOUT_MS = 5000"), &env_of(&[])).is_err());
}

#[test]
fn fields_are_checked_against_each_other() {
    let backoff = env_of(&[
        ("LADLE_BACKOFF_BASE_MS", "5000"),
        ("LADLE_BACKOFF_MAX_MS", "1000"),
    ]);
    assert_eq!(
        error_key(Config::load(None, &backoff)),
        "LADLE_BACKOFF_MAX_MS"
    );
    let remaining = env_of(&[
        ("LADLE_DEADLINE_MS", "1000"),
        ("LADLE_MIN_REMAINING_MS", "1000"),
    ]);
    assert_eq!(
        error_key(Config::load(None, &remaining)),
        "LADLE_MIN_REMAINING_MS"
    );
}

#[test]
fn client_read_timeouts_default_to_30_s_and_must_be_positive() {
    let config = Config::load(None, &env_of(&[])).expect("defaults are valid");
    assert_eq!(config.header_read_timeout, Duration::from_secs(30));
    assert_eq!(config.body_read_timeout, Duration::from_secs(30));
    for key in ["LADLE_HEADER_READ_TIMEOUT_MS", "LADLE_BODY_READ_TIMEOUT_MS"] {
        let env = move |k: &str| (k == key).then(|| "0".to_owned());
        assert_eq!(error_key(Config::load(None, &env)), key);
    }
}

#[test]
fn secrets_never_show_in_debug_output() {
    let env = env_of(&[
        ("LADLE_UPSTREAM_API_KEY", "sk-very-secret"),
        ("LADLE_ADMIN_TOKEN", "tok-secret"),
        (
            "LADLE_UPSTREAM_PROXY",
            "http://me:proxy-secret@127.0.0.1:3128",
        ),
    ]);
    let printed = format!("{:?}", Config::load(None, &env).expect("valid"));
    for secret in ["sk-very-secret", "tok-secret", "proxy-secret"] {
        assert!(!printed.contains(secret), "{secret} in {printed}");
    }
}

#[test]
fn the_proxy_is_the_environment_none_or_a_url() {
    let proxy = |value: &'static str| {
        let pairs: &'static [(&str, &str)] = Box::leak(Box::new([("LADLE_UPSTREAM_PROXY", value)]));
        Config::load(None, &env_of(pairs)).map(|c| c.upstream_proxy)
    };
    let unset = Config::load(None, &env_of(&[])).expect("valid");
    assert_eq!(unset.upstream_proxy, UpstreamProxy::FromEnvironment);
    assert_eq!(proxy("none").expect("valid"), UpstreamProxy::Off);
    assert_eq!(
        proxy("socks5://127.0.0.1:1080").expect("valid"),
        UpstreamProxy::Url(Secret::new("socks5://127.0.0.1:1080"))
    );
    assert_eq!(
        proxy("https://u:p@proxy.example:8443").expect("valid"),
        UpstreamProxy::Url(Secret::new("https://u:p@proxy.example:8443"))
    );
    for bad in ["ftp://u:leak@proxy:21", "proxy:3128", "socks5://u:leak@"] {
        match proxy(bad) {
            Err(ConfigError::Invalid { key, problem }) => {
                assert_eq!(key, "LADLE_UPSTREAM_PROXY");
                assert!(!problem.contains("leak"), "the value is not echoed");
            }
            other => panic!("{bad}: {other:?}"),
        }
    }
}

#[test]
fn jitter_is_a_ratio_in_0_to_1_and_a_zero_first_output_timeout_is_off() {
    for bad in ["1.5", "-0.1", "lots"] {
        let pairs: &'static [(&str, &str)] = Box::leak(Box::new([("LADLE_BACKOFF_JITTER", bad)]));
        assert_eq!(
            error_key(Config::load(None, &env_of(pairs))),
            "LADLE_BACKOFF_JITTER"
        );
    }
    let config = Config::load(None, &env_of(&[("LADLE_BACKOFF_JITTER", "0.2")])).expect("valid");
    assert!((config.retry.jitter - 0.2).abs() < f64::EPSILON);
    assert_eq!(config.timeouts.first_output, None);
    let on =
        Config::load(None, &env_of(&[("LADLE_FIRST_OUTPUT_TIMEOUT_MS", "250")])).expect("valid");
    assert_eq!(on.timeouts.first_output, Some(Duration::from_millis(250)));
}

#[test]
fn several_upstreams_come_from_the_list_or_the_file_tables_never_both_forms() {
    let list = r#"[{"name": "a", "url": "http://a/v1"}, {"name": "b", "url": "http://b/v1", "priority": 1}]"#;
    let pairs: &'static [(&str, &str)] = Box::leak(Box::new([("LADLE_UPSTREAMS", list)]));
    let config = Config::load(None, &env_of(pairs)).expect("valid");
    let names: Vec<&str> = config.upstreams.iter().map(|u| u.name.as_str()).collect();
    assert_eq!(names, ["a", "b"]);
    let file = "[[upstreams]]\nname = \"x\"\nurl = \"https://x/v1\"\nweight = 2\n";
    let config = Config::load(Some(file), &env_of(&[])).expect("valid");
    assert_eq!(config.upstreams[0].weight, 2);
    let single =
        Config::load(None, &env_of(&[("LADLE_UPSTREAM_URL", "http://s/v1")])).expect("valid");
    assert_eq!(single.upstreams[0].name, "default");
    let both = Config::load(
        Some(file),
        &env_of(&[("LADLE_UPSTREAM_URL", "http://s/v1")]),
    );
    assert_eq!(error_key(both), "LADLE_UPSTREAMS");
    let key_too: &'static [(&str, &str)] = Box::leak(Box::new([
        ("LADLE_UPSTREAMS", list),
        ("LADLE_UPSTREAM_API_KEY", "sk-x"),
    ]));
    assert_eq!(
        error_key(Config::load(None, &env_of(key_too))),
        "LADLE_UPSTREAMS"
    );
    let not_json: &'static [(&str, &str)] = Box::leak(Box::new([("LADLE_UPSTREAMS", "[{")]));
    assert_eq!(
        error_key(Config::load(None, &env_of(not_json))),
        "LADLE_UPSTREAMS"
    );
}

#[test]
fn a_broken_file_is_reported_by_line_without_quoting_it() {
    let file = "[[upstreams]]\nname = \"a\"\napi_key = \"sk-secret-value\" oops\n";
    match Config::load(Some(file), &env_of(&[])) {
        Err(error @ ConfigError::File(_)) => {
            let text = error.to_string();
            assert!(text.contains("line 3"), "{text}");
            assert!(!text.contains("sk-secret-value"), "{text}");
        }
        other => panic!("expected a file error, got {other:?}"),
    }
}

#[test]
fn redis_is_off_by_default_and_its_url_is_checked_without_being_echoed() {
    let config = Config::load(None, &env_of(&[])).expect("valid");
    assert!(config.redis.is_none());
    let config = Config::load(
        Some("redis_url = \"redis://:pw@10.0.0.7:6390/2\"\nredis_prefix = \"menu:\""),
        &env_of(&[]),
    )
    .expect("valid");
    let redis = config.redis.expect("redis settings");
    assert_eq!(redis.url.expose(), "redis://:pw@10.0.0.7:6390/2");
    assert_eq!(redis.prefix, "menu:");
    assert_eq!(redis.lease, Duration::from_secs(10));
    assert!(!format!("{redis:?}").contains("pw"), "Debug hides the URL");
    for bad in [
        "http://:s3cret@host:6379",
        "redis://:s3cret@host:port",
        "s3cret",
    ] {
        let error = Config::load(None, &|k: &str| {
            (k == "LADLE_REDIS_URL").then(|| bad.to_owned())
        })
        .expect_err(bad);
        let text = error.to_string();
        assert!(text.starts_with("LADLE_REDIS_URL"), "{text}");
        assert!(!text.contains("s3cret"), "{text}");
    }
    let spaced = env_of(&[
        ("LADLE_REDIS_URL", "redis://h:1"),
        ("LADLE_REDIS_PREFIX", "a b"),
    ]);
    assert_eq!(error_key(Config::load(None, &spaced)), "LADLE_REDIS_PREFIX");
}

#[test]
fn too_many_workers_stop_start_up_naming_the_key() {
    assert_eq!(
        error_key(Config::load(None, &env_of(&[("LADLE_WORKERS", "100000")]))),
        "LADLE_WORKERS"
    );
    let most = Config::load(None, &env_of(&[("LADLE_WORKERS", "256")])).expect("256 is fine");
    assert_eq!(most.workers, 256);
}

#[test]
fn unknown_variables_are_named_in_one_warning_and_a_short_token_is_warned_about() {
    let config = Config::load(None, &env_of(&[("LADLE_ADMIN_TOKEN", "zq9-tok")])).expect("valid");
    let names = [
        "LADLE_IDLE_TIMEOUT",
        "PATH",
        "LADLE_MODEL",
        "LADLE_DEADLNE_MS",
    ];
    let warnings = config.warnings(names.map(String::from));
    assert_eq!(warnings.len(), 2, "{warnings:?}");
    assert!(
        warnings[0].contains("LADLE_IDLE_TIMEOUT, LADLE_DEADLNE_MS"),
        "{warnings:?}"
    );
    assert!(warnings[1].contains("LADLE_ADMIN_TOKEN"), "{warnings:?}");
    assert!(
        !warnings[1].contains("zq9-tok"),
        "the token is never quoted"
    );
    let long =
        Config::load(None, &env_of(&[("LADLE_ADMIN_TOKEN", "0123456789abcdef")])).expect("valid");
    assert_eq!(long.warnings(Vec::new()), Vec::<String>::new());
}

#[test]
fn the_stream_settings_default_as_the_contract_says_and_name_their_key() {
    let config = Config::load(None, &env_of(&[])).expect("defaults are valid");
    let streams = config.jobs.streams;
    assert_eq!(streams.ttl, Duration::from_millis(900_000));
    assert_eq!(streams.max_bytes, 67_108_864);
    assert_eq!(streams.progress, Some(Duration::from_millis(2_000)));
    assert_eq!(streams.stall, Duration::from_millis(45_000));
    let off = Config::load(None, &env_of(&[("LADLE_STREAM_PROGRESS_MS", "0")])).expect("valid");
    assert_eq!(off.jobs.streams.progress, None, "0 = no progress events");
    for (key, value) in [
        ("LADLE_STREAM_TTL_MS", "soon"),
        ("LADLE_STREAM_MAX_BYTES", "0"),
        ("LADLE_STREAM_MAX_BYTES", "-1"),
        ("LADLE_STREAM_PROGRESS_MS", "2s"),
        ("LADLE_STREAM_STALL_MS", "99"),
    ] {
        let pairs: &'static [(&'static str, &'static str)] = Box::leak(Box::new([(key, value)]));
        assert_eq!(
            error_key(Config::load(None, &env_of(pairs))),
            key,
            "{value}"
        );
    }
}

#[test]
fn continuation_settings_take_exact_words_and_whole_numbers() {
    use crate::engine::upstream::continuation::Continuation;
    let config = Config::load(None, &env_of(&[])).expect("defaults are valid");
    assert_eq!(config.retry.max_continuations, 2);
    assert_eq!(config.retry.continue_min_remaining, Duration::from_secs(10));
    let single = env_of(&[
        ("LADLE_UPSTREAM_URL", "http://127.0.0.1:1/v1"),
        ("LADLE_UPSTREAM_CONTINUATION", "partial"),
    ]);
    let config = Config::load(None, &single).expect("valid");
    assert_eq!(config.upstreams[0].continuation, Continuation::Partial);
    const URL: (&str, &str) = ("LADLE_UPSTREAM_URL", "http://127.0.0.1:1/v1");
    let cases: [(&str, &'static [(&str, &str)]); 4] = [
        (
            "LADLE_UPSTREAM_CONTINUATION",
            &[URL, ("LADLE_UPSTREAM_CONTINUATION", "Prefix")],
        ),
        (
            "LADLE_UPSTREAM_CONTINUATION",
            &[URL, ("LADLE_UPSTREAM_CONTINUATION", "deepseek")],
        ),
        (
            "LADLE_MAX_CONTINUATIONS",
            &[URL, ("LADLE_MAX_CONTINUATIONS", "-1")],
        ),
        (
            "LADLE_CONTINUE_MIN_REMAINING_MS",
            &[URL, ("LADLE_CONTINUE_MIN_REMAINING_MS", "soon")],
        ),
    ];
    for (key, env) in cases {
        assert_eq!(error_key(Config::load(None, &env_of(env))), key, "{env:?}");
    }
    let both = env_of(&[
        (
            "LADLE_UPSTREAMS",
            r#"[{"name": "a", "url": "http://127.0.0.1:1/v1"}]"#,
        ),
        ("LADLE_UPSTREAM_CONTINUATION", "prefix"),
    ]);
    assert_eq!(error_key(Config::load(None, &both)), "LADLE_UPSTREAMS");
}
