//! A committed stream's bytes, written in as few writes as the chunks allow: an
//! OpenAI chunk stream's, and a Responses event stream's (`write` frames each
//! step).

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::{Bytes, BytesMut};
use futures_util::{Stream, StreamExt};

use super::step::Step;
use super::wire::put_event;
use crate::ops::facts::LateWord;

/// The committed stream's bytes: every step that is already decoded when the
/// client is ready for more is framed straight into one buffer and goes out in one
/// write. Under load that saves a syscall and a wake-up per chunk.
///
/// The commit itself (the head and the first output) goes out alone and at once:
/// hyper keeps asking the body for frames until it has none ready, and only then
/// writes, so without a pause every chunk the upstream had already sent (in a short
/// answer, the finish chunk and `[DONE]`) would be parsed before the first word
/// left. Time to first output is what a user waits on; it costs one more write
/// when more than the first chunk was waiting.
pub struct Batched<P, W> {
    progress: P,
    /// Frames each step into the buffer.
    write: W,
    /// Frames not yet handed out (first, the events held before the commit).
    out: BytesMut,
    ended: bool,
    commit: Commit,
    gather: Gather,
}

/// Whether to let other tasks run before a write, so that chunks the upstream
/// connection has already read join it.
///
/// reqwest's connection runs as a task of its own and hands the body over one
/// frame at a time: when several chunks arrived in one read, the relay sees one,
/// then "not ready" until that task runs again, and would write each chunk alone.
/// A pause (wake, then `Pending`, for up to `PAUSE_TURNS` turns of the scheduler:
/// one turn is measured not to be enough for the connection's task to hand over its
/// next frame) lets it run first; pauses go on while each brings a chunk. A first
/// pause that brings nothing (the next chunk is not there yet, as at low load) turns
/// pausing off for the next `SKIP_AFTER_IDLE` writes, so a quiet stream pays for
/// one pause in that many.
#[derive(Default)]
struct Gather {
    /// The pause in progress, if the last poll paused.
    paused: Option<Pause>,
    /// Writes left before pausing is tried again.
    skip: u8,
}

#[derive(Clone, Copy)]
struct Pause {
    /// The first pause of this write (a later one continues a run of chunks).
    first: bool,
    /// Scheduler turns this pause has lasted.
    turns: u8,
}

/// Turns a pause may last before the write goes out without more.
const PAUSE_TURNS: u8 = 2;
/// Writes without a pause after a first pause that brought nothing.
const SKIP_AFTER_IDLE: u8 = 8;
/// Pauses stop once a write holds this much.
const GATHER_BYTES: usize = 16 << 10;

impl Gather {
    /// Whether to pause (again) before writing `out`, given what this poll read
    /// (`steps`) and whether it ended on "not ready".
    fn pause(&mut self, steps: usize, pending: bool, out: &BytesMut) -> bool {
        let paused = self.paused.take();
        if let Some(pause) = paused
            && steps == 0
        {
            if pending && pause.turns < PAUSE_TURNS {
                self.paused = Some(Pause {
                    turns: pause.turns + 1,
                    ..pause
                });
                return true;
            }
            if pause.first {
                self.skip = SKIP_AFTER_IDLE;
            }
            return false;
        }
        if !pending || steps == 0 || out.len() >= GATHER_BYTES {
            return false;
        }
        let first = paused.is_none();
        if first && self.skip > 0 {
            self.skip -= 1;
            return false;
        }
        self.paused = Some(Pause { first, turns: 1 });
        true
    }
}

/// How far the commit frame is on its way out.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Commit {
    /// Held in `out`.
    Unsent,
    /// Handed to hyper; the next poll pauses once so hyper writes it.
    Handed,
    /// Written (or at least flushed to hyper's writer).
    Out,
}

/// Most steps joined into one write.
const MAX_BATCH: usize = 32;

