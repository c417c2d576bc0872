//! A completion's progress as the Responses API's events (contract 12): item and
//! content-part bookkeeping, and `sequence_number` from 0 without gaps. Reasoning
//! is a `reasoning` item, the text one `message` item; a retry that voids text
//! closes the voided item `incomplete` and the next text starts a new one; a
//! continuation (11.4) simply goes on.

use serde_json::{Value, json};

use super::object::{Made, Status, item_id, message_item, reasoning_item, text_part};
use crate::engine::completion::{Finished, Progress};
use crate::error::ApiError;

/// One event: its `type`, its number and its SSE frame, written once.
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    /// The `type`, also the SSE `event:` name.
    pub kind: &'static str,
    /// Its `sequence_number`.
    pub sequence: u64,
    /// `event:` and `data:` lines (the data's JSON text has no newline).
    frame: bytes::Bytes,
}

impl Event {
    /// The event whose data's JSON text `write` writes (its `type` and
    /// `sequence_number` included), framed as it is written.
    fn framed(
        kind: &'static str,
        sequence: u64,
        size: usize,
        write: impl FnOnce(&mut Vec<u8>),
    ) -> Event {
        let mut frame = Vec::with_capacity(size + kind.len() + 16);
        frame.extend_from_slice(b"event: ");
        frame.extend_from_slice(kind.as_bytes());
        frame.extend_from_slice(b"\ndata: ");
        write(&mut frame);
        frame.extend_from_slice(b"\n\n");
        Event {
            kind,
            sequence,
            frame: frame.into(),
        }
    }

    /// The SSE frame.
    pub fn frame(&self) -> bytes::Bytes {
        self.frame.clone()
    }
}

/// The item being written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Open {
    Reasoning,
    Message,
}

/// The renderer of one response's events.
#[derive(Debug)]
pub struct Events {
    made: Made,
    sequence: u64,
    /// Items done (for the final object), in order.
    done: Vec<Value>,
    /// The item being written, at `index`, with its text so far.
    open: Option<Open>,
    index: usize,
    text: String,
    /// The open item's id.
    open_id: String,
    /// Whether any output item has begun (the commit point of a stream).
    output_began: bool,
    /// Whether `response.created` went out (a job log's first event).
    created: bool,
}

impl Events {
    /// The renderer of `made`'s events.
    pub fn new(made: Made) -> Events {
        Events {
            made,
            sequence: 0,
            done: Vec::new(),
            open: None,
            index: 0,
            text: String::new(),
            open_id: String::new(),
            output_began: false,
            created: false,
        }
    }

    /// Whether an output item has begun.
    pub fn output_began(&self) -> bool {
        self.output_began
    }

    /// The events one kept event of a background response's job log becomes
    /// (contract 12, 11.1): its `job` events set the response's status, its
    /// run's events are rendered as a stream's. Read from the log's start, the
    /// same log gives the same events with the same numbers on every replica.
    pub fn on_logged(&mut self, name: &str, data: &Value) -> Vec<Event> {
        let mut out = Vec::new();
        match (name, data["status"].as_str()) {
            ("job", Some("queued")) if !self.created => {
                self.created = true;
                let object = self.made.object_text(&Status::Queued, "[]", None);
                out.push(self.carrying("response.created", &object));
                out.push(self.carrying("response.queued", &object));
            }
            ("job", Some("queued" | "retry_wait")) => {
                self.void(&mut out);
                let object = self.made.object_text(&Status::Queued, "[]", None);
                out.push(self.carrying("response.queued", &object));
            }
            ("job", Some("running")) => {
                let object = self.made.object_text(&Status::InProgress, "[]", None);
                out.push(self.carrying("response.in_progress", &object));
            }
            ("job", Some("succeeded")) => self.complete(&mut out, data["result"].clone()),
            ("job", Some(ended @ ("failed" | "canceled"))) => {
                self.void(&mut out);
                let status = match ended {
                    "failed" => Status::failed(&data["error"]),
                    _ => Status::Cancelled,
                };
                let object = self.made.object_text(&status, "[]", None);
                out.push(self.last(status.name(), &object));
            }
            ("delta", _) => {
                if let Some(reasoning) = data["reasoning"].as_str() {
                    self.write(&mut out, Open::Reasoning, reasoning);
                }
                if let Some(content) = data["content"].as_str() {
                    self.write(&mut out, Open::Message, content);
                }
            }
            ("reset" | "error", _) => self.void(&mut out),
            _ => {}
        }
        out
    }

