//! One gateway in this process: `ladle::server::serve` on an ephemeral loopback
//! port with the fast config, changed as the test asks: in front of a fresh mock
//! upstream (or a given one, a URL, a list of upstreams), with the admin API, a
//! fleet's Redis, extra prompt files or a prompts folder of its own. The same
//! type is the gateway of a single-gateway test and each replica of a replica
//! test; its requests are `Endpoint`'s (it derefs to one).

use std::future::Future;
use std::ops::Deref;
use std::path::{Path, PathBuf};

use ladle::config::{Config, Secret, UpstreamSettings};
use ladle::server;
use ladle::state::AppState;
use tokio::task::JoinHandle;

use super::config::{ADMIN_TOKEN, API_KEY, fast_config, redis_settings};
use super::fixtures::prompts_copy;
use super::http::Endpoint;
use super::mock_upstream::MockUpstream;
use super::redis::RedisServer;

/// A running gateway.
pub struct Gateway {
    endpoint: Endpoint,
    /// The mock upstream it runs in front of, if it does.
    upstream: Option<MockUpstream>,
    /// The gateway's prompts folder (a private copy of the shipped prompts,
    /// unless the test gave one).
    pub prompts_dir: PathBuf,
}

impl Deref for Gateway {
    type Target = Endpoint;
    fn deref(&self) -> &Endpoint {
        &self.endpoint
    }
}

/// A change to the config, made before the gateway starts.
type Adjust = Box<dyn FnOnce(&mut Config) + Send>;

/// What a gateway runs in front of.
enum Upstreams {
    /// A mock started for it.
    FreshMock,
    /// A mock the test started (shared by replicas, say).
    Mock(MockUpstream),
    /// One upstream at this URL (an HTTPS upstream, the demo, a closed port).
    Url(String),
    /// Several upstreams, as given.
    List(Vec<UpstreamSettings>),
}

/// How to start a gateway; `start` starts it.
pub struct Options {
    upstreams: Upstreams,
    prompts_dir: Option<PathBuf>,
    extra_prompts: Vec<(String, String)>,
    adjust: Vec<Adjust>,
}

impl Gateway {
    /// A gateway with the fast config in front of a fresh mock upstream.
    pub async fn start() -> Gateway {
        Gateway::options().start().await
    }

    /// A gateway in front of a fresh mock upstream, its config changed by `adjust`.
    pub async fn with(adjust: impl FnOnce(&mut Config) + Send + 'static) -> Gateway {
        Gateway::options().adjust(adjust).start().await
    }

    /// The fast config, in front of a fresh mock upstream, until changed.
    pub fn options() -> Options {
        Options {
            upstreams: Upstreams::FreshMock,
            prompts_dir: None,
            extra_prompts: Vec::new(),
            adjust: Vec::new(),
        }
    }

    /// A replica of a fleet: on `redis`, in front of the shared `upstream`, with
    /// the admin API.
    pub fn replica(redis: &RedisServer, upstream: &MockUpstream) -> Options {
        Gateway::options().mock(upstream).redis(redis).admin()
    }

    /// The mock upstream the gateway runs in front of.
    pub fn upstream(&self) -> &MockUpstream {
        self.upstream
            .as_ref()
            .expect("this gateway runs in front of other upstreams than the mock")
    }
}

impl Options {
    /// Changes the config (after the changes asked for before).
    pub fn adjust(mut self, adjust: impl FnOnce(&mut Config) + Send + 'static) -> Options {
        self.adjust.push(Box::new(adjust));
        self
    }

    /// With the admin API, under `ADMIN_TOKEN`.
    pub fn admin(self) -> Options {
        self.adjust(|config| config.admin_token = Some(Secret::new(ADMIN_TOKEN)))
    }

    /// Sharing state through `redis`, as a replica of a fleet.
    pub fn redis(self, redis: &RedisServer) -> Options {
        let settings = redis_settings(redis);
        self.adjust(move |config| config.redis = Some(settings))
    }

    /// In front of `upstream`, a mock the test started.
    pub fn mock(mut self, upstream: &MockUpstream) -> Options {
        self.upstreams = Upstreams::Mock(upstream.clone());
        self
    }

    /// In front of one upstream at `url`.
    pub fn url(mut self, url: &str) -> Options {
        self.upstreams = Upstreams::Url(url.to_owned());
        self
    }

    /// In front of several upstreams.
    pub fn upstreams(mut self, upstreams: Vec<UpstreamSettings>) -> Options {
        self.upstreams = Upstreams::List(upstreams);
        self
    }

    /// With one more prompt file, `{name}.toml`, in its prompts folder.
    pub fn prompt(mut self, name: &str, text: &str) -> Options {
        self.extra_prompts.push((name.to_owned(), text.to_owned()));
        self
    }

    /// Serving the prompts in `dir` (instead of a fresh copy of the shipped ones).
    pub fn prompts_dir(mut self, dir: &Path) -> Options {
        self.prompts_dir = Some(dir.to_path_buf());
        self
    }

    /// Starts the gateway; it serves until the test ends.
    pub async fn start(self) -> Gateway {
        self.start_until(std::future::pending()).await.0
    }

    /// Starts a gateway that shuts down when `shutdown` resolves; the handle ends
    /// when the server has stopped.
    pub async fn start_until(
        self,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> (Gateway, JoinHandle<std::io::Result<()>>) {
        let prompts_dir = self.prompts_dir.unwrap_or_else(prompts_copy);
        for (name, text) in &self.extra_prompts {
            std::fs::write(prompts_dir.join(format!("{name}.toml")), text).expect("extra prompt");
        }
        let mut config = fast_config(&prompts_dir);
        let (url, upstream) = match self.upstreams {
            Upstreams::FreshMock => {
                let mock = MockUpstream::start().await;
                (Some(mock.url.clone()), Some(mock))
            }
            Upstreams::Mock(mock) => (Some(mock.url.clone()), Some(mock)),
            Upstreams::Url(url) => (Some(url), None),
            Upstreams::List(list) => {
                config.upstreams = list;
                (None, None)
            }
        };
        for adjust in self.adjust {
            adjust(&mut config);
        }
        if let Some(url) = url {
            // After the changes: a proxy a test set is the upstream's.
            let proxy = config.upstream_proxy.clone();
            config.upstreams = vec![UpstreamSettings::single(&url, Secret::new(API_KEY), proxy)];
        }
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind gateway");
        let base = format!("http://{}", listener.local_addr().expect("gateway address"));
        let state = AppState::new(config).expect("state builds");
        let server = tokio::spawn(server::serve(listener, state, shutdown));
        let gateway = Gateway {
            endpoint: Endpoint::new(base),
            upstream,
            prompts_dir,
        };
        (gateway, server)
    }
}
