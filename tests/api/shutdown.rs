//! Graceful shutdown: live streams finish, new connections are refused, and the
//! process exits 0 (contract section 5).

use std::time::Duration;

use tokio::net::TcpStream;
use tokio::time::Instant;

use crate::support::mock_upstream::*;
use crate::support::process::LadleProcess;
use crate::support::scripts::slow_answer;
use crate::support::*;

#[tokio::test]
async fn shutdown_lets_a_live_stream_finish_and_refuses_new_connections() {
    // Arrange
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let (app, server) = Gateway::options()
        .start_until(async move {
            let _ = stopped.await;
        })
        .await;
    app.upstream()
        .push([slow_answer(&["一", "二", "三"], millis(200))]);
    let (response, first) = app.chat_streaming().await;
    // Act
    stop.send(()).expect("the server is listening for shutdown");
    let asked = Instant::now();
    let refused = within(Duration::from_secs(1), async || {
        TcpStream::connect(app.address()).await.is_err()
    })
    .await
    .is_some();
    let rest = response.text().await.expect("the rest of the stream");
    let finished = asked.elapsed();
    // Assert
    assert!(refused, "new connections were still accepted");
    let whole = format!("{}{rest}", String::from_utf8_lossy(&first));
    assert_eq!(streamed_text(&whole), "一二三");
    assert!(whole.ends_with("data: [DONE]\n\n"), "stream was {whole:?}");
    assert!(finished >= millis(200), "the stream was over too soon");
    let served = tokio::time::timeout(Duration::from_secs(2), server)
        .await
        .expect("the server stops once the stream is done")
        .expect("the server task");
    assert!(served.is_ok());
}

#[tokio::test]
async fn sigterm_lets_live_streams_on_every_worker_finish_and_the_process_exits_0() {
    // Arrange: three workers, and more streams than workers, so that whichever
    // threads accepted them, every worker has its listener to close and its
    // streams to drain.
    let upstream = MockUpstream::start().await;
    let streams = 5;
    upstream.push((0..streams).map(|_| slow_answer(&["一", "二", "三"], millis(200))));
    let mut gateway = LadleProcess::start(&upstream.url, &[("LADLE_WORKERS", "3")]).await;
    let mut responses = Vec::new();
    for _ in 0..streams {
        // A client each, so each stream has a connection of its own.
        let (response, first) = Endpoint::new(gateway.base.clone()).chat_streaming().await;
        responses.push((first, response));
    }
    // Act
    gateway.terminate();
    let asked = Instant::now();
    let refused = within(Duration::from_secs(1), async || {
        TcpStream::connect(gateway.address()).await.is_err()
    })
    .await
    .is_some();
    let mut wholes = Vec::new();
    for (first, response) in responses {
        let rest = response.text().await.expect("the rest of the stream");
        wholes.push(format!("{}{rest}", String::from_utf8_lossy(&first)));
    }
    let finished = asked.elapsed();
    let status = gateway.exited(Duration::from_secs(5)).await;
    // Assert
    assert!(refused, "new connections were still accepted");
    for whole in &wholes {
        assert_eq!(streamed_text(whole), "一二三");
        assert!(whole.ends_with("data: [DONE]\n\n"), "stream was {whole:?}");
    }
    assert!(finished >= millis(200), "the streams were over too soon");
    assert_eq!(status.code(), Some(0), "exit status {status:?}");
    let started = gateway.lines();
    assert!(
        started.iter().any(|l| l.contains("\"workers\":3")),
        "no log line says three workers: {started:?}"
    );
}
