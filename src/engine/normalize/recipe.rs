//! Applies the recipe rules of contract 3.3 to the object a model wrote.
//!
//! Responsibility: check that the fields a client cannot do without are there,
//! and give `ingredients`, `steps` and `nutrition` one shape whatever keys the
//! model chose. Invariants:
//! - Fields other than those three pass through unchanged, and every object
//!   keeps the model's key order.
//! - `ingredients` is always a list of `{"name": string, "amount": string|null}`
//!   and `steps` always a list of strings. An entry that cannot be read that
//!   way (a `null`, a boolean, an object without any text) is left out rather
//!   than turned into a placeholder.
//! - Nutrition values become `"<n>克"`, an integer for calories, or `null`; a
//!   nutrition key the model did not write is not added.

use serde_json::{Map, Value};

use super::{InvalidOutput, numbers};

/// Fields a recipe must have, as present and non-null values.
const REQUIRED: [&str; 3] = ["title", "ingredients", "steps"];

/// Nutrition fields measured in grams.
const GRAM_FIELDS: [&str; 5] = ["protein", "fat", "carbs", "fiber", "sugar"];

/// Keys that may hold an ingredient's name, in order of preference.
const NAME_KEYS: [&str; 3] = ["name", "item", "ingredient"];

/// Keys that may hold an ingredient's amount, in order of preference.
const AMOUNT_KEYS: [&str; 3] = ["amount", "quantity", "qty"];

/// Keys that may hold a step's text, in order of preference; `step` comes last
/// because models often use it for the step's number instead.
const STEP_KEYS: [&str; 5] = ["text", "description", "content", "instruction", "step"];

/// Normalizes a recipe object: checks the required fields, then rewrites
/// `ingredients`, `steps` and `nutrition` (contract 3.3).
///
/// A missing or `null` `title`, `ingredients` or `steps` gives
/// [`InvalidOutput::MissingField`] naming the first one missing, in that order.
pub fn normalize_recipe(obj: Map<String, Value>) -> Result<Value, InvalidOutput> {
    if let Some(missing) = REQUIRED
        .iter()
        .find(|key| obj.get(**key).is_none_or(Value::is_null))
    {
        return Err(InvalidOutput::MissingField(missing));
    }
    let normalized = obj
        .into_iter()
        .map(|(key, value)| {
            let value = match key.as_str() {
                "ingredients" => ingredients(value),
                "steps" => steps(value),
                "nutrition" => nutrition(value),
                _ => value,
            };
            (key, value)
        })
        .collect();
    Ok(Value::Object(normalized))
}

/// Turns the model's `ingredients` into a list of `{"name", "amount"}` objects.
///
/// Besides the usual list, an object is accepted: either one ingredient (it has
/// a name key), or a map from name to amount, whose values may themselves be
/// lists for groups such as `{"主料": [...], "调料": [...]}`. Any other single
/// value is read as a list of one.
fn ingredients(value: Value) -> Value {
    let mut out = Vec::new();
    match value {
        Value::Array(items) => out.extend(items.into_iter().filter_map(ingredient)),
        Value::Object(map) if !has_any(&map, &NAME_KEYS) => {
            for (key, value) in map {
                match value {
                    Value::Array(items) => out.extend(items.into_iter().filter_map(ingredient)),
                    other => out.push(entry(key, text_of(&other))),
                }
            }
        }
        other => out.extend(ingredient(other)),
    }
    Value::Array(out)
}

/// Reads one ingredient entry, or gives `None` for an entry without a name.
fn ingredient(item: Value) -> Option<Value> {
    match item {
        Value::String(text) => ingredient_from_text(&text),
        Value::Object(map) => ingredient_from_object(&map),
        Value::Array(parts) => {
            // A pair such as `["鸭子", "1只"]`.
            let name = text_of(parts.first()?)?;
            Some(entry(name, parts.get(1).and_then(text_of)))
        }
        _ => None,
    }
}

