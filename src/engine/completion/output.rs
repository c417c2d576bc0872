//! A task's normalized output, held as the JSON text it is sent as.
//!
//! An answer is written once and may be sent many times (a kept answer, on every
//! hit). Held as a `Value`, each send escaped its every character again: for a
//! recipe that was most of a cache hit's work. As text it is written once, where
//! it is made, and every answer that carries it copies it in as it is.

use std::fmt;
use std::sync::Arc;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;
use serde_json::value::RawValue;

/// The output as JSON text; cloning it shares the text.
#[derive(Clone)]
pub struct Output(Arc<RawValue>);

impl Output {
    /// `value` written as JSON.
    pub fn of(value: &Value) -> Output {
        // A `Value` always serializes; its text is always valid JSON.
        let text =
            serde_json::value::to_raw_value(value).unwrap_or_else(|_| RawValue::NULL.to_owned());
        Output(Arc::from(text))
    }

    /// The JSON text.
    pub fn json(&self) -> &str {
        self.0.get()
    }

    /// Read back as a `Value`.
    pub fn value(&self) -> Value {
        serde_json::from_str(self.json()).unwrap_or(Value::Null)
    }
}

impl PartialEq for Output {
    fn eq(&self, other: &Output) -> bool {
        self.json() == other.json()
    }
}

impl fmt::Debug for Output {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.json())
    }
}

impl Serialize for Output {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for Output {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Output, D::Error> {
        Box::<RawValue>::deserialize(deserializer).map(|text| Output(Arc::from(text)))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn it_is_sent_as_the_json_it_was_made_from() {
        let value = json!({"title": "宫保鸡丁", "steps": ["切\"丁\"", 2]});
        let output = Output::of(&value);
        assert_eq!(
            output.json(),
            serde_json::to_string(&value).expect("writes")
        );
        assert_eq!(output.value(), value);
        // Carried in a body, it is copied in as it is, or read back for a store.
        #[derive(Serialize)]
        struct Body<'a> {
            output: &'a Output,
        }
        let body = Body { output: &output };
        let sent = serde_json::to_string(&body).expect("writes");
        assert_eq!(sent, format!(r#"{{"output":{}}}"#, output.json()));
        assert_eq!(
            serde_json::to_value(&body).expect("reads back")["output"],
            value
        );
        let back: Output = serde_json::from_str(output.json()).expect("reads");
        assert_eq!(back, output);
    }
}
