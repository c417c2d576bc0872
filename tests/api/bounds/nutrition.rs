//! Normalization is bounded too: a nutrition number that is negative, not finite
//! or above 100000 becomes `null`.

use serde_json::{Value, json};

use crate::support::mock_upstream::*;
use crate::support::*;

/// The recipe sample with its nutrition line replaced by `nutrition`.
fn recipe_with(nutrition: &str) -> Script {
    let raw = fixture_text("recipe-raw-model-output.txt");
    let line = raw
        .lines()
        .find(|l| l.trim_start().starts_with("\"nutrition\""))
        .expect("the sample has a nutrition line");
    let raw = raw.replace(line, &format!("  \"nutrition\": {nutrition}"));
    let parts = pieces(&raw, 7);
    sse_answer(&parts.iter().map(String::as_str).collect::<Vec<_>>())
}

/// The normalized nutrition of a recipe task answered with `nutrition`.
async fn normalized(app: &Gateway, nutrition: &str) -> Value {
    app.upstream().push([recipe_with(nutrition)]);
    // Each answer is the upstream's, not the one kept for the last request.
    let response = app
        .post_request("/v1/tasks/recipe", &json!({"dish": "香酥鸭"}))
        .header("cache-control", "no-store")
        .send()
        .await
        .expect("answers");
    assert_eq!(response.status(), 200, "{nutrition}");
    json_of(response).await["output"]["nutrition"].clone()
}

#[tokio::test]
async fn nutrition_numbers_negative_not_finite_or_above_100000_become_null() {
    let app = Gateway::start().await;
    let unsound = normalized(
        &app,
        r#"{"calories": "1e999 kcal", "protein": "-5克", "fat": 200000, "carbs": "100001 g"}"#,
    )
    .await;
    let nulls = json!({"calories": null, "protein": null, "fat": null, "carbs": null});
    assert_eq!(unsound, nulls);
    let at_the_bounds = normalized(
        &app,
        r#"{"calories": 100000, "protein": "0克", "fat": 100000, "carbs": "1e5 g"}"#,
    )
    .await;
    let kept =
        json!({"calories": 100000, "protein": "0克", "fat": "100000克", "carbs": "100000克"});
    assert_eq!(at_the_bounds, kept);
}
