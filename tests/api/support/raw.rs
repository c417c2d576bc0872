//! Bytes on a socket, for requests an HTTP client would not send: half a head, a
//! body that stops arriving, a plain GET over a blocking socket.

use std::time::Duration;

use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;
use tokio::time::Instant;

use super::mock_upstream::content_length;

/// Everything the server sends until it closes the socket; `None` if it is still
/// open after `limit`.
pub async fn read_until_closed(socket: &mut TcpStream, limit: Duration) -> Option<Vec<u8>> {
    let mut all = Vec::new();
    let read = tokio::time::timeout(limit, socket.read_to_end(&mut all)).await;
    match read {
        Ok(_) => Some(all),
        Err(_) => None,
    }
}

/// One whole HTTP response with a `content-length`, as text (what came, if the
/// socket closed or `limit` passed first).
pub async fn read_response(socket: &mut TcpStream, limit: Duration) -> String {
    let give_up = Instant::now() + limit;
    let mut all = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let text = String::from_utf8_lossy(&all).into_owned();
        if let Some(end) = text.find("\r\n\r\n") {
            let length = content_length(&text[..end]);
            if all.len() >= end + 4 + length {
                return text;
            }
        }
        let left = give_up.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, socket.read(&mut buf)).await {
            Ok(Ok(n)) if n > 0 => all.extend_from_slice(&buf[..n]),
            _ => return text,
        }
    }
}

/// A plain HTTP/1.1 GET over a std socket; the whole response as text.
pub fn blocking_get(address: &str, path: &str) -> String {
    use std::io::{Read, Write};
    let mut socket = std::net::TcpStream::connect(address).expect("connect");
    let request = format!("GET {path} HTTP/1.1\r\nhost: {address}\r\nconnection: close\r\n\r\n");
    socket.write_all(request.as_bytes()).expect("send");
    let mut response = String::new();
    socket.read_to_string(&mut response).expect("read");
    response
}
