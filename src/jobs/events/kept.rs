//! One event of a job's stream as it is kept: its id, name and data, and the SSE
//! frame made of them once, which every reader writes as it is (a reference
//! count, never a copy per reader).

use std::fmt;

use bytes::Bytes;
use serde::Deserialize;

use crate::jobs::JobStatus;

/// An event's id, `{run}.{seq}` (contract 11.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct EventId {
    /// The job's `runs` when the event was made (`0` before its first run).
    pub run: u32,
    /// 1, 2, 3 … within that run, without gaps.
    pub seq: u32,
}

impl EventId {
    /// The id a cursor names: two runs of 1–10 ASCII digits around one dot, no
    /// sign (leading zeros ignored); `None` for anything else, or a number past
    /// what an id can hold (no event has it, so it names none).
    pub fn parse(text: &str) -> Result<Option<EventId>, Malformed> {
        let (run, seq) = text.split_once('.').ok_or(Malformed)?;
        let number = |part: &str| -> Result<Option<u32>, Malformed> {
            let digits = (1..=10).contains(&part.len()) && part.bytes().all(|b| b.is_ascii_digit());
            match digits {
                true => Ok(part.parse::<u64>().ok().and_then(|n| u32::try_from(n).ok())),
                false => Err(Malformed),
            }
        };
        Ok(match (number(run)?, number(seq)?) {
            (Some(run), Some(seq)) => Some(EventId { run, seq }),
            _ => None,
        })
    }
}

/// A cursor that is not `{run}.{seq}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Malformed;

impl fmt::Display for EventId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.run, self.seq)
    }
}

/// What an event is, as far as resuming cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A `job` event: the job at a change of status.
    Job(JobStatus),
    /// One of a run's events.
    Run,
}

/// A kept event.
#[derive(Debug)]
pub struct Kept {
    /// Its id.
    pub id: EventId,
    /// Its name (`job`, `attempt`, `delta`, …).
    pub name: Box<str>,
    /// Its data: a JSON object's text.
    pub data: Bytes,
    /// What it is.
    pub kind: Kind,
    /// `id:`, `event:` and `data:` lines, written once.
    pub frame: Bytes,
}

impl Kept {
    /// The event `id` named `name` with `data`.
    pub fn new(id: EventId, name: &str, data: Bytes) -> Kept {
        let kind = match name {
            "job" => job_status(&data).map_or(Kind::Run, Kind::Job),
            _ => Kind::Run,
        };
        let mut frame = Vec::with_capacity(data.len() + name.len() + 32);
        frame.extend_from_slice(format!("id: {id}\nevent: {name}\ndata: ").as_bytes());
        frame.extend_from_slice(&data);
        frame.extend_from_slice(b"\n\n");
        Kept {
            id,
            name: name.into(),
            data,
            kind,
            frame: frame.into(),
        }
    }

    /// Whether this is the job's final `job` event.
    pub fn is_final(&self) -> bool {
        matches!(self.kind, Kind::Job(status) if status.finished())
    }
}

/// The status a `job` event's data shows.
fn job_status(data: &[u8]) -> Option<JobStatus> {
    #[derive(Deserialize)]
    struct Status<'a> {
        #[serde(borrow)]
        status: std::borrow::Cow<'a, str>,
    }
    let seen: Status<'_> = serde_json::from_slice(data).ok()?;
    JobStatus::from_name(&seen.status)
}

/// A `progress` event's frame: sent live only, so it has no `id:`.
pub fn progress_frame(data: &[u8]) -> Bytes {
    let mut frame = Vec::with_capacity(data.len() + 32);
    frame.extend_from_slice(b"event: progress\ndata: ");
    frame.extend_from_slice(data);
    frame.extend_from_slice(b"\n\n");
    frame.into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_are_two_runs_of_digits() {
        let id = |run, seq| Ok(Some(EventId { run, seq }));
        assert_eq!(EventId::parse("1.3"), id(1, 3));
        assert_eq!(EventId::parse("0001.0003"), id(1, 3));
        assert_eq!(EventId::parse("0.1"), id(0, 1));
        assert_eq!(EventId::parse("9999999999.1"), Ok(None), "names no event");
        for bad in [
            "",
            ".",
            "1.",
            ".1",
            "1.2.3",
            "+1.2",
            "-1.2",
            "1.2 ",
            "a.b",
            "12345678901.1",
            "１.２",
        ] {
            assert_eq!(EventId::parse(bad), Err(Malformed), "{bad:?}");
        }
    }

    #[test]
    fn a_kept_event_is_framed_once_and_knows_a_final_job_event() {
        let data = Bytes::from_static(br#"{"id":"job_x","status":"succeeded"}"#);
        let kept = Kept::new(EventId { run: 1, seq: 9 }, "job", data);
        assert_eq!(
            kept.frame.as_ref(),
            b"id: 1.9\nevent: job\ndata: {\"id\":\"job_x\",\"status\":\"succeeded\"}\n\n"
        );
        assert!(kept.is_final());
        let running = Kept::new(
            EventId { run: 1, seq: 1 },
            "job",
            Bytes::from_static(br#"{"status":"running"}"#),
        );
        assert_eq!(running.kind, Kind::Job(JobStatus::Running));
        assert!(!running.is_final());
        let delta = Kept::new(
            EventId { run: 1, seq: 2 },
            "delta",
            Bytes::from_static(b"{}"),
        );
        assert_eq!(delta.kind, Kind::Run);
    }
}
