//! The OpenAPI 3.1 description of the HTTP API, served at GET /api/openapi.json. Written
//! by hand next to the handlers it describes; a test checks that every API route is in
//! it and that the examples match what the handlers return.

use serde_json::{json, Value};

use super::api::error_example;
use crate::agent::answer::ChartKind;
use crate::agent::events::{ExampleRole, SchemaMode};
use crate::agent::failure::FailureKind;
use crate::agent::plausibility::Check;
use crate::agent::{Decision, Mode, MAX_QUESTION_CHARS};

/// An enum's values as the document lists them, from the type's own names, so the
/// document cannot drift from what the API takes and returns.
fn names(values: impl IntoIterator<Item = &'static str>) -> Value {
    Value::from(values.into_iter().collect::<Vec<_>>())
}

/// The API routes, as (method, path): the router and this description both list them.
pub const API_ROUTES: [(&str, &str); 17] = [
    ("post", "/api/ask"),
    ("post", "/api/ask/stream"),
    ("post", "/api/sql"),
    ("get", "/api/schema"),
    ("get", "/api/eval"),
    ("get", "/api/health"),
    ("get", "/api/local-model"),
    ("post", "/api/local-model/start"),
    ("get", "/api/examples"),
    ("post", "/api/examples"),
    ("delete", "/api/examples/{id}"),
    ("post", "/api/answers/wrong"),
    ("get", "/api/session"),
    ("post", "/api/session"),
    ("delete", "/api/session"),
    ("get", "/api/openapi.json"),
    ("get", "/metrics"),
];

fn error_response(description: &str, code: &str, detail: &str) -> Value {
    json!({
        "description": description,
        "content": {"application/json": {
            "schema": {"$ref": "#/components/schemas/Error"},
            "example": error_example(code, detail)
        }}
    })
}

fn with_retry_after(mut response: Value) -> Value {
    response["headers"] = json!({
        "Retry-After": {
            "description": "Seconds to wait before asking again.",
            "schema": {"type": "integer", "minimum": 1}
        }
    });
    response
}

fn bad_body_responses() -> Value {
    json!({
        "403": error_response("A browser sent this from another site's page (an Origin askdb does not answer for, or Sec-Fetch-Site other than same-origin or none).", "cross_site_request", "a request from another site may not change or spend anything here"),
        "400": error_response("Malformed JSON, or content that is not acceptable (empty or over-long question, unknown mode, empty SQL).", "malformed_json", "Failed to parse the request body as JSON: EOF while parsing an object at line 1 column 1"),
        "413": error_response("The body is larger than the limit (64 KiB by default).", "payload_too_large", "the request body is larger than the limit of 65536 bytes"),
        "415": error_response("The body is not declared as application/json.", "unsupported_media_type", "send the body as JSON with Content-Type: application/json"),
        "422": error_response("Well-formed JSON with a missing, mistyped or unknown field.", "invalid_request", "Failed to deserialize the JSON body into the target type: missing field `question`")
    })
}

