//! Tests for the recipe rules: required fields, and every shape of
//! `ingredients`, `steps` and `nutrition` a model writes.

use serde_json::{Value, json};

use super::normalize_recipe;
use crate::engine::normalize::InvalidOutput;

/// Normalizes a recipe written as a `json!` object.
fn recipe(input: Value) -> Result<Value, InvalidOutput> {
    let Value::Object(object) = input else {
        panic!("test recipes are objects");
    };
    normalize_recipe(object)
}

#[test]
fn a_recipe_without_a_required_field_names_it() {
    let full = json!({"title": "t", "ingredients": [], "steps": []});
    for field in ["title", "ingredients", "steps"] {
        let mut missing = full.clone();
        missing.as_object_mut().expect("object").remove(field);
        assert_eq!(recipe(missing), Err(InvalidOutput::MissingField(field)));
        let mut null = full.clone();
        null[field] = Value::Null;
        assert_eq!(recipe(null), Err(InvalidOutput::MissingField(field)));
    }
}

#[test]
fn ingredients_of_every_shape_become_name_and_amount() {
    // Arrange
    let input = json!({"title": "t", "steps": [], "ingredients": [
        "鸭子 1只", "  花椒  1小把 ", "盐", "鸭子 1 只", "葱\u{3000}2根",
        {"name": "生姜", "amount": "30克"}, {"name": "大葱", "quantity": "2根"},
        {"item": "料酒", "qty": "3汤匙"}, {"ingredient": "鸡蛋", "amount": 2},
        {"name": "鸭子", "amount": 1, "unit": "只"}, {"name": "水"}, {"糖": "10克"},
        ["醋", "1勺"], {"amount": "1只"}, null, true, ""
    ]});

    // Act
    let output = recipe(input).expect("required fields are present");

    // Assert
    assert_eq!(
        output["ingredients"],
        json!([
            {"name": "鸭子", "amount": "1只"}, {"name": "花椒", "amount": "1小把"},
            {"name": "盐", "amount": null}, {"name": "鸭子 1", "amount": "只"},
            {"name": "葱", "amount": "2根"},
            {"name": "生姜", "amount": "30克"}, {"name": "大葱", "amount": "2根"},
            {"name": "料酒", "amount": "3汤匙"}, {"name": "鸡蛋", "amount": "2"},
            {"name": "鸭子", "amount": "1只"}, {"name": "水", "amount": null},
            {"name": "糖", "amount": "10克"}, {"name": "醋", "amount": "1勺"}
        ])
    );
    let first = output["ingredients"][0]
        .as_object()
        .expect("entry is an object");
    assert_eq!(first.keys().collect::<Vec<_>>(), ["name", "amount"]);
}

#[test]
fn ingredients_given_as_a_map_or_groups_become_a_list() {
    let by_name = json!({"title": "t", "steps": [], "ingredients": {"鸭子": "1只", "盐": null}});
    let grouped = json!({"title": "t", "steps": [], "ingredients": {"主料": ["鸭子 1只"], "调料": [{"name": "盐"}]}});
    let single = json!({"title": "t", "steps": [], "ingredients": "鸭子 1只"});
    let out = |v| recipe(v).expect("required fields are present")["ingredients"].clone();
    assert_eq!(
        out(by_name),
        json!([{"name": "鸭子", "amount": "1只"}, {"name": "盐", "amount": null}])
    );
    assert_eq!(
        out(grouped),
        json!([{"name": "鸭子", "amount": "1只"}, {"name": "盐", "amount": null}])
    );
    assert_eq!(out(single), json!([{"name": "鸭子", "amount": "1只"}]));
}

#[test]
fn steps_of_every_shape_become_strings() {
    let input = json!({"title": "t", "ingredients": [], "steps": [
        "plain", {"step": 1, "text": "a"}, {"description": "b"}, {"content": "c"},
        {"instruction": "d"}, {"step": "e"}, {"text": 5, "content": "f"}, {"step": 7}, null, 3
    ]});
    let output = recipe(input).expect("required fields are present");
    assert_eq!(
        output["steps"],
        json!(["plain", "a", "b", "c", "d", "e", "f"])
    );

    let numbered =
        json!({"title": "t", "ingredients": [], "steps": {"1": "x", "2": {"text": "y"}}});
    let single = json!({"title": "t", "ingredients": [], "steps": "one step"});
    let out = |v| recipe(v).expect("required fields are present")["steps"].clone();
    assert_eq!(out(numbered), json!(["x", "y"]));
    assert_eq!(out(single), json!(["one step"]));
}

#[test]
fn nutrition_is_normalized_and_other_fields_pass_through_in_order() {
    let input = json!({"servings": 2, "title": "t", "ingredients": [], "steps": [],
        "nutrition": {"calories": "720 kcal", "protein": "forty-eight 克", "fat": 52,
                      "carbs": "适量", "fiber": "3.5g", "sugar": "two grams", "sodium": "800mg"},
        "extra": {"b": 1, "a": 2}});
    let output = recipe(input).expect("required fields are present");
    assert_eq!(
        output,
        json!({"servings": 2, "title": "t", "ingredients": [], "steps": [],
        "nutrition": {"calories": 720, "protein": "48克", "fat": "52克",
                      "carbs": null, "fiber": "3.5克", "sugar": "2克", "sodium": "800mg"},
        "extra": {"b": 1, "a": 2}})
    );
    let keys: Vec<&String> = output.as_object().expect("object").keys().collect();
    assert_eq!(
        keys,
        [
            "servings",
            "title",
            "ingredients",
            "steps",
            "nutrition",
            "extra"
        ]
    );
}