/// Splits "鸭子 1只" at its last whitespace into name and amount; a text
/// without whitespace is all name.
fn ingredient_from_text(text: &str) -> Option<Value> {
    let text = text.trim();
    if text.is_empty() {
        return None;
    }
    let value = match text.char_indices().rev().find(|(_, c)| c.is_whitespace()) {
        Some((at, space)) => {
            let amount = text.get(at + space.len_utf8()..).unwrap_or_default().trim();
            let name = text.get(..at).unwrap_or_default().trim();
            entry(name.to_owned(), Some(amount.to_owned()))
        }
        None => entry(text.to_owned(), None),
    };
    Some(value)
}

/// Reads an ingredient object by its name and amount keys. A numeric amount
/// becomes its string form, and a string `unit` beside it is appended
/// (`{"amount": 1, "unit": "只"}` gives "1只"). An object without a name key
/// but with a single entry, as in `{"鸭子": "1只"}`, is read as name and amount.
fn ingredient_from_object(map: &Map<String, Value>) -> Option<Value> {
    let Some(name) = first_text(map, &NAME_KEYS) else {
        let mut entries = map.iter();
        return match (entries.next(), entries.next()) {
            (Some((key, value)), None) if !AMOUNT_KEYS.contains(&key.as_str()) => {
                Some(entry(key.clone(), text_of(value)))
            }
            _ => None,
        };
    };
    let unit = map.get("unit").and_then(Value::as_str).map(str::trim);
    let amount = first_text(map, &AMOUNT_KEYS).map(|amount| match unit {
        Some(unit) if !amount.ends_with(unit) => amount + unit,
        _ => amount,
    });
    Some(entry(name, amount))
}

/// Turns the model's `steps` into a list of strings.
///
/// Besides the usual list, a single step is read as a list of one, and an
/// object without step keys, such as `{"1": "…", "2": "…"}`, as its values.
fn steps(value: Value) -> Value {
    let items = match value {
        Value::Array(items) => items,
        Value::Object(map) if !has_any(&map, &STEP_KEYS) => {
            map.into_iter().map(|(_, v)| v).collect()
        }
        other => vec![other],
    };
    Value::Array(
        items
            .into_iter()
            .filter_map(step)
            .map(Value::String)
            .collect(),
    )
}

/// Reads one step: a string stays as it is; an object gives its first string
/// among [`STEP_KEYS`].
fn step(item: Value) -> Option<String> {
    match item {
        Value::String(text) => Some(text),
        Value::Object(map) => STEP_KEYS
            .iter()
            .find_map(|key| map.get(*key).and_then(Value::as_str))
            .map(str::to_owned),
        _ => None,
    }
}

/// Rewrites the gram fields and `calories` of a nutrition object; any other
/// value passes through unchanged.
fn nutrition(value: Value) -> Value {
    let Value::Object(map) = value else {
        return value;
    };
    let normalized = map
        .into_iter()
        .map(|(key, value)| {
            let value = if GRAM_FIELDS.contains(&key.as_str()) {
                numbers::grams(&value).map_or(Value::Null, Value::String)
            } else if key == "calories" {
                numbers::calories(&value).map_or(Value::Null, Value::from)
            } else {
                value
            };
            (key, value)
        })
        .collect();
    Value::Object(normalized)
}

/// Builds `{"name": name, "amount": amount}` with the keys in that order.
fn entry(name: String, amount: Option<String>) -> Value {
    let mut object = Map::new();
    object.insert("name".to_owned(), Value::String(name));
    object.insert(
        "amount".to_owned(),
        amount.map_or(Value::Null, Value::String),
    );
    Value::Object(object)
}

/// Returns the first of `keys` whose value reads as text.
fn first_text(map: &Map<String, Value>, keys: &[&str]) -> Option<String> {
    keys.iter().find_map(|key| map.get(*key).and_then(text_of))
}

/// Reads a string (trimmed, non-empty) or a number (its JSON form) as text.
fn text_of(value: &Value) -> Option<String> {
    match value {
        Value::String(text) => Some(text.trim())
            .filter(|t| !t.is_empty())
            .map(str::to_owned),
        Value::Number(number) => Some(number.to_string()),
        _ => None,
    }
}

/// Tells whether `map` has any of `keys`.
fn has_any(map: &Map<String, Value>, keys: &[&str]) -> bool {
    keys.iter().any(|key| map.contains_key(*key))
}

#[cfg(test)]
mod tests;