    /// The last event, named after the whole `object`'s status: alone, it is
    /// what a finished response whose events are gone sends.
    pub fn ended(&mut self, object: Value) -> Event {
        let status = object["status"].as_str().unwrap_or_default().to_owned();
        self.last(&status, &object.to_string())
    }

    /// The last event of an object in `status`, given as its JSON text.
    fn last(&mut self, status: &str, object: &str) -> Event {
        let kind = match status {
            "completed" => "response.completed",
            "incomplete" => "response.incomplete",
            _ => "response.failed",
        };
        self.carrying(kind, object)
    }

    /// Closes the answer's message (opening an empty one if it wrote none)
    /// and ends with `object`, its output the items this stream made.
    fn complete(&mut self, out: &mut Vec<Event>, mut object: Value) {
        self.close_answer(out);
        object["output"] = Value::Array(std::mem::take(&mut self.done));
        out.push(self.ended(object));
    }

    /// Closes the answer's message, opening an empty one if it wrote none.
    fn close_answer(&mut self, out: &mut Vec<Event>) {
        if self.open != Some(Open::Message) {
            self.write(out, Open::Message, "");
        }
        self.close(out, "completed");
    }

    /// The object in `status`, with the items done so far, as JSON text.
    fn object_now(&mut self, status: &Status, usage: Option<&Value>) -> String {
        let output = Value::Array(std::mem::take(&mut self.done)).to_string();
        self.made.object_text(status, &output, usage)
    }

