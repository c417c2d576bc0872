//! Upstream connections: TCP, TLS when the URL says `https`, and a small idle pool.
//!
//! A connection is a socket and the bytes read from it but not yet used; nothing
//! is spawned to drive it, the request's own task reads it (see `exchange`). Idle
//! connections rest here unread, so each is checked on the way out; one the
//! upstream closed (or wrote to) meanwhile is dropped.

use std::cell::Cell;
use std::io;
use std::path::Path;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::BytesMut;
use futures_util::future::BoxFuture;
use futures_util::task::noop_waker_ref;
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::time::Instant;
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;

/// A socket and what has been read from it but not used yet.
pub struct Connection {
    pub io: Io,
    pub read: BytesMut,
}

/// Where connections go and how they are secured.
pub struct Connector {
    host: String,
    port: u16,
    tls: Option<TlsConnector>,
    timeout: Duration,
}

/// Idle connections, most recently used last, in one shard per worker thread: a
/// socket belongs to the runtime that opened it, and with a runtime per thread a
/// connection reused on another thread would be woken across threads.
pub struct Pool {
    shards: Box<[Shard]>,
}

/// One worker's idle connections with the time each was put aside.
type Shard = Mutex<Vec<(Connection, Instant)>>;

/// Shards in a pool; workers beyond this many share shards (still correct).
const SHARDS: usize = 64;

thread_local! {
    /// Which worker thread this is; 0 for every thread of a shared runtime.
    static WORKER: Cell<usize> = const { Cell::new(0) };
}

/// Marks the current thread as worker `index`, for the pool shard it uses.
pub fn on_worker_thread(index: usize) {
    WORKER.with(|worker| worker.set(index));
}

impl Default for Pool {
    fn default() -> Self {
        Pool {
            shards: (0..SHARDS).map(|_| Mutex::default()).collect(),
        }
    }
}

/// How long a connection may rest before it is closed rather than reused.
const IDLE_TIMEOUT: Duration = Duration::from_secs(60);
/// Most idle connections kept per upstream.
const MAX_IDLE: usize = 512;

impl Connector {
    /// A connector for `host:port`, through TLS when `tls` is given.
    pub fn new(host: String, port: u16, tls: Option<TlsConnector>, timeout: Duration) -> Self {
        Connector {
            host,
            port,
            tls,
            timeout,
        }
    }

    /// Opens a new connection; errors name what failed, never a header.
    ///
    /// Boxed: a connect is rare (the pool usually has a connection), and its
    /// future, with the TLS handshake's inside, would otherwise make the future of
    /// every request's send several times larger.
    pub fn connect(&self) -> BoxFuture<'_, Result<Connection, String>> {
        Box::pin(async move {
            let io = tokio::time::timeout(self.timeout, self.open())
                .await
                .map_err(|_| format!("connect to {}:{} timed out", self.host, self.port))??;
            Ok(Connection {
                io,
                read: BytesMut::new(),
            })
        })
    }

    async fn open(&self) -> Result<Io, String> {
        let tcp = TcpStream::connect((self.host.as_str(), self.port))
            .await
            .map_err(|e| format!("connect to {}:{}: {e}", self.host, self.port))?;
        // Chunks are small and latency is the point; never wait to fill a segment.
        let _ = tcp.set_nodelay(true);
        let Some(tls) = &self.tls else {
            return Ok(Io::Plain(tcp));
        };
        let name = rustls::pki_types::ServerName::try_from(self.host.clone())
            .map_err(|e| format!("`{}` is not a TLS server name: {e}", self.host))?;
        let stream = tls
            .connect(name, tcp)
            .await
            .map_err(|e| format!("TLS handshake with {}: {e}", self.host))?;
        Ok(Io::Tls(Box::new(stream)))
    }
}

impl Pool {
    /// The most recently used idle connection that is still open, if any.
    pub fn take(&self) -> Option<Connection> {
        let mut idle = self.shard().lock().ok()?;
        while let Some((mut connection, since)) = idle.pop() {
            if since.elapsed() < IDLE_TIMEOUT && connection.is_open() {
                return Some(connection);
            }
        }
        None
    }

    /// Keeps a connection whose exchange ended cleanly for the next request.
    pub fn put(&self, mut connection: Connection) {
        if !connection.is_open() {
            return;
        }
        if let Ok(mut idle) = self.shard().lock()
            && idle.len() < MAX_IDLE
        {
            idle.push((connection, Instant::now()));
        }
    }
}

impl Pool {
    fn shard(&self) -> &Shard {
        &self.shards[WORKER.with(Cell::get) % self.shards.len()]
    }
}

/// Room made before each read: a few chunks, or a whole short answer.
const READ_SIZE: usize = 8 * 1024;
/// Less room than this left in the buffer means making room first.
const MIN_READ_ROOM: usize = 1024;

impl Connection {
    /// Reads what the socket has into `read`; `Ok(0)` is the upstream closing.
    pub fn poll_fill(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<usize>> {
        if self.read.capacity() - self.read.len() < MIN_READ_ROOM {
            self.read.reserve(READ_SIZE);
        }
        std::pin::pin!(self.io.read_buf(&mut self.read)).poll(cx)
    }

    /// Whether a request can be sent: nothing arrived while idle, not even a close.
    fn is_open(&mut self) -> bool {
        let mut cx = Context::from_waker(noop_waker_ref());
        self.read.is_empty() && self.poll_fill(&mut cx).is_pending()
    }
}

/// A plain or TLS byte stream.
pub enum Io {
    Plain(TcpStream),
    Tls(Box<TlsStream<TcpStream>>),
}

impl AsyncRead for Io {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Io::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Io::Tls(s) => Pin::new(s).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Io {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Io::Plain(s) => Pin::new(s).poll_write(cx, buf),
            Io::Tls(s) => Pin::new(s).poll_write(cx, buf),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Io::Plain(s) => Pin::new(s).poll_write_vectored(cx, bufs),
            Io::Tls(s) => Pin::new(s).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            Io::Plain(s) => s.is_write_vectored(),
            Io::Tls(s) => s.is_write_vectored(),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Io::Plain(s) => Pin::new(s).poll_flush(cx),
            Io::Tls(s) => Pin::new(s).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Io::Plain(s) => Pin::new(s).poll_shutdown(cx),
            Io::Tls(s) => Pin::new(s).poll_shutdown(cx),
        }
    }
}

/// TLS settings: the webpki roots plus the certificates of `extra_roots` (a PEM
/// file, for an upstream behind a private CA); HTTP/1.1 by ALPN.
pub fn tls_connector(extra_roots: Option<&Path>) -> Result<TlsConnector, String> {
    let mut roots =
        rustls::RootCertStore::from_iter(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    if let Some(path) = extra_roots {
        let unreadable = |e: &dyn std::fmt::Display| format!("CA file {}: {e}", path.display());
        for cert in CertificateDer::pem_file_iter(path).map_err(|e| unreadable(&e))? {
            roots
                .add(cert.map_err(|e| unreadable(&e))?)
                .map_err(|e| unreadable(&e))?;
        }
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(TlsConnector::from(Arc::new(config)))
}