/// The whole document.
pub fn document() -> Value {
    let mut ask_responses = json!({
        "200": {
            "description": format!("The agent's full result: the decision ({}), the SQL that ran, the rows, every failed attempt with its error type, assumptions, the chart, tokens, cost and latency; the conversation_id to send with a follow-up, the turn, and for a follow-up how it was understood as one standalone question.", Decision::ALL.map(Decision::as_str).join(", ")),
            "content": {"application/json": {"schema": {"$ref": "#/components/schemas/AgentResult"}}}
        },
        "404": error_response("The conversation_id names no conversation askdb holds for this user: it expired (30 minutes without a question), was replaced by newer ones, never existed, or is another user's (told apart from none of these). Ask without it to start a new one.", "unknown_conversation", "no conversation 0123456789abcdef0123456789abcdef: it expired after a while without a question, or never existed; ask without its id to start a new one"),
        "409": error_response("The conversation is still answering its previous question: questions on one conversation are answered one at a time, never interleaved.", "conversation_busy", "conversation 0123456789abcdef0123456789abcdef is still answering its previous question; ask again once it has answered"),
        "429": with_retry_after(error_response("This client asked too often (per-address token bucket).", "rate_limited", "too many questions from this address; try again in 3 s")),
        "502": error_response("The model could not be asked (timeout, quota, authentication...).", "model_unavailable", "the model could not be asked (timeout); try again later"),
        "503": with_retry_after(error_response("No model is configured (no Retry-After), the spend cap is reached, the spend ledger cannot be written (spend_ledger_unavailable: no model call is made), the replicas' shared state does not answer (shared_state_unavailable), the signed-in user's policy is not loaded by this server (policy_not_loaded), or every ask slot is taken (busy, with Retry-After).", "busy", "askdb is answering as many questions as it allows at once; try again in 5 s")),
        "504": error_response("No answer within the server's ask timeout.", "ask_timeout", "no answer within 600 s; try a simpler question or try again later")
    });
    merge(&mut ask_responses, bad_body_responses());
    let mut stream_responses = ask_responses.clone();
    stream_responses["200"] = json!({
        "description": "Server-sent events while the agent works. `event: step`, one per step as it happens (rules, examples, schema_selected, model_call, guard, executed, vote, empty_probe, failed, finished): the step's JSON with `step`, `started_ms` (since the question arrived), `elapsed_ms` where the step has a duration, its own fields and `summary`, one sentence saying what happened; a model call's prompt is replaced by `prompt_messages`. Then exactly one last event: `event: result`, the same AgentResult POST /api/ask returns, or `event: error`, {\"error\", \"detail\", \"status\"}: the error POST /api/ask would have answered with that status (the model failed, the ask timed out...). Errors found before anything runs (bad input, no model, busy, rate limit) are ordinary JSON errors with their status, as for POST /api/ask.",
        "content": {"text/event-stream": {
            "schema": {"type": "string"},
            "example": "event: step\ndata: {\"step\":\"executed\",\"started_ms\":1420,\"elapsed_ms\":3,\"candidate\":0,\"sql\":\"SELECT ...\",\"rows\":null,\"error_type\":\"unknown_column\",\"error\":\"no such column: c.customer_name\",\"summary\":\"The database refused it (unknown_column): no such column: c.customer_name\"}\n\nevent: result\ndata: {\"question\":\"...\",\"decision\":\"answer\",...}\n\n"
        }}
    });
    let mut sql_responses = json!({
        "200": {
            "description": "Rows (ok: true), or the structured error of a refused or failed statement (ok: false). A failure is data, not an HTTP error.",
            "content": {"application/json": {"schema": {"oneOf": [
                {"$ref": "#/components/schemas/QueryResult"},
                {"$ref": "#/components/schemas/QueryError"}
            ]}}}
        },
        "503": with_retry_after(error_response("Every database connection was in use and none came free in time, so the statement did not run (database_busy, with Retry-After).", "database_busy", "every database connection is in use, so the statement did not run; try again in 1 s"))
    });
    merge(&mut sql_responses, bad_body_responses());
    let local_model_not_offered = error_response(
        "Another model is configured.",
        "local_model_not_offered",
        super::api::LOCAL_MODEL_NOT_OFFERED,
    );
    json!({
        "openapi": "3.1.0",
        "info": {
            "title": "askdb",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "Plain-English questions about a SQL database, answered with the SQL that produced them. Every statement passes a parser guard and runs on a read-only connection. Errors are JSON: {\"error\": code, \"detail\": sentence}. Every route answers 421 unknown_host to a Host it does not answer for (the listening address, localhost, 127.0.0.1, [::1] and --allowed-host). Once `askdb users add` has added a user, every route but GET /api/health and the page answers 401 unauthorized without `Authorization: Bearer TOKEN` or the session cookie POST /api/session sets (a token in the URL is refused); a request that changes anything on the cookie alone must carry the page's Origin (403 otherwise).",
            "license": {"name": "MIT"}
        },
        "paths": {
            "/api/ask": {"post": {
                "summary": "Answer a question",
                "description": "Runs the agent: ambiguity check, schema selection, generation, guard, read-only execution, repair by error type (agent mode, up to 3 attempts) and the answer. Rate-limited per client address; at most a few questions at once.",
                "requestBody": {"required": true, "content": {"application/json": {
                    "schema": {"$ref": "#/components/schemas/AskRequest"},
                    "example": {"question": "How many bills are there per status?", "mode": "agent"}
                }}},
                "responses": ask_responses
            }},
            "/api/ask/stream": {"post": {
                "summary": "Answer a question, with each step as it happens",
                "description": "The same question, checks and agent as POST /api/ask, answered as server-sent events: each step of the agent as it happens (tables chosen, model calls, guard verdicts, rows or the database's error, each failure and what comes next), then the final result. The page uses it to show live steps; read it with fetch and a stream reader (EventSource cannot POST).",
                "requestBody": {"required": true, "content": {"application/json": {
                    "schema": {"$ref": "#/components/schemas/AskRequest"},
                    "example": {"question": "How many bills are there per status?", "mode": "agent"}
                }}},
                "responses": stream_responses
            }},
            "/api/sql": {"post": {
                "summary": "Run one SELECT through the gate",
                "description": "The same gate as every other caller: the guard refuses anything but one read-only query over visible tables and forces the row cap; the statement runs on a read-only connection.",
                "requestBody": {"required": true, "content": {"application/json": {
                    "schema": {"$ref": "#/components/schemas/SqlRequest"},
                    "example": {"sql": "SELECT status, count(*) AS bills FROM bills GROUP BY status"}
                }}},
                "responses": sql_responses
            }},
            "/api/schema": {"get": {
                "summary": "The visible tables",
                "description": "Tables with descriptions, approximate row counts, columns and keys. Hidden tables and restricted columns never appear.",
                "responses": {"200": {"description": "The schema.", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Schema"}}}}}
            }},
            "/api/eval": {"get": {
                "summary": "The latest committed evaluation summary",
                "description": "The newest *summary.json under evals/results/ (by its generated_at field; askdb eval publish writes <set>.summary.json), exactly as the evaluation harness wrote it. X-Askdb-Eval-Source names the file.",
                "responses": {
                    "200": {"description": "The summary, verbatim.", "content": {"application/json": {"schema": {"type": "object"}}}},
                    "404": error_response("No summary is committed.", "no_evaluation", "no committed evaluation summary under evals/results/; `askdb eval run` and then `askdb eval publish RUN` write one")
                }
            }},
            "/metrics": {"get": {
                "summary": "Prometheus metrics",
                "description": "Counters in the Prometheus text format (0.0.4): questions by decision, attempts, repairs by error type, model calls, latency and tokens, cost, guard refusals by reason, database errors by type, rate-limit and busy refusals, query log rows and failures, schema drift. Latency histograms are labelled by the asking user's policy and, where a policy is in force, the user's name; once users exist only a user without a policy reads them.",
                "responses": {
                    "200": {"description": "The metrics.", "content": {"text/plain": {"schema": {"type": "string"}}}},
                    "403": error_response("The signed-in user is under a policy: the metrics name the users under policies, so only users without one read them.", "metrics_need_a_user_without_a_policy", "/metrics names the users under policies, so only a user without a policy reads it")
                }
            }},
            "/api/health": {"get": {
                "summary": "Checked health",
                "description": "Each claim is checked: SELECT 1 through the gate; a write (CREATE TEMP TABLE) below the guard that the database must refuse; one tiny model call (reused for 60 s); an insert into the query log, rolled back; the last schema drift check. 200 when every check passed, else 503 with the same body.",
                "responses": {
                    "200": {"description": "Every check passed.", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Health"}}}},
                    "503": {"description": "At least one check failed; details says which and why.", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Health"}}}}
                }
            }},
            "/api/local-model": {"get": {
                "summary": "The local model's status",
                "description": "Offered when no model is configured (or with --local-model): its phase (not_started, starting, installing, downloading, verifying, loading, ready, failed, exited), the one-time download's bytes and rate, the seconds in the phase and a sentence for a person.",
                "responses": {
                    "200": {"description": "The status.", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/LocalModel"}}}},
                    "404": local_model_not_offered.clone()
                }
            }},
            "/api/local-model/start": {"post": {
                "summary": "Start the local model",
                "description": "Installs llama.cpp's server and downloads the model into askdb's data directory if they are missing, then starts it, in the background; questions go to it once it answers. A start under way or a running model is left as it is.",
                "responses": {
                    "202": {"description": "Started (or already starting or running); the status as it is now.", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/LocalModel"}}}},
                    "404": local_model_not_offered.clone()
                }
            }},
            "/api/examples": {
                "get": {
                    "summary": "The database's verified examples",
                    "description": "Questions a person confirmed, with the SQL that answered them. Each is checked again against today's gate and schema first: one the guard now refuses, or whose tables changed since it was verified, is set aside (set_aside says why) and never used. 404 examples_off when this server keeps none.",
                    "responses": {
                        "200": {"description": "Every example, oldest first.", "content": {"application/json": {"schema": {"type": "array", "items": {"$ref": "#/components/schemas/Example"}}}}},
                        "404": error_response("This server keeps no verified examples.", "examples_off", "this server keeps no verified examples")
                    }
                },
                "post": {
                    "summary": "Save a verified example",
                    "description": "A person's confirmation: the question, the SQL that answers it and who verified it. The SQL passes the gate's parser check and database check before it is saved (a restricted column, a hidden table or a write is refused); an earlier example of the same question is replaced. Nothing else saves an example: an answer is never saved because it ran.",
                    "requestBody": {"required": true, "content": {"application/json": {
                        "schema": {"$ref": "#/components/schemas/SaveExampleRequest"},
                        "example": {"question": "How many bills were voided?", "sql": "SELECT count(*) FROM bills WHERE status = 'VOID'", "verified_by": "asha", "notes": "VOID bills never count as revenue"}
                    }}},
                    "responses": {
                        "201": {"description": "Saved: the example as stored (its SQL as the gate rendered it) and the ids it replaced.", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/SavedExample"}}}},
                        "400": error_response("The gate refused the SQL (example_refused), a field is empty or too long (invalid_example), or verified_by is not the signed-in user (not_the_signed_in_user).", "example_refused", "the guard refused the example's SQL: restricted_column: column \"phone\" of customers is restricted"),
                        "404": error_response("This server keeps no verified examples.", "examples_off", "this server keeps no verified examples"),
                        "422": error_response("A field is missing or of the wrong type (verified_by included).", "invalid_request", "missing field `verified_by`")
                    }
                }
            },
            "/api/examples/{id}": {"delete": {
                "summary": "Remove a verified example",
                "parameters": [{"name": "id", "in": "path", "required": true, "schema": {"type": "integer"}}],
                "responses": {
                    "204": {"description": "Removed."},
                    "404": error_response("No example of that id for this database (no_such_example), or no examples kept (examples_off).", "no_such_example", "no example 7 for this database")
                }
            }},
            "/api/answers/wrong": {"post": {
                "summary": "Mark an answer wrong",
                "description": "A person's Wrong on an answer: its question (as understood), the SQL that ran and the ids of the verified examples it used (the answer's examples), with who marked it. Recorded beside the examples, never in the database asked about, so `askdb examples list --caused-wrong` can name the examples wrong answers used. No example is saved, changed or set aside.",
                "requestBody": {"required": true, "content": {"application/json": {
                    "schema": {"$ref": "#/components/schemas/WrongAnswerRequest"},
                    "example": {"question": "How many customers are there?", "sql": "SELECT count(*) FROM customers LIMIT 1000", "examples": [3], "marked_by": "asha"}
                }}},
                "responses": {
                    "201": {"description": "Recorded: the mark as stored.", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/WrongMark"}}}},
                    "400": error_response("An id is not an example of this database (unknown_example), a field is empty or too long or more examples are named than an answer uses (invalid_example), or marked_by is not the signed-in user (not_the_signed_in_user).", "unknown_example", "no example 7 for this database"),
                    "404": error_response("This server keeps no verified examples.", "examples_off", "this server keeps no verified examples"),
                    "422": error_response("A field is missing or of the wrong type (marked_by included).", "invalid_request", "missing field `marked_by`")
                }
            }},
            "/api/session": session_paths(),
            "/api/openapi.json": {"get": {
                "summary": "This description",
                "responses": {"200": {"description": "OpenAPI 3.1 JSON.", "content": {"application/json": {"schema": {"type": "object"}}}}}
            }}
        },
        "components": {"schemas": schemas()}
    })
}

fn merge(target: &mut Value, extra: Value) {
    if let (Some(target), Value::Object(extra)) = (target.as_object_mut(), extra) {
        target.extend(extra);
    }
}

fn schemas() -> Value {
    let rows = json!({"type": "array", "items": {"type": "array", "items": {}}, "description": "Rows as arrays in column order; SQL NULL is JSON null."});
    let used_examples = json!({"type": "array", "description": "The verified examples the question used: shown to the model (prompt) or run again (rerun).", "items": {"type": "object", "properties": {
        "id": {"type": "integer"},
        "question": {"type": "string"},
        "score": {"type": "number", "description": "How alike the questions are, 0 to 1."},
        "role": {"type": "string", "enum": names(ExampleRole::ALL.map(ExampleRole::as_str))}
    }}});
    let mut all = json!({
        "Error": {
            "type": "object",
            "required": ["error", "detail"],
            "properties": {
                "error": {"type": "string", "description": "A stable code: empty_question, question_too_long, unknown_mode, empty_sql, malformed_json, invalid_request, unsupported_media_type, payload_too_large, not_found, method_not_allowed, unknown_host, cross_site_request, unauthorized, forbidden, metrics_need_a_user_without_a_policy, policy_not_loaded, no_evaluation, unknown_conversation, conversation_busy, examples_off, invalid_example, example_refused, no_such_example, unknown_example, not_the_signed_in_user, rate_limited, busy, model_not_configured, spend_cap_reached, model_unavailable, ask_timeout, internal_error."},
                "detail": {"type": "string", "description": "What went wrong and what to do, in a sentence."}
            }
        },
        "AskRequest": {
            "type": "object",
            "required": ["question"],
            "additionalProperties": false,
            "properties": {
                "question": {"type": "string", "minLength": 1, "maxLength": MAX_QUESTION_CHARS},
                "mode": {"type": "string", "enum": names(Mode::ALL.map(Mode::as_str)), "default": Mode::default().as_str(), "description": "agent: repair loop, up to 3 attempts; baseline: one attempt, no repair; plain: the reference prompt (every table with three sample rows), one attempt."},
                "explain": {"type": "boolean", "description": "Ask the model for a short written answer (one more call). The server's --explain by default."},
                "conversation_id": {"type": "string", "pattern": "^[0-9a-f]{32}$", "description": "The conversation_id of an earlier answer: the question is a follow-up, read in the context of that conversation's earlier turns (their questions, SQL, columns and row counts; never their rows). Absent: a new conversation."}
            }
        },
        "SqlRequest": {
            "type": "object",
            "required": ["sql"],
            "additionalProperties": false,
            "properties": {"sql": {"type": "string", "minLength": 1}}
        },
        "FailedAttempt": {
            "type": "object",
            "properties": {
                "sql": {"type": "string"},
                "error_type": {"type": "string", "enum": names(FailureKind::all().into_iter().map(FailureKind::as_str)), "description": "A taxonomy type (unknown_column, syntax_error, ...) or one of the agent's own kinds (malformed_reply, identical_to_failed, empty_result, suspect, ...)."},
                "message": {"type": "string"}
            }
        },
        "Chart": {
            "type": "object",
            "properties": {
                "kind": {"type": "string", "enum": names(ChartKind::ALL.map(ChartKind::as_str))},
                "x": {"type": ["string", "null"]},
                "y": {"type": "array", "items": {"type": "string"}},
                "reason": {"type": "string"}
            }
        },
        "AgentResult": {
            "type": "object",
            "properties": {
                "question": {"type": "string"},
                "mode": {"type": "string", "enum": names(Mode::ALL.map(Mode::as_str))},
                "decision": {"type": "string", "enum": names(Decision::ALL.map(Decision::as_str))},
                "sql": {"type": ["string", "null"], "description": "The SQL that produced the answer, as it ran (LIMIT included)."},
                "columns": {"type": "array", "items": {"type": "string"}},
                "rows": rows,
                "row_count": {"type": "integer"},
                "truncated": {"type": "boolean"},
                "attempts": {"type": "integer"},
                "history": {"type": "array", "items": {"$ref": "#/components/schemas/FailedAttempt"}},
                "tables_used": {"type": "array", "items": {"type": "string"}},
                "assumptions": {"type": "array", "items": {"type": "string"}},
                "explanation": {"type": ["string", "null"]},
                "unverified_numbers": {"type": "array", "items": {"type": "string"}, "description": "Numbers in the explanation that are not in the rows."},
                "warnings": {"type": "array", "description": "Rule checks of the result against the question that the answer still fails (after its one suspect repair): shown as a warning, never as a plain answer. Empty when it passed them.", "items": {"type": "object", "properties": {"check": {"type": "string", "enum": names(Check::ALL.map(Check::as_str))}, "message": {"type": "string"}}, "required": ["check", "message"]}},
                "chart": {"$ref": "#/components/schemas/Chart"},
                "clarify": {"type": ["object", "null"], "properties": {"question": {"type": "string"}, "options": {"type": "array", "items": {"type": "string"}}}},
                "reason": {"type": ["string", "null"]},
                "schema_mode": {"type": "string", "enum": names(SchemaMode::ALL.map(SchemaMode::as_str))},
                "schema_tables": {"type": "array", "items": {"type": "string"}},
                "tokens": {"type": "object", "properties": {"input": {"type": "integer"}, "output": {"type": "integer"}}},
                "cost_usd": {"type": "number"},
                "latency_ms": {"type": "integer"},
                "model_calls": {"type": "array", "items": {"type": "object"}},
                "trace": {"type": "array", "items": {"type": "object"}},
                "trace_id": {"type": ["string", "null"], "description": "The question's OpenTelemetry trace id (32 hex digits) when traces are exported, else null."},
                "first_attempt_ok": {"type": ["boolean", "null"]},
                "first_sql": {"type": ["string", "null"]},
                "examples": used_examples,
                "answered_from_example": {"type": ["integer", "null"], "description": "The verified example whose SQL answered the same question again, without a model call."}
            }
        },
        "QueryResult": {
            "type": "object",
            "properties": {
                "ok": {"const": true},
                "sql": {"type": "string", "description": "The statement that ran: the guard's re-rendering, LIMIT included."},
                "columns": {"type": "array", "items": {"type": "string"}},
                "rows": rows,
                "row_count": {"type": "integer"},
                "truncated": {"type": "boolean"},
                "limit": {"type": "object"},
                "tables": {"type": "array", "items": {"type": "string"}},
                "elapsed_ms": {"type": "integer"}
            }
        },
        "QueryError": {
            "type": "object",
            "properties": {
                "ok": {"const": false},
                "error_type": {"type": "string"},
                "message": {"type": "string"},
                "hint": {"type": ["string", "null"]},
                "sqlstate": {"type": ["string", "null"]},
                "reason": {"type": "string", "description": "Why the guard refused, when it did."},
                "position": {"type": "integer"},
                "repairable": {"type": "boolean"},
                "sql": {"type": "string"}
            }
        },
        "Schema": {
            "type": "object",
            "properties": {
                "database": {"type": "string"},
                "dialect": {"type": "string", "enum": ["sqlite", "postgres"]},
                "currency": {"type": ["string", "null"], "description": "The currency the schema notes declare (ISO 4217), e.g. INR."},
                "money_columns": {"type": "array", "items": {"type": "string"}, "description": "Bare names of the columns that hold money in that currency."},
                "tables": {"type": "array", "items": {
                    "type": "object",
                    "properties": {
                        "name": {"type": "string"},
                        "description": {"type": "string"},
                        "row_count": {"type": ["integer", "null"]},
                        "columns": {"type": "array", "items": {"type": "object", "properties": {
                            "name": {"type": "string"},
                            "data_type": {"type": "string"},
                            "nullable": {"type": "boolean"},
                            "description": {"type": "string"}
                        }}},
                        "primary_key": {"type": "array", "items": {"type": "string"}},
                        "foreign_keys": {"type": "array", "items": {"type": "object"}},
                        "create_table": {"type": "string", "description": "The table as CREATE TABLE, restricted columns left out."}
                    }
                }}
            }
        },
        "Health": {
            "type": "object",
            "properties": {
                "ok": {"type": "boolean", "description": "Every check below passed."},
                "read_only_confirmed": {"type": "boolean", "description": "A write below the guard was refused by the database."},
                "database_reachable": {"type": "boolean"},
                "model_configured": {"type": "boolean"},
                "model_reachable": {"type": "boolean"},
                "tables": {"type": "integer"},
                "database": {"type": "string"},
                "dialect": {"type": "string"},
                "provider": {"type": ["string", "null"]},
                "model": {"type": ["string", "null"]},
                "query_log_enabled": {"type": "boolean", "description": "Answered questions are written to the query log."},
                "query_log_writable": {"type": "boolean", "description": "An insert into the query log (as the log role on PostgreSQL) was accepted just now, then rolled back."},
                "tracing_enabled": {"type": "boolean", "description": "Traces are exported over OTLP/HTTP (OTEL_EXPORTER_OTLP_ENDPOINT is set)."},
                "tracing_authenticated": {"type": "boolean", "description": "The collector accepted an export just now with the configured headers (OTEL_EXPORTER_OTLP_HEADERS); false when it is down or refuses them."},
                "traces_exported": {"type": "integer", "description": "Spans the collector accepted since start."},
                "trace_export_failures": {"type": "integer", "description": "Spans whose export failed since start; an answer never waits for an export."},
                "query_log_rows_written": {"type": "integer"},
                "query_log_write_failures": {"type": "integer", "description": "Rows not written since start; an answer never fails for it."},
                "schema_snapshot": {"type": "boolean", "description": "A schema snapshot exists to check drift against."},
                "schema_drifted": {"type": "boolean", "description": "The last drift check found differences."},
                "schema_differences": {"type": "array", "items": {"type": "string"}},
                "details": {"type": "object", "additionalProperties": {"type": "string"}},
                "local_model": {"oneOf": [{"$ref": "#/components/schemas/LocalModel"}, {"type": "null"}]}
            }
        },
        "LocalModel": {
            "type": "object",
            "properties": {
                "phase": {"type": "string", "enum": ["not_started", "starting", "installing", "downloading", "verifying", "loading", "ready", "failed", "exited"]},
                "message": {"type": "string", "description": "What is happening now, for a person."},
                "downloaded_bytes": {"type": ["integer", "null"]},
                "total_bytes": {"type": ["integer", "null"]},
                "bytes_per_second": {"type": ["number", "null"], "description": "The download's average rate since it began."},
                "phase_seconds": {"type": "number"},
                "total_seconds": {"type": ["number", "null"]},
                "base_url": {"type": ["string", "null"]},
                "model": {"type": ["string", "null"]},
                "started_by_askdb": {"type": "boolean", "description": "askdb started the process and stops it when it stops."},
                "error": {"type": ["string", "null"]}
            }
        }
    });
    // The conversation's fields, beside the agent's (POST /api/ask's AskResponse).
    if let Some(properties) = all
        .pointer_mut("/AgentResult/properties")
        .and_then(Value::as_object_mut)
    {
        properties.insert("conversation_id".to_string(), json!({"type": "string", "description": "The conversation this question belongs to: send it back to ask a follow-up."}));
        properties.insert("turn".to_string(), json!({"type": "integer", "minimum": 1, "description": "The question's turn in its conversation (1 for the first)."}));
        properties.insert("understood_as".to_string(), json!({"type": "string", "description": "A follow-up as one standalone question (\"the number of bills voided in 2024\"): what was answered. Absent for a conversation's first question."}));
    }
    // Replicas' fields, added here: the json! above is at the macro's recursion limit.
    if let Some(properties) = all
        .pointer_mut("/Health/properties")
        .and_then(Value::as_object_mut)
    {
        properties.insert("authentication_configured".to_string(), json!({"type": ["boolean", "null"], "description": "Requests must sign in: a user exists, or a trusted proxy names users. null when the users could not be read (the shared state is unreachable)."}));
        properties.insert("shared_state_enabled".to_string(), json!({"type": "boolean", "description": "The spend ledger, pace and sessions are shared with other replicas (--state-url)."}));
        properties.insert("shared_state_reachable".to_string(), json!({"type": "boolean", "description": "The shared state answered SELECT 1 just now (its URL is shown in details without its password)."}));
    }
    merge(&mut all, example_schemas());
    all
}

/// The page's sign-in (a json! of its own, like [`example_schemas`]).
fn session_paths() -> Value {
    let status = json!({"description": "Whether sign-in is on and as whom this request is.", "content": {"application/json": {
        "schema": {"$ref": "#/components/schemas/Session"},
        "example": {"sign_in": "required", "user": "ana"}
    }}});
    json!({
        "get": {
            "summary": "Whether the page must sign in",
            "description": "sign_in is open (no user was ever added: nothing to sign in to) or required; user is the session cookie's user, null without a live one. Public, like the page.",
            "responses": {"200": status}
        },
        "post": {
            "summary": "Sign in: a token for a session cookie",
            "description": "Exchanges a token from `askdb users add` for the askdb_session cookie: HttpOnly, SameSite=Strict, Path=/, 12 hours, Secure when the page was served over https (its Origin). The API then takes the cookie where it takes the token; a revoked user's sessions end with the token. Failed sign-ins (and wrong bearer tokens) are limited per client address.",
            "requestBody": {"required": true, "content": {"application/json": {
                "schema": {"type": "object", "required": ["token"], "additionalProperties": false, "properties": {"token": {"type": "string"}}},
                "example": {"token": "askdb_0123..."}
            }}},
            "responses": {
                "200": {"description": "Signed in; Set-Cookie carries the session.", "content": {"application/json": {"schema": {"type": "object", "properties": {"user": {"type": "string"}}}}}},
                "401": error_response("The token is not a live user's (wrong, revoked: one sentence for every case).", "unauthorized", "sign in, or send Authorization: Bearer TOKEN with a token from askdb users add"),
                "404": error_response("No user exists, so sign-in is off.", "sign_in_off", "askdb has no users, so there is nothing to sign in to"),
                "429": with_retry_after(error_response("Too many failed sign-ins from this address in a minute.", "too_many_sign_ins", "too many failed sign-ins from this address; try again in 42 s"))
            }
        },
        "delete": {
            "summary": "Sign out",
            "description": "Ends the cookie's session and clears the cookie.",
            "responses": {"204": {"description": "Signed out."}}
        }
    })
}

/// The verified examples' bodies (a json! of their own: one macro call holding every
/// schema passes the macro's recursion limit).
fn example_schemas() -> Value {
    json!({
        "SaveExampleRequest": {
            "type": "object",
            "required": ["question", "sql", "verified_by"],
            "additionalProperties": false,
            "properties": {
                "question": {"type": "string", "minLength": 1, "maxLength": crate::examples::MAX_QUESTION_CHARS},
                "sql": {"type": "string", "minLength": 1},
                "verified_by": {"type": "string", "minLength": 1, "maxLength": crate::examples::MAX_VERIFIER_CHARS, "description": "The person confirming it."},
                "notes": {"type": ["string", "null"], "maxLength": crate::examples::MAX_NOTES_CHARS}
            }
        },
        "Example": {
            "type": "object",
            "properties": {
                "id": {"type": "integer"},
                "database": {"type": "string", "description": "The database's identity: demo, sqlite:PATH, or postgres://HOST:PORT/DB."},
                "question": {"type": "string"},
                "sql": {"type": "string", "description": "As the gate checked and rendered it (LIMIT included)."},
                "verified_by": {"type": "string"},
                "verified_at": {"type": "string"},
                "schema_fingerprint": {"type": "string"},
                "tables": {"type": "array", "items": {"type": "string"}},
                "notes": {"type": "string"},
                "set_aside": {"type": "string", "description": "Why it is no longer used; absent while it is."}
            }
        },
        "WrongAnswerRequest": {
            "type": "object",
            "required": ["question", "marked_by"],
            "additionalProperties": false,
            "properties": {
                "question": {"type": "string", "minLength": 1, "maxLength": crate::examples::MAX_QUESTION_CHARS},
                "sql": {"type": ["string", "null"], "maxLength": crate::examples::wrong::MAX_MARK_SQL_CHARS},
                "examples": {"type": "array", "maxItems": crate::examples::wrong::MAX_EXAMPLES_PER_MARK, "items": {"type": "integer"}, "description": "The ids of the verified examples the answer used."},
                "marked_by": {"type": "string", "minLength": 1, "maxLength": crate::examples::MAX_VERIFIER_CHARS, "description": "The person marking it."}
            }
        },
        "WrongMark": {
            "type": "object",
            "properties": {
                "id": {"type": "integer"},
                "database": {"type": "string"},
                "question": {"type": "string"},
                "sql": {"type": "string"},
                "examples": {"type": "array", "items": {"type": "integer"}},
                "marked_by": {"type": "string"},
                "marked_at": {"type": "string"}
            }
        },
        "Session": {
            "type": "object",
            "properties": {
                "sign_in": {"type": "string", "enum": ["open", "required"]},
                "user": {"type": ["string", "null"]}
            }
        },
        "SavedExample": {
            "type": "object",
            "properties": {
                "example": {"$ref": "#/components/schemas/Example"},
                "replaced": {"type": "array", "items": {"type": "integer"}}
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use serde::de::DeserializeOwned;
    use serde::Serialize;

    use super::*;

    /// The enum the document lists at `pointer`.
    fn listed(pointer: &str) -> Vec<String> {
        let document = document();
        let values = document
            .pointer(pointer)
            .and_then(Value::as_array)
            .unwrap_or_else(|| panic!("{pointer} lists an enum"));
        values
            .iter()
            .map(|value| value.as_str().unwrap_or_default().to_string())
            .collect()
    }

    /// Every value the document lists reads as the type, and every value of the type is
    /// listed, in the words serde writes.
    fn same<T: Serialize + DeserializeOwned>(pointer: &str, all: impl IntoIterator<Item = T>) {
        let listed = listed(pointer);
        let written: Vec<String> = all
            .into_iter()
            .map(|value| {
                serde_json::to_value(&value)
                    .ok()
                    .and_then(|value| value.as_str().map(str::to_string))
                    .unwrap_or_default()
            })
            .collect();
        assert_eq!(listed, written, "{pointer}");
        for name in &listed {
            assert!(
                serde_json::from_value::<T>(Value::from(name.as_str())).is_ok(),
                "{pointer}: {name}"
            );
        }
    }

    #[test]
    fn the_documents_ask_request_and_result_are_the_types_fields() {
        let document = document();
        let properties = |name: &str| -> Vec<String> {
            document
                .pointer(&format!("/components/schemas/{name}/properties"))
                .and_then(Value::as_object)
                .map(|properties| properties.keys().cloned().collect())
                .unwrap_or_default()
        };
        for field in properties("AskRequest") {
            let value = match field.as_str() {
                "explain" => Value::Bool(true),
                "mode" => Value::from("agent"),
                _ => Value::from("0123456789abcdef0123456789abcdef"),
            };
            let mut body = serde_json::json!({"question": "q"});
            body[field.as_str()] = value;
            assert!(
                serde_json::from_value::<super::super::api::AskRequest>(body).is_ok(),
                "AskRequest takes {field}"
            );
        }
        let mut result = crate::agent::AgentResult::for_tests("q", crate::agent::Decision::Answer);
        result.understood_as = Some("q in context".to_string());
        let response = super::super::api::AskResponse {
            conversation_id: "0123456789abcdef0123456789abcdef".to_string(),
            turn: 2,
            result,
        };
        let written = serde_json::to_value(&response).expect("serialises");
        let documented = properties("AgentResult");
        for key in written.as_object().expect("an object").keys() {
            assert!(
                documented.contains(key)
                    || ["strategy", "candidates_tried"].contains(&key.as_str()),
                "AgentResult documents {key}"
            );
        }
    }

    #[test]
    fn the_documents_enums_are_the_types_values() {
        let schemas = "/components/schemas";
        same(
            &format!("{schemas}/AskRequest/properties/mode/enum"),
            Mode::ALL,
        );
        same(
            &format!("{schemas}/AgentResult/properties/mode/enum"),
            Mode::ALL,
        );
        same(
            &format!("{schemas}/AgentResult/properties/decision/enum"),
            Decision::ALL,
        );
        same(
            &format!("{schemas}/AgentResult/properties/schema_mode/enum"),
            SchemaMode::ALL,
        );
        same(
            &format!("{schemas}/AgentResult/properties/warnings/items/properties/check/enum"),
            Check::ALL,
        );
        same(
            &format!("{schemas}/Chart/properties/kind/enum"),
            ChartKind::ALL,
        );
        same(
            &format!("{schemas}/AgentResult/properties/examples/items/properties/role/enum"),
            ExampleRole::ALL,
        );
        same(
            &format!("{schemas}/FailedAttempt/properties/error_type/enum"),
            FailureKind::all(),
        );
        // Every mode the document offers is one the API takes.
        for mode in listed(&format!("{schemas}/AskRequest/properties/mode/enum")) {
            assert!(mode.parse::<Mode>().is_ok(), "{mode}");
        }
        assert!(
            listed(&format!("{schemas}/AskRequest/properties/mode/enum"))
                .contains(&"plain".to_string())
        );
    }
}
