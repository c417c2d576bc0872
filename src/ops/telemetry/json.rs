//! `LADLE_LOG_FORMAT=json`: one JSON object per line, the event's fields at the
//! top level beside `timestamp`, `level` and `target`, with the fields of the
//! spans it is inside (a completion's request id, route and job, say: the edge
//! names them once, and nothing under it carries them to its log lines).
//!
//! Ours rather than tracing-subscriber's because a log line sometimes has to say
//! `null` (a job's creation line has `"from": null`, contract 7.4) and tracing
//! has no null. ladle never logs raw bytes, so the empty byte string `NULL` is
//! the one way to say it: no text a client or an upstream sends can forge it.

use std::fmt;

use serde_json::{Map, Value};
use tracing::field::{Field, Visit};
use tracing::span::Record;
use tracing::{Event, Subscriber};
use tracing_subscriber::field::RecordFields;
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields, FormattedFields};
use tracing_subscriber::registry::LookupSpan;

use crate::wall::{rfc3339, unix_millis};

/// A field's value that is JSON `null`: `from = NULL`.
pub const NULL: &[u8] = &[];

/// Formats each event as one JSON line.
pub struct JsonLines;

impl<S, N> FormatEvent<S, N> for JsonLines
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        // The outermost span's first: an inner span's field, then the event's
        // own, takes the place of one of the same name.
        let mut fields = Map::new();
        for span in ctx
            .event_scope()
            .into_iter()
            .flat_map(|scope| scope.from_root())
        {
            if let Some(written) = span.extensions().get::<FormattedFields<N>>()
                && let Ok(Value::Object(its)) = serde_json::from_str(written)
            {
                fields.extend(its);
            }
        }
        writeln!(writer, "{}", Value::Object(line(event, fields)))
    }
}

/// A span's fields as a JSON object's text, for `JsonLines` to spread into each
/// line written inside it.
pub struct SpanFields;

impl<'w> FormatFields<'w> for SpanFields {
    fn format_fields<R: RecordFields>(&self, mut writer: Writer<'w>, fields: R) -> fmt::Result {
        let mut visited = Fields(Map::new());
        fields.record(&mut visited);
        write!(writer, "{}", Value::Object(visited.0))
    }

    fn add_fields(
        &self,
        current: &'w mut FormattedFields<Self>,
        fields: &Record<'_>,
    ) -> fmt::Result {
        let mut visited = match serde_json::from_str(current) {
            Ok(Value::Object(had)) => Fields(had),
            _ => Fields(Map::new()),
        };
        fields.record(&mut visited);
        current.fields = Value::Object(visited.0).to_string();
        Ok(())
    }
}

/// The event as a JSON object, over the fields of the spans it is in.
fn line(event: &Event<'_>, spans: Map<String, Value>) -> Map<String, Value> {
    let metadata = event.metadata();
    let mut fields = Fields(spans);
    fields
        .0
        .insert("timestamp".into(), rfc3339(unix_millis()).into());
    fields
        .0
        .insert("level".into(), metadata.level().as_str().into());
    event.record(&mut fields);
    fields.0.insert("target".into(), metadata.target().into());
    fields.0
}

struct Fields(Map<String, Value>);

impl Fields {
    fn put(&mut self, field: &Field, value: Value) {
        self.0.insert(field.name().to_owned(), value);
    }
}

impl Visit for Fields {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.put(field, value.into());
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        self.put(field, value.into());
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        self.put(field, value.into());
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        self.put(field, value.into());
    }

    fn record_f64(&mut self, field: &Field, value: f64) {
        self.put(field, value.into());
    }

    fn record_bytes(&mut self, field: &Field, value: &[u8]) {
        let value = if value.is_empty() {
            Value::Null
        } else {
            format!("{value:02x?}").into()
        };
        self.put(field, value);
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.put(field, format!("{value:?}").into());
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use tracing_subscriber::fmt::MakeWriter;

    use super::*;

    #[derive(Clone, Default)]
    struct Buffer(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Buffer {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.lock().expect("buffer").extend_from_slice(bytes);
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl<'a> MakeWriter<'a> for Buffer {
        type Writer = Buffer;
        fn make_writer(&'a self) -> Buffer {
            self.clone()
        }
    }

    fn json_to(buffer: &Buffer) -> impl Subscriber + Send + Sync {
        tracing_subscriber::fmt()
            .event_format(JsonLines)
            .fmt_fields(SpanFields)
            .with_writer(buffer.clone())
            .finish()
    }

    fn lines(buffer: &Buffer) -> Vec<Value> {
        let text = String::from_utf8(buffer.0.lock().expect("buffer").clone()).expect("UTF-8");
        text.lines()
            .map(|line| serde_json::from_str(line).expect("a JSON line"))
            .collect()
    }

    #[test]
    fn a_lines_spans_lend_it_their_fields_and_its_own_come_first() {
        let buffer = Buffer::default();
        tracing::subscriber::with_default(json_to(&buffer), || {
            let outer = tracing::info_span!("completion", request_id = "req_1", route = "/a");
            let _outer = outer.enter();
            let inner =
                tracing::info_span!("attempt", route = "/b", job_id = tracing::field::Empty);
            inner.record("job_id", "job_1");
            let _inner = inner.enter();
            tracing::info!(attempt = 2u32, "attempt ended");
            tracing::info!(request_id = "own", "its own");
        });
        let lines = lines(&buffer);
        assert_eq!(lines.len(), 2, "{lines:?}");
        assert_eq!(lines[0]["request_id"], "req_1");
        assert_eq!(lines[0]["route"], "/b", "the inner span's");
        assert_eq!(lines[0]["job_id"], "job_1", "a field recorded later");
        assert_eq!(lines[0]["attempt"], 2);
        assert_eq!(lines[1]["request_id"], "own", "the line's own field");
        assert_eq!(lines[1]["message"], "its own");
    }

    #[test]
    fn fields_keep_their_types_and_null_is_null() {
        let buffer = Buffer::default();
        let subscriber = json_to(&buffer);
        tracing::subscriber::with_default(subscriber, || {
            let absent: Option<&str> = None;
            tracing::info!(
                job_id = "job_1",
                runs = 2u32,
                from = NULL,
                quoted = %"null",
                absent,
                flag = true,
                "job status changed"
            );
        });
        let text = String::from_utf8(buffer.0.lock().expect("buffer").clone()).expect("UTF-8");
        let line: Value = serde_json::from_str(text.trim()).expect("one JSON line");
        assert_eq!(line["message"], "job status changed");
        assert_eq!(
            (line["job_id"].as_str(), line["runs"].as_u64()),
            (Some("job_1"), Some(2))
        );
        assert!(line.get("from").is_some_and(Value::is_null), "{line}");
        assert_eq!(line["quoted"], "null", "text is never null");
        assert!(
            line.get("absent").is_none(),
            "an Option left out is left out"
        );
        assert_eq!(
            (line["level"].as_str(), line["flag"].as_bool()),
            (Some("INFO"), Some(true))
        );
        assert!(line["timestamp"].as_str().is_some_and(|t| t.ends_with('Z')));
        assert!(line["target"].is_string());
    }
}
