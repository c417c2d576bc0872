//! The admin API (contract section 4, "Admin API") and the prompt editor page.
//!
//! Handlers are thin: [`auth::Admin`] checks the token and [`auth::PromptName`]
//! the name before a handler body runs, the `PromptStore` does the validating,
//! writing and history keeping, and `prompts::render` the rendering. Store calls
//! that touch the disk run on the blocking pool so an fsync never stalls the async
//! workers that relay streams; each such call is short and bounded. Every change is
//! logged with who made it (the admin token holder; never the token), what, the
//! prompt and its new ETag.

pub mod auth;
mod cache;
mod jobs;
mod status;
mod try_task;

use axum::Router;
use axum::extract::{Request, State};
use axum::http::header::{CONTENT_TYPE, ETAG, IF_MATCH};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::{get, post};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use self::auth::{Admin, PromptName};
use super::{JsonBody, read_body};
use crate::engine::normalize::OutputKind;
use crate::engine::trace::TraceContext;
use crate::error::ApiError;
use crate::ops::request_id::RequestId;
use crate::prompts::Version;
use crate::prompts::render;
use crate::prompts::spec::{MAX_SOURCE_BYTES, RenderFailed};
use crate::prompts::{Prompt, PromptStore, StoreError};
use crate::state::AppState;

/// The editor page, embedded in the binary.
const PAGE: &str = include_str!("../admin_page.html");

/// The admin routes. `GET /admin` (the page) needs no token and is served even when
/// the admin API is disabled; every other route needs the token (see [`Admin`]).
pub fn router() -> Router<AppState> {
    Router::new()
        .route("/admin", get(page))
        .route("/admin/prompts", get(list))
        .route("/admin/prompts/{name}", get(read).put(save).delete(remove))
        .route("/admin/prompts/{name}/render", post(render_saved))
        .route("/admin/prompts/{name}/try", post(try_task::try_task))
        .route("/admin/prompts/{name}/history", get(history))
        .route("/admin/prompts/{name}/rollback", post(rollback))
        .route("/admin/render", post(render_unsaved))
        .route(
            "/admin/cache/{name}",
            get(cache::count).delete(cache::forget),
        )
        .route("/admin/status", get(status::status))
        .route("/admin/jobs/{id}/redeliver", post(jobs::redeliver))
}

/// One row of `GET /admin/prompts`.
#[derive(Debug, Serialize)]
pub struct Listed {
    /// The task name.
    pub name: String,
    /// The prompt's description.
    pub description: String,
    /// Its output kind.
    pub output: OutputKind,
    /// The live version's entity tag.
    pub etag: String,
    /// When the live version last changed, RFC 3339.
    pub updated_at: String,
}

/// The body of the render routes for a saved prompt.
#[derive(Debug, Deserialize)]
pub struct RenderRequest {
    /// The task variables; none given means an empty object.
    #[serde(default)]
    pub variables: Map<String, Value>,
}

/// The body of `POST /admin/render`: unsaved prompt text and variables.
#[derive(Debug, Deserialize)]
pub struct PreviewRequest {
    /// The prompt file's text.
    pub template: String,
    /// The task variables.
    #[serde(default)]
    pub variables: Map<String, Value>,
}

/// The body of `POST /admin/prompts/{name}/rollback`.
#[derive(Debug, Deserialize)]
pub struct RollbackRequest {
    /// A version id from the prompt's history.
    pub version: String,
}

