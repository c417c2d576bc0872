use bytes::Bytes;

use super::*;

fn job(status: &str) -> Bytes {
    Bytes::from(format!(r#"{{"id":"job_x","status":"{status}"}}"#))
}

fn delta() -> Bytes {
    Bytes::from(r#"{"content":"番茄"}"#)
}

/// A job that was queued, ran once, and is running again after a retry:
/// `0.1` queued, `1.1` running, `1.2` delta, `1.3` retry_wait, `1.4` queued,
/// `2.1` running, `2.2` delta.
fn twice_run() -> Feed {
    let feed = Feed::loaded();
    feed.make(0, "job", job("queued"));
    feed.make(1, "job", job("running"));
    feed.make(1, "delta", delta());
    feed.make(1, "job", job("retry_wait"));
    feed.make(1, "job", job("queued"));
    feed.make(2, "job", job("running"));
    feed.make(2, "delta", delta());
    feed
}

const RUNNING: JobEnd = JobEnd {
    finished: false,
    final_id: None,
};

fn id(run: u32, seq: u32) -> Option<EventId> {
    Some(EventId { run, seq })
}

#[test]
fn ids_run_on_without_gaps_and_nothing_follows_the_final_event() {
    let feed = twice_run();
    let ids: Vec<String> = feed.read(0, 100).iter().map(|e| e.id.to_string()).collect();
    assert_eq!(ids, ["0.1", "1.1", "1.2", "1.3", "1.4", "2.1", "2.2"]);
    assert!(
        feed.make(1, "delta", delta()).is_none(),
        "an older run's event"
    );
    let last = feed.make(2, "job", job("succeeded")).expect("kept");
    assert_eq!(last.id.to_string(), "2.3");
    assert!(
        feed.make(2, "delta", delta()).is_none(),
        "after the final event"
    );
    assert!(feed.make(3, "job", job("running")).is_none());
}

#[test]
fn every_row_of_the_cursor_table() {
    let feed = twice_run();
    let at = |index, from| Start::At { index, from };
    // Without a cursor: the first kept event.
    assert_eq!(feed.start(None, RUNNING), at(0, None));
    // A kept event: what follows it.
    let kept = Some(ResumedFrom::Kept);
    assert_eq!(feed.start(id(1, 2), RUNNING), at(3, kept));
    // The last event made so far: live from the next.
    assert_eq!(feed.start(id(2, 2), RUNNING), at(7, kept));
    // Not kept (a seq past the last, an unknown run): the current run's start.
    let run_start = Some(ResumedFrom::RunStart);
    assert_eq!(feed.start(id(2, 9), RUNNING), at(5, run_start));
    assert_eq!(feed.start(id(7, 1), RUNNING), at(5, run_start));
    // A job waiting for its next run starts at its latest `job` event.
    let waiting = Feed::loaded();
    waiting.make(0, "job", job("queued"));
    waiting.make(1, "job", job("running"));
    waiting.make(1, "job", job("retry_wait"));
    assert_eq!(waiting.start(id(1, 9), RUNNING), at(2, run_start));
    // A finished job: its final event as the cursor ends the stream.
    let last = feed.make(2, "job", job("failed")).expect("kept").id;
    let finished = JobEnd {
        finished: true,
        final_id: Some(last),
    };
    assert_eq!(feed.start(Some(last), finished), Start::Over);
    assert_eq!(feed.start(id(2, 1), finished), at(6, kept));
    assert_eq!(feed.start(id(1, 40), finished), at(5, run_start));
    // Its events gone: the final event alone, whatever the cursor.
    let gone = Feed::loaded();
    assert_eq!(
        gone.start(id(1, 40), finished),
        Start::FinalAlone {
            from: Some(ResumedFrom::Final)
        }
    );
    assert_eq!(gone.start(None, finished), Start::FinalAlone { from: None });
    assert_eq!(gone.start(Some(last), finished), Start::Over);
    // A job whose events a restart dropped, not finished: live.
    assert_eq!(gone.start(id(1, 4), RUNNING), at(0, run_start));
}

#[test]
fn a_feed_read_from_redis_skips_entries_it_has() {
    let feed = Feed::default();
    assert_eq!(feed.entry(), (None, false));
    let kept = |seq| Kept::new(EventId { run: 1, seq }, "delta", delta());
    feed.extend(vec![((5, 0), kept(1)), ((5, 1), kept(2))]);
    feed.extend(vec![((5, 1), kept(2)), ((6, 0), kept(3))]);
    let ids: Vec<String> = feed.read(0, 10).iter().map(|e| e.id.to_string()).collect();
    assert_eq!(ids, ["1.1", "1.2", "1.3"]);
    assert_eq!(feed.entry(), (Some((6, 0)), true));
}

#[test]
fn a_first_event_written_late_is_refused_and_one_written_first_comes_first() {
    // A runner that claimed the job before its submit wrote `queued` writes it
    // first (`make_first`); the submit's own comes later and is refused.
    let feed = Feed::loaded();
    assert!(feed.make_first(0, "job", job("queued")).is_some());
    feed.make(1, "job", job("running"));
    assert!(
        feed.make(0, "job", job("queued")).is_none(),
        "older than the run's"
    );
    assert!(
        feed.make_first(0, "job", job("queued")).is_none(),
        "not first any more"
    );
    let ids: Vec<String> = feed.read(0, 10).iter().map(|k| k.id.to_string()).collect();
    assert_eq!(ids, ["0.1", "1.1"]);
}

#[test]
fn a_cursor_past_every_event_held_is_behind_and_one_held_is_not() {
    let feed = Feed::loaded();
    let id = |run, seq| EventId { run, seq };
    assert!(feed.behind(id(0, 1)), "an empty copy is behind any cursor");
    feed.make(0, "job", job("queued"));
    assert!(!feed.behind(id(0, 1)));
    assert!(feed.behind(id(1, 1)), "made elsewhere, not read here yet");
    feed.make(1, "job", job("running"));
    assert!(!feed.behind(id(1, 1)) && !feed.behind(id(0, 1)));
}
