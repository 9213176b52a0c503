//! Errors as OpenAI's API reports them: `{"error": {"message", "type", "param", "code"}}` with
//! the matching HTTP status.

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Serialize;

/// An error answered to a client.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{status}: {message}")]
pub struct ApiError {
    /// The HTTP status.
    pub status: StatusCode,
    /// What went wrong, for a person.
    pub message: String,
    /// OpenAI's `type`: `invalid_request_error`, `server_error`, ...
    pub kind: &'static str,
    /// The request field at fault, if one is.
    pub param: Option<String>,
    /// A machine-readable code, if there is one.
    pub code: Option<&'static str>,
    /// Seconds for a `Retry-After` header (503).
    pub retry_after: Option<u32>,
}

impl ApiError {
    fn new(status: StatusCode, kind: &'static str, message: impl Into<String>) -> ApiError {
        ApiError {
            status,
            message: message.into(),
            kind,
            param: None,
            code: None,
            retry_after: None,
        }
    }

    /// 400 about the whole request.
    pub fn bad_request(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::BAD_REQUEST, "invalid_request_error", message)
    }

    /// 400 about the field `param`.
    pub fn invalid(param: impl Into<String>, message: impl Into<String>) -> ApiError {
        let mut e = ApiError::bad_request(message);
        e.param = Some(param.into());
        e.code = Some("invalid_value");
        e
    }

    /// 400 for a field this server does not support (rather than ignoring it).
    pub fn unsupported(param: &str, what: &str) -> ApiError {
        let mut e = ApiError::bad_request(format!("`{param}`: {what} is not supported"));
        e.param = Some(param.to_string());
        e.code = Some("unsupported_parameter");
        e
    }

    /// 401.
    pub fn unauthorized() -> ApiError {
        let mut e = ApiError::new(
            StatusCode::UNAUTHORIZED,
            "invalid_request_error",
            "a valid API key is needed: send `Authorization: Bearer KEY`",
        );
        e.code = Some("invalid_api_key");
        e
    }

    /// 404 for a route that does not exist.
    pub fn not_found(method: &str, path: &str) -> ApiError {
        let mut e = ApiError::new(
            StatusCode::NOT_FOUND,
            "invalid_request_error",
            format!("no route for {method} {path}"),
        );
        e.code = Some("not_found");
        e
    }

    /// 405 for a route that exists under another method.
    pub fn method_not_allowed(method: &str, path: &str) -> ApiError {
        ApiError::new(
            StatusCode::METHOD_NOT_ALLOWED,
            "invalid_request_error",
            format!("{path} does not take {method}"),
        )
    }

    /// 413.
    pub fn too_large(limit: usize) -> ApiError {
        let mut e = ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "invalid_request_error",
            format!("the request body is larger than the server's limit of {limit} bytes"),
        );
        e.code = Some("request_too_large");
        e
    }

    /// 408: the body did not arrive within `limit`.
    pub fn body_timeout(limit: std::time::Duration) -> ApiError {
        let mut e = ApiError::new(
            StatusCode::REQUEST_TIMEOUT,
            "invalid_request_error",
            format!(
                "the request body did not arrive within {:.1} seconds",
                limit.as_secs_f64()
            ),
        );
        e.code = Some("request_timeout");
        e
    }

    /// 503 with `Retry-After`.
    pub fn busy() -> ApiError {
        let mut e = ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "server_error",
            "the server is busy: too many requests are waiting; retry later",
        );
        e.code = Some("server_busy");
        e.retry_after = Some(1);
        e
    }

    /// 503: the server stopped before the request could start.
    pub fn shutting_down() -> ApiError {
        let mut e = ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "server_error",
            "the server is shutting down; retry on another",
        );
        e.code = Some("server_shutting_down");
        e
    }

    /// 500.
    pub fn internal(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "server_error", message)
    }

    /// The JSON error object.
    pub fn body(&self) -> serde_json::Value {
        serde_json::to_value(self.wire()).unwrap_or_default()
    }

    /// The error object as written: `{"error": {"message", "type", "param", "code"}}`.
    pub(crate) fn wire(&self) -> ErrorBody<'_> {
        ErrorBody {
            error: ErrorObject {
                message: &self.message,
                kind: self.kind,
                param: self.param.as_deref(),
                code: self.code,
            },
        }
    }
}

/// OpenAI's error response: `{"error": {...}}`.
#[derive(Debug, Serialize)]
pub(crate) struct ErrorBody<'a> {
    /// What went wrong.
    pub error: ErrorObject<'a>,
}

/// OpenAI's error object; `param` and `code` are `null` when there is none.
#[derive(Debug, Serialize)]
pub(crate) struct ErrorObject<'a> {
    /// For a person.
    pub message: &'a str,
    /// `invalid_request_error`, `server_error`, ...
    #[serde(rename = "type")]
    pub kind: &'a str,
    /// The request field at fault.
    pub param: Option<&'a str>,
    /// A machine-readable code.
    pub code: Option<&'a str>,
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut response = (
            self.status,
            [(header::CONTENT_TYPE, "application/json")],
            serde_json::to_string(&self.wire()).unwrap_or_default(),
        )
            .into_response();
        if let Some(secs) = self.retry_after {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(secs));
        }
        response
    }
}