impl<P, W> Stream for Batched<P, W>
where
    P: Stream + Unpin,
    W: Frames<P::Item> + Unpin,
{
    type Item = Bytes;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Bytes>> {
        let this = self.get_mut();
        match this.commit {
            Commit::Unsent => {
                this.commit = Commit::Handed;
                return Poll::Ready(Some(this.out.split().freeze()));
            }
            Commit::Handed => {
                this.commit = Commit::Out;
                cx.waker().wake_by_ref();
                return Poll::Pending;
            }
            Commit::Out => {}
        }
        let mut steps = 0;
        let mut pending = false;
        while !this.ended && steps < MAX_BATCH {
            match this.progress.poll_next_unpin(cx) {
                Poll::Ready(Some(step)) => this.write.put(&mut this.out, step),
                Poll::Ready(None) => this.ended = true,
                Poll::Pending => {
                    pending = true;
                    break;
                }
            }
            steps += 1;
        }
        if !this.out.is_empty() {
            if this.gather.pause(steps, pending, &this.out) {
                cx.waker().wake_by_ref();
                return Poll::Pending;
            }
            return Poll::Ready(Some(this.out.split().freeze()));
        }
        if this.ended {
            return Poll::Ready(None);
        }
        if steps == MAX_BATCH {
            // Only steps that write nothing came; let others run, then go on.
            cx.waker().wake_by_ref();
        }
        Poll::Pending
    }
}

/// What frames each step of a committed stream into its buffer.
pub trait Frames<T> {
    /// Writes what `step` sends (perhaps nothing) into `out`.
    fn put(&mut self, out: &mut BytesMut, step: T);
}

/// The frames of a committed OpenAI stream's later steps.
pub struct Chunks {
    /// Named in an error event's body.
    pub request_id: String,
    /// Told the code of an error event that ends the stream, for the request's log.
    pub failed: LateWord,
}

impl Frames<Step> for Chunks {
    fn put(&mut self, out: &mut BytesMut, step: Step) {
        match step {
            Step::Hold(raw) | Step::Output(raw) => put_event(out, &raw),
            Step::End(last) => out.extend_from_slice(&last),
            Step::Failed(error) => {
                self.failed.set(error.code());
                put_event(out, error.body(&self.request_id).to_string().as_bytes());
            }
            // The policy never retries a committed stream, so no new attempt
            // follows but a continuation, whose chunks simply go on.
            Step::Attempt(_) | Step::Void | Step::Continued => {}
        }
    }
}

