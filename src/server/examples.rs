//! The verified examples' routes: `GET /api/examples` lists the database's examples
//! (each checked again against today's schema first), `POST /api/examples` is a
//! person's confirmation (the question, the SQL and who verified it, which for a
//! signed-in request must be the user; the gate checks the SQL) and
//! `DELETE /api/examples/{id}` removes one. Besides `askdb examples`, this POST is the
//! only way an example is made: nothing saves one because it ran.
//!
//! `POST /api/answers/wrong` is a person's "Wrong" on an answer: the question, the SQL
//! and the verified examples that answer used, recorded beside the examples with who
//! marked it (`examples::wrong`, decision 0084). It never saves or changes an example.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::{Extension, Json};
use serde::Deserialize;

use super::access::SignedIn;
use super::error::{ApiJson, AppError};
use super::AppState;
use crate::examples::{
    self, Draft, Example, ExampleError, ExampleStore, Saved, WrongDraft, WrongMark,
};

/// The body of POST /api/examples: what a person confirmed, and who they are.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SaveExampleRequest {
    pub question: String,
    pub sql: String,
    /// The person confirming: required, so no example is made without one.
    pub verified_by: String,
    #[serde(default)]
    pub notes: Option<String>,
}

fn store(state: &AppState) -> Result<&dyn ExampleStore, AppError> {
    state
        .examples()
        .map(|store| store.as_ref())
        .ok_or_else(|| AppError::NotFound {
            code: "examples_off",
            detail: "this server keeps no verified examples".to_string(),
        })
}

fn app_error(error: ExampleError) -> AppError {
    match error {
        ExampleError::Empty(_)
        | ExampleError::TooLong { .. }
        | ExampleError::TooManyExamples { .. } => AppError::BadRequest {
            code: "invalid_example",
            detail: error.to_string(),
        },
        ExampleError::UnknownExamples(_) => AppError::BadRequest {
            code: "unknown_example",
            detail: error.to_string(),
        },
        ExampleError::Refused(_) => AppError::BadRequest {
            code: "example_refused",
            detail: error.to_string(),
        },
        ExampleError::NotFound(_) => AppError::NotFound {
            code: "no_such_example",
            detail: error.to_string(),
        },
        ExampleError::Store { .. } => AppError::Internal(error.to_string()),
    }
}

/// GET /api/examples.
pub async fn list(
    State(state): State<AppState>,
    user: Option<Extension<SignedIn>>,
) -> Result<Json<Vec<Example>>, AppError> {
    let store = store(&state)?;
    // Rechecked (and set aside for everyone) through the server's gate; a user under a
    // policy is shown only the examples whose SQL the guard passes for that policy.
    let policed = state
        .shared
        .team
        .policed(user.as_ref().map(|Extension(user)| user))?;
    let mut listed = examples::recheck(state.gate(), store)
        .await
        .map_err(app_error)?;
    if let Some(policed) = policed {
        listed.retain(|example| policed.gate.check(&example.sql).is_ok());
    }
    Ok(Json(listed))
}

/// POST /api/examples: 201 with the saved example and the ids it replaced.
pub async fn save(
    State(state): State<AppState>,
    user: Option<Extension<SignedIn>>,
    ApiJson(request): ApiJson<SaveExampleRequest>,
) -> Result<(StatusCode, Json<Saved>), AppError> {
    let store = store(&state)?;
    // Signed in, the person confirming is the user.
    the_signed_in_user(user.as_ref(), "verified_by", &request.verified_by)?;
    let draft = Draft {
        question: request.question,
        sql: request.sql,
        verified_by: request.verified_by,
        notes: request.notes,
    };
    // The SQL must pass the saving user's own gate.
    let gate = state.gate_for(user.as_ref().map(|Extension(user)| user))?;
    let saved = examples::save(&gate, store, &draft)
        .await
        .map_err(app_error)?;
    Ok((StatusCode::CREATED, Json(saved)))
}

/// Refuses a name other than the signed-in user's: nobody confirms, or marks wrong, in
/// another's name.
fn the_signed_in_user(
    user: Option<&Extension<SignedIn>>,
    field: &str,
    given: &str,
) -> Result<(), AppError> {
    if let Some(Extension(SignedIn { name, .. })) = user {
        if given.trim() != name {
            return Err(AppError::BadRequest {
                code: "not_the_signed_in_user",
                detail: format!(
                    "{field} must be the signed-in user ({name}): an answer is confirmed or \
                     marked wrong in the name of the person who does it"
                ),
            });
        }
    }
    Ok(())
}

/// POST /api/answers/wrong: 201 with the mark as recorded. The examples it names must be
/// examples of this database the user's gate may see (400 `unknown_example`).
pub async fn mark_wrong(
    State(state): State<AppState>,
    user: Option<Extension<SignedIn>>,
    ApiJson(draft): ApiJson<WrongDraft>,
) -> Result<(StatusCode, Json<WrongMark>), AppError> {
    let store = store(&state)?;
    the_signed_in_user(user.as_ref(), "marked_by", &draft.marked_by)?;
    // The examples are looked up through the user's own gate: one their policy hides is
    // unknown to them, as it is to DELETE.
    let gate = state.gate_for(user.as_ref().map(|Extension(user)| user))?;
    let mark = examples::wrong::mark(&gate, store, &draft)
        .await
        .map_err(app_error)?;
    Ok((StatusCode::CREATED, Json(mark)))
}

/// DELETE /api/examples/{id}: 204, or 404 for an id this database has no example of
/// (or one the user's policy hides).
pub async fn remove(
    State(state): State<AppState>,
    user: Option<Extension<SignedIn>>,
    Path(id): Path<String>,
) -> Result<StatusCode, AppError> {
    let store = store(&state)?;
    let id: i64 = id.parse().map_err(|_| AppError::NotFound {
        code: "no_such_example",
        detail: format!("{id:?} is not an example id"),
    })?;
    // Through the user's own gate: an example their policy hides is not theirs to see.
    let gate = state.gate_for(user.as_ref().map(|Extension(user)| user))?;
    examples::remove(&gate, store, id)
        .await
        .map_err(app_error)?;
    Ok(StatusCode::NO_CONTENT)
}