    /// An event whose data is the object (`{"response": …}`), given as text.
    fn carrying(&mut self, kind: &'static str, object: &str) -> Event {
        let sequence = self.sequence;
        self.sequence += 1;
        Event::framed(kind, sequence, object.len() + 64, |frame| {
            frame.extend_from_slice(b"{\"response\":");
            frame.extend_from_slice(object.as_bytes());
            let tail = format!(r#","type":"{kind}","sequence_number":{sequence}}}"#);
            frame.extend_from_slice(tail.as_bytes());
        })
    }

    /// Every event of a finished response, from `response.created` on (a
    /// kept one, replayed to a repeat under its idempotency key): its reasoning
    /// and its text written as one delta each.
    pub fn replayed(made: Made, finished: &Finished) -> Vec<Event> {
        let object = made.finished(finished);
        let mut events = Events::new(made);
        let mut out = events.start();
        let choice = finished.choices.iter().find(|c| c.index == 0);
        let reasoning = choice.map_or("", |c| c.reasoning.as_str());
        if !reasoning.is_empty() {
            events.write(&mut out, Open::Reasoning, reasoning);
        }
        let text = choice.map_or("", |c| c.content.as_str());
        events.write(&mut out, Open::Message, text);
        events.complete(&mut out, object);
        out
    }

    /// `response.created` and `response.in_progress`.
    pub fn start(&mut self) -> Vec<Event> {
        let object = self.made.object_text(&Status::InProgress, "[]", None);
        vec![
            self.carrying("response.created", &object),
            self.carrying("response.in_progress", &object),
        ]
    }

    /// The events one step of progress becomes.
    pub fn on(&mut self, step: &Progress) -> Vec<Event> {
        let mut out = Vec::new();
        match step {
            Progress::Chunk(received) => {
                let choice = &received.chunk.first;
                if let Some(reasoning) = &choice.reasoning {
                    self.write(&mut out, Open::Reasoning, reasoning);
                }
                if let Some(content) = &choice.content {
                    self.write(&mut out, Open::Message, content);
                }
            }
            Progress::Retry { output_began, .. } if *output_began => self.void(&mut out),
            Progress::Finished(finished) => {
                self.close_answer(&mut out);
                let status = Made::ended_as(finished);
                let object = self.object_now(&status, finished.usage.as_ref());
                out.push(self.last(status.name(), &object));
            }
            Progress::Failed(gave_up) => {
                let error = ApiError::from(gave_up.clone()).body("");
                let status = Status::failed(&error["error"]);
                let object = self.object_now(&status, None);
                out.push(self.last(status.name(), &object));
            }
            Progress::Attempt(_) | Progress::Retry { .. } | Progress::Continue { .. } => {}
        }
        out
    }

    /// Writes `delta` into an item of `kind`, opening it (and closing another)
    /// first when needed.
    fn write(&mut self, out: &mut Vec<Event>, kind: Open, delta: &str) {
        if self.open != Some(kind) {
            if self.open.is_some() {
                self.close(out, "completed");
            }
            self.begin(out, kind);
        }
        if delta.is_empty() {
            return;
        }
        self.text.push_str(delta);
        out.push(self.delta_event(kind, delta));
    }

    /// A delta event, written straight as text: the per-chunk path builds no
    /// JSON tree.
    fn delta_event(&mut self, kind: Open, delta: &str) -> Event {
        let (name, logprobs) = match kind {
            Open::Reasoning => ("response.reasoning_text.delta", ""),
            Open::Message => ("response.output_text.delta", r#","logprobs":[]"#),
        };
        let sequence = self.sequence;
        self.sequence += 1;
        let (id, index) = (&self.open_id, self.index);
        Event::framed(name, sequence, delta.len() + 160, |frame| {
            let head =
                format!(r#"{{"item_id":"{id}","output_index":{index},"content_index":0,"delta":"#);
            frame.extend_from_slice(head.as_bytes());
            // A string always serializes.
            let _ = serde_json::to_writer(&mut *frame, delta);
            let tail = format!(r#"{logprobs},"type":"{name}","sequence_number":{sequence}}}"#);
            frame.extend_from_slice(tail.as_bytes());
        })
    }

    fn begin(&mut self, out: &mut Vec<Event>, kind: Open) {
        self.output_began = true;
        self.open = Some(kind);
        self.text.clear();
        let id = self.id(kind);
        self.open_id.clone_from(&id);
        let item = match kind {
            Open::Reasoning => json!({"type": "reasoning", "id": id, "summary": [], "content": []}),
            Open::Message => {
                json!({"type": "message", "id": id, "status": "in_progress", "role": "assistant", "content": []})
            }
        };
        out.push(self.event(
            "response.output_item.added",
            json!({"output_index": self.index, "item": item}),
        ));
        if kind == Open::Message {
            out.push(self.event(
                "response.content_part.added",
                json!({"item_id": id, "output_index": self.index, "content_index": 0, "part": text_part("")}),
            ));
        }
    }

    /// Ends the open item with `status`; a completed one is kept for the final
    /// object.
    fn close(&mut self, out: &mut Vec<Event>, status: &str) {
        let Some(kind) = self.open.take() else { return };
        let id = self.id(kind);
        let item = match kind {
            Open::Reasoning => {
                let mut item = reasoning_item(&id, &self.text);
                if status != "completed" {
                    item["status"] = status.into();
                }
                item
            }
            Open::Message => {
                let (index, text) = (self.index, self.text.clone());
                out.push(self.event(
                    "response.output_text.done",
                    json!({"item_id": id, "output_index": index, "content_index": 0, "text": text, "logprobs": []}),
                ));
                out.push(self.event(
                    "response.content_part.done",
                    json!({"item_id": id, "output_index": index, "content_index": 0, "part": text_part(&text)}),
                ));
                message_item(&id, &text, status)
            }
        };
        out.push(self.event(
            "response.output_item.done",
            json!({"output_index": self.index, "item": item}),
        ));
        if status == "completed" {
            self.done.push(item);
        }
        self.index += 1;
    }

    /// A retry voids what this attempt wrote: its item ends `incomplete`, and
    /// what it had finished before is no longer the answer's.
    fn void(&mut self, out: &mut Vec<Event>) {
        self.close(out, "incomplete");
        self.done.clear();
    }

    fn id(&self, kind: Open) -> String {
        let prefix = match kind {
            Open::Reasoning => "rs",
            Open::Message => "msg",
        };
        item_id(prefix, &self.made.id, self.index)
    }

    fn event(&mut self, kind: &'static str, mut data: Value) -> Event {
        let sequence = self.sequence;
        self.sequence += 1;
        data["type"] = kind.into();
        data["sequence_number"] = sequence.into();
        // A `Value` always serializes.
        Event::framed(kind, sequence, 256, |frame| {
            let _ = serde_json::to_writer(frame, &data);
        })
    }
}
