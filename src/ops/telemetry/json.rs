//! `LADLE_LOG_FORMAT=json`: one JSON object per line, the event's fields at the
//! top level beside `timestamp`, `level` and `target`.
//!
//! Ours rather than tracing-subscriber's because a log line sometimes has to say
//! `null` (a job's creation line has `"from": null`, contract 7.4) and tracing
//! has no null. ladle never logs raw bytes, so the empty byte string `NULL` is
//! the one way to say it: no text a client or an upstream sends can forge it.

use std::fmt;

use serde_json::{Map, Value};
use tracing::field::{Field, Visit};
use tracing::{Event, Subscriber};
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
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
        _ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        writeln!(writer, "{}", Value::Object(line(event)))
    }
}

/// The event as a JSON object.
fn line(event: &Event<'_>) -> Map<String, Value> {
    let metadata = event.metadata();
    let mut fields = Fields(Map::new());
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

    #[test]
    fn fields_keep_their_types_and_null_is_null() {
        let buffer = Buffer::default();
        let subscriber = tracing_subscriber::fmt()
            .event_format(JsonLines)
            .with_writer(buffer.clone())
            .finish();
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