impl<P, W> Batched<P, W> {
    /// The stream after its commit point: `held` (the events up to and including
    /// the first output) goes out first, alone; each later step is framed by
    /// `write`.
    pub fn new(progress: P, held: BytesMut, write: W) -> Self {
        Batched {
            progress,
            write,
            out: held,
            ended: false,
            commit: Commit::Unsent,
            gather: Gather::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use futures_util::stream;
    use futures_util::task::{ArcWake, waker};

    use super::*;

    struct Wakes(AtomicUsize);

    impl ArcWake for Wakes {
        fn wake_by_ref(this: &Arc<Self>) {
            this.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn chunk(raw: &'static str) -> Step {
        Step::Output(Bytes::from_static(raw.as_bytes()))
    }

    #[test]
    fn the_commit_goes_out_alone_before_chunks_already_waiting_are_read() {
        // Arrange: the commit is held, and two more chunks are ready at once.
        let read = Arc::new(AtomicUsize::new(0));
        let counted = Arc::clone(&read);
        let waiting = stream::iter([chunk("{\"n\":2}"), chunk("{\"n\":3}")]).inspect(move |_| {
            counted.fetch_add(1, Ordering::SeqCst);
        });
        let mut held = BytesMut::new();
        put_event(&mut held, b"{\"n\":1}");
        let mut body = Batched {
            progress: Box::pin(waiting),
            write: Chunks {
                request_id: "r".into(),
                failed: LateWord::default(),
            },
            out: held,
            ended: false,
            commit: Commit::Unsent,
            gather: Gather::default(),
        };
        let wakes = Arc::new(Wakes(AtomicUsize::new(0)));
        let waker = waker(Arc::clone(&wakes));
        let mut cx = Context::from_waker(&waker);
        let mut poll = || Pin::new(&mut body).poll_next(&mut cx);
        // Act + Assert: the commit alone, with nothing else read yet.
        assert_eq!(
            poll(),
            Poll::Ready(Some(Bytes::from_static(b"data: {\"n\":1}\n\n")))
        );
        assert_eq!(read.load(Ordering::SeqCst), 0);
        // A pause, so the server writes it; the body asks to be polled again.
        assert_eq!(poll(), Poll::Pending);
        assert_eq!(wakes.0.load(Ordering::SeqCst), 1);
        // Then whatever is ready goes out in one frame, and the body ends.
        assert_eq!(
            poll(),
            Poll::Ready(Some(Bytes::from_static(
                b"data: {\"n\":2}\n\ndata: {\"n\":3}\n\n"
            )))
        );
        assert_eq!(read.load(Ordering::SeqCst), 2);
        assert_eq!(poll(), Poll::Ready(None));
    }

    /// A progress source as reqwest's body is: each chunk is ready only after the
    /// connection's task has run once (`None` = "not ready yet").
    fn scripted(steps: Vec<Option<&'static str>>) -> impl Stream<Item = Step> + Unpin {
        let mut steps = std::collections::VecDeque::from(steps);
        stream::poll_fn(move |cx| match steps.pop_front() {
            Some(Some(raw)) => Poll::Ready(Some(chunk(raw))),
            Some(None) => {
                cx.waker().wake_by_ref();
                Poll::Pending
            }
            None => Poll::Pending,
        })
    }

    fn committed(
        progress: impl Stream<Item = Step> + Unpin,
    ) -> Batched<impl Stream<Item = Step> + Unpin, Chunks> {
        Batched {
            progress,
            write: Chunks {
                request_id: "r".into(),
                failed: LateWord::default(),
            },
            out: BytesMut::new(),
            ended: false,
            commit: Commit::Out,
            gather: Gather::default(),
        }
    }

    #[test]
    fn chunks_that_arrive_one_task_run_apart_go_out_in_one_write() {
        let mut body = committed(scripted(vec![
            Some("1"),
            None,
            Some("2"),
            None,
            Some("3"),
            None,
            None,
        ]));
        let waker = futures_util::task::noop_waker();
        let mut cx = Context::from_waker(&waker);
        let mut poll = || Pin::new(&mut body).poll_next(&mut cx);
        assert_eq!(poll(), Poll::Pending, "pauses after the first chunk");
        assert_eq!(poll(), Poll::Pending, "the pause brought one: pause again");
        assert_eq!(poll(), Poll::Pending, "and again");
        assert_eq!(poll(), Poll::Pending, "a pause lasts up to two turns");
        assert_eq!(
            poll(),
            Poll::Ready(Some(Bytes::from_static(
                b"data: 1\n\ndata: 2\n\ndata: 3\n\n"
            )))
        );
    }

    #[test]
    fn a_pause_that_brings_nothing_turns_pausing_off_for_a_while() {
        let mut script = vec![Some("1"), None, None, None];
        for _ in 0..SKIP_AFTER_IDLE {
            script.extend([None, Some("x"), None]);
        }
        script.extend([None, Some("y"), None]);
        let mut body = committed(scripted(script));
        let waker = futures_util::task::noop_waker();
        let mut cx = Context::from_waker(&waker);
        let mut poll = || Pin::new(&mut body).poll_next(&mut cx);
        assert_eq!(poll(), Poll::Pending, "the first chunk: a pause is tried");
        assert_eq!(poll(), Poll::Pending, "its second turn");
        assert_eq!(
            poll(),
            Poll::Ready(Some(Bytes::from_static(b"data: 1\n\n")))
        );
        for _ in 0..SKIP_AFTER_IDLE {
            assert_eq!(poll(), Poll::Pending, "nothing ready");
            assert_eq!(
                poll(),
                Poll::Ready(Some(Bytes::from_static(b"data: x\n\n"))),
                "written at once, no pause"
            );
        }
        assert_eq!(poll(), Poll::Pending, "nothing ready");
        assert_eq!(poll(), Poll::Pending, "pausing is tried again");
    }
}