/// The editor, with a policy that lets only its own script run (by its hash),
/// talk only to its own origin, and never be framed.
async fn page() -> impl IntoResponse {
    static POLICY: std::sync::OnceLock<HeaderValue> = std::sync::OnceLock::new();
    let policy = POLICY.get_or_init(|| {
        use base64::Engine as _;
        use sha2::Digest as _;
        let script = PAGE
            .split_once("<script>")
            .and_then(|(_, rest)| rest.split_once("</script>"))
            .map_or("", |(script, _)| script);
        let hash = base64::engine::general_purpose::STANDARD.encode(sha2::Sha256::digest(script));
        let policy = format!(
            "default-src 'none'; script-src 'sha256-{hash}'; style-src 'unsafe-inline'; \
             connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; \
             frame-ancestors 'none'"
        );
        HeaderValue::from_str(&policy).unwrap_or(HeaderValue::from_static("default-src 'none'"))
    });
    (
        [
            (header::CONTENT_SECURITY_POLICY, policy.clone()),
            (header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY")),
            (
                header::X_CONTENT_TYPE_OPTIONS,
                HeaderValue::from_static("nosniff"),
            ),
            (
                header::REFERRER_POLICY,
                HeaderValue::from_static("no-referrer"),
            ),
        ],
        Html(PAGE),
    )
}

async fn list(_: Admin, State(app): State<AppState>) -> JsonAnswer {
    let rows: Vec<Listed> = app
        .prompts
        .list()
        .into_iter()
        .map(|(prompt, updated_at)| Listed {
            name: prompt.name.clone(),
            description: prompt.description.clone(),
            output: prompt.output,
            etag: prompt.etag.clone(),
            updated_at,
        })
        .collect();
    axum::Json(json!(rows))
}

async fn read(
    _: Admin,
    PromptName(name): PromptName,
    State(app): State<AppState>,
) -> Result<Response, ApiError> {
    let prompt = live(&app, &name)?;
    Ok((
        [
            (CONTENT_TYPE, "application/toml".to_owned()),
            (ETAG, prompt.etag.clone()),
        ],
        prompt.source.clone(),
    )
        .into_response())
}

async fn save(
    _: Admin,
    PromptName(name): PromptName,
    State(app): State<AppState>,
    request_id: RequestId,
    trace: TraceContext,
    request: Request,
) -> Result<Response, ApiError> {
    let if_match = if_match(request.headers())?;
    let body = read_body(request).await?;
    // A prompt file is at most 1 MiB, whatever `LADLE_MAX_BODY_BYTES` allows.
    if body.len() > MAX_SOURCE_BYTES {
        return Err(ApiError::BodyTooLarge(MAX_SOURCE_BYTES));
    }
    let text = String::from_utf8(body.to_vec())
        .map_err(|_| ApiError::InvalidRequest("the prompt text is not UTF-8".into()))?;
    let saved = {
        let name = name.clone();
        on_store(&app, move |store| {
            store.save(&name, &text, if_match.as_deref())
        })
        .await?
    };
    let (status, what) = if saved.created {
        (StatusCode::CREATED, "create")
    } else {
        (StatusCode::OK, "replace")
    };
    log_change(&request_id, &trace, what, &name, Some(&saved.etag));
    Ok(changed(status, &name, &saved.etag))
}

async fn remove(
    _: Admin,
    PromptName(name): PromptName,
    State(app): State<AppState>,
    request_id: RequestId,
    trace: TraceContext,
    headers: HeaderMap,
) -> Result<StatusCode, ApiError> {
    let if_match = if_match(&headers)?;
    {
        let name = name.clone();
        on_store(&app, move |store| store.delete(&name, if_match.as_deref())).await?;
    }
    log_change(&request_id, &trace, "delete", &name, None);
    Ok(StatusCode::NO_CONTENT)
}

async fn render_saved(
    _: Admin,
    PromptName(name): PromptName,
    State(app): State<AppState>,
    JsonBody(body): JsonBody<RenderRequest>,
) -> Result<JsonAnswer, ApiError> {
    let prompt = live(&app, &name)?;
    off_loop(move || rendered(&prompt, &body.variables)).await
}

async fn render_unsaved(
    _: Admin,
    JsonBody(body): JsonBody<PreviewRequest>,
) -> Result<JsonAnswer, ApiError> {
    off_loop(move || {
        let prompt = Prompt::parse("preview", &body.template)?;
        rendered(&prompt, &body.variables)
    })
    .await
}

async fn history(
    _: Admin,
    PromptName(name): PromptName,
    State(app): State<AppState>,
) -> Result<JsonAnswer, ApiError> {
    let versions: Vec<Version> = {
        let name = name.clone();
        on_store(&app, move |store| store.history(&name)).await?
    };
    // A name with neither a live prompt nor any history is unknown; a deleted
    // prompt still has its history.
    if versions.is_empty() && app.prompts.get(&name).is_none() {
        return Err(StoreError::NotFound(name).into());
    }
    Ok(axum::Json(json!(versions)))
}

async fn rollback(
    _: Admin,
    PromptName(name): PromptName,
    State(app): State<AppState>,
    request_id: RequestId,
    trace: TraceContext,
    JsonBody(body): JsonBody<RollbackRequest>,
) -> Result<Response, ApiError> {
    let saved = {
        let name = name.clone();
        let version = body.version.clone();
        on_store(&app, move |store| store.rollback(&name, &version)).await?
    };
    log_change(
        &request_id,
        &trace,
        &format!("rollback to {}", body.version),
        &name,
        Some(&saved.etag),
    );
    Ok(changed(StatusCode::OK, &name, &saved.etag))
}

// === helpers ===

/// A JSON answer.
type JsonAnswer = axum::Json<Value>;

/// The live prompt, or `404 not_found`.
fn live(app: &AppState, name: &str) -> Result<std::sync::Arc<Prompt>, ApiError> {
    app.prompts
        .get(name)
        .ok_or_else(|| StoreError::NotFound(name.to_owned()).into())
}

/// `{"messages", "params"}` for a prompt and the caller's variables.
/// A preview: the variables are the caller's (`422 invalid_variables`), the
/// limits the prompt's (`422 invalid_prompt`).
fn rendered(prompt: &Prompt, variables: &Map<String, Value>) -> Result<JsonAnswer, ApiError> {
    let context = render::bind(prompt, variables)?;
    let messages = prompt.render(&context).map_err(|failed| match failed {
        RenderFailed::Limits | RenderFailed::Longer => ApiError::InvalidPrompt {
            message: failed.to_string(),
            line: None,
            column: None,
        },
        RenderFailed::Error(problem) => ApiError::InvalidVariables {
            name: "*".into(),
            problem: format!("the template failed to render: {problem}"),
        },
    })?;
    let params = &prompt.params;
    Ok(axum::Json(
        json!({ "messages": messages, "params": params }),
    ))
}

/// The `If-Match` header, if any.
fn if_match(headers: &HeaderMap) -> Result<Option<String>, ApiError> {
    headers
        .get(IF_MATCH)
        .map(|value| {
            value
                .to_str()
                .map(str::to_owned)
                .map_err(|_| ApiError::InvalidRequest("If-Match is not ASCII".into()))
        })
        .transpose()
}

/// The answer to a change: the status, the new `ETag`, and a small JSON body.
fn changed(status: StatusCode, name: &str, etag: &str) -> Response {
    let body = json!({ "name": name, "etag": etag });
    (status, [(ETAG, etag.to_owned())], axum::Json(body)).into_response()
}

/// Runs a store call on the blocking pool.
async fn on_store<T: Send + 'static>(
    app: &AppState,
    call: impl FnOnce(&dyn PromptStore) -> Result<T, StoreError> + Send + 'static,
) -> Result<T, ApiError> {
    let store = app.prompts.clone();
    off_loop(move || call(store.as_ref()).map_err(ApiError::from)).await
}

/// Runs `work` on the blocking pool: file I/O (an fsync), and compiling and
/// rendering templates (each up to its step budget), never stall the event loop
/// that relays streams. Work that has begun finishes even if its client leaves,
/// so a prompt file is never left half-replaced.
async fn off_loop<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, ApiError> + Send + 'static,
) -> Result<T, ApiError> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|_| ApiError::Storage("the admin call failed".into()))?
}

fn log_change(
    request_id: &RequestId,
    trace: &TraceContext,
    what: &str,
    name: &str,
    etag: Option<&str>,
) {
    tracing::info!(
        request_id = %request_id,
        trace_id = %trace.id(),
        who = "admin token holder",
        what,
        prompt = name,
        etag = etag.unwrap_or("-"),
        "prompt changed through the admin API"
    );
}
