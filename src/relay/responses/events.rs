//! A completion's progress as the Responses API's events (contract 12): item and
//! content-part bookkeeping, and `sequence_number` from 0 without gaps. Reasoning
//! is a `reasoning` item, the text one `message` item; a retry that voids text
//! closes the voided item `incomplete` and the next text starts a new one; a
//! continuation (11.4) simply goes on.

use serde_json::{Value, json};

use super::object::{Made, Status, item_id, message_item, reasoning_item, text_part};
use crate::engine::completion::Progress;
use crate::error::ApiError;

/// One event: its `type`, its number and its data's JSON text (which repeats
/// both), written once.
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    /// The `type`, also the SSE `event:` name.
    pub kind: &'static str,
    /// Its `sequence_number`.
    pub sequence: u64,
    /// The data's JSON text, `type` and `sequence_number` included.
    pub data: String,
}

impl Event {
    /// The SSE frame: `event:` and `data:` lines (JSON text has no newline).
    pub fn frame(&self) -> bytes::Bytes {
        let mut frame = String::with_capacity(self.data.len() + self.kind.len() + 16);
        frame.push_str("event: ");
        frame.push_str(self.kind);
        frame.push_str("\ndata: ");
        frame.push_str(&self.data);
        frame.push_str("\n\n");
        frame.into()
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
                let object = self.made.object(&Status::Queued, Vec::new(), None);
                out.push(self.event("response.created", json!({"response": object})));
                out.push(self.event("response.queued", json!({"response": object})));
            }
            ("job", Some("queued" | "retry_wait")) => {
                self.void(&mut out);
                let object = self.made.object(&Status::Queued, Vec::new(), None);
                out.push(self.event("response.queued", json!({"response": object})));
            }
            ("job", Some("running")) => {
                let object = self.made.object(&Status::InProgress, Vec::new(), None);
                out.push(self.event("response.in_progress", json!({"response": object})));
            }
            ("job", Some("succeeded")) => self.complete(&mut out, data["result"].clone()),
            ("job", Some(ended @ ("failed" | "canceled"))) => {
                self.void(&mut out);
                let status = match ended {
                    "failed" => Status::failed(&data["error"]),
                    _ => Status::Cancelled,
                };
                let object = self.made.object(&status, Vec::new(), None);
                out.push(self.ended(object));
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
        let kind = match object["status"].as_str() {
            Some("completed") => "response.completed",
            Some("incomplete") => "response.incomplete",
            _ => "response.failed",
        };
        self.event(kind, json!({"response": object}))
    }

    /// Closes the answer's message (opening an empty one if it wrote none)
    /// and ends with `object`, its output the items this stream made.
    fn complete(&mut self, out: &mut Vec<Event>, mut object: Value) {
        if self.open != Some(Open::Message) {
            self.write(out, Open::Message, "");
        }
        self.close(out, "completed");
        object["output"] = Value::Array(std::mem::take(&mut self.done));
        out.push(self.ended(object));
    }

    /// Every event of a finished response whose whole `object` was kept,
    /// from `response.created` on (a repeat under its idempotency key): its
    /// items written as one delta each.
    pub fn replayed(object: Value) -> Option<Vec<Event>> {
        let mut events = Events::new(Made::of_object(&object)?);
        let mut out = events.start();
        for item in object["output"].as_array().into_iter().flatten() {
            let kind = match item["type"].as_str() {
                Some("reasoning") => Open::Reasoning,
                _ => Open::Message,
            };
            let text = item["content"][0]["text"].as_str().unwrap_or_default();
            events.write(&mut out, kind, text);
        }
        events.complete(&mut out, object);
        Some(out)
    }

    /// `response.created` and `response.in_progress`.
    pub fn start(&mut self) -> Vec<Event> {
        let object = self.made.object(&Status::InProgress, Vec::new(), None);
        vec![
            self.event("response.created", json!({"response": object})),
            self.event("response.in_progress", json!({"response": object})),
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
                let object = self.made.finished(finished);
                self.complete(&mut out, object);
            }
            Progress::Failed(gave_up) => {
                let error = ApiError::from(gave_up.clone()).body("");
                let status = Status::failed(&error["error"]);
                let object = self
                    .made
                    .object(&status, std::mem::take(&mut self.done), None);
                out.push(self.ended(object));
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
        let id = self.id(kind);
        let delta = serde_json::to_string(delta).unwrap_or_default();
        let sequence = self.sequence;
        self.sequence += 1;
        let data = format!(
            r#"{{"item_id":"{id}","output_index":{},"content_index":0,"delta":{delta}{logprobs},"type":"{name}","sequence_number":{sequence}}}"#,
            self.index
        );
        Event {
            kind: name,
            sequence,
            data,
        }
    }

    fn begin(&mut self, out: &mut Vec<Event>, kind: Open) {
        self.output_began = true;
        self.open = Some(kind);
        self.text.clear();
        let id = self.id(kind);
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
        Event {
            kind,
            sequence,
            data: data.to_string(),
        }
    }
}
