//! Failures as pages: the status code says what kind, the page says what.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use queue_core::QueueError;

use crate::layout;

/// A request that could not be served.
#[derive(Debug)]
pub(crate) struct Failure {
    status: StatusCode,
    message: String,
}

impl Failure {
    /// A refusal with `status`.
    pub(crate) fn new(status: StatusCode, message: impl Into<String>) -> Self {
        Self {
            status,
            message: message.into(),
        }
    }
}

impl From<QueueError> for Failure {
    fn from(error: QueueError) -> Self {
        let status = match error {
            QueueError::InvalidInput { .. } => StatusCode::BAD_REQUEST,
            QueueError::NotFound { .. } => StatusCode::NOT_FOUND,
            QueueError::Conflict { .. } => StatusCode::CONFLICT,
            QueueError::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
            QueueError::NotSupported { .. } => StatusCode::NOT_IMPLEMENTED,
            _ => StatusCode::INTERNAL_SERVER_ERROR,
        };
        Self::new(status, error.to_string())
    }
}

impl IntoResponse for Failure {
    fn into_response(self) -> Response {
        let title = self.status.canonical_reason().unwrap_or("Error");
        let body = layout::bare(
            title,
            maud::html! {
                p.error { (self.message) }
                p { a href="/" { "Back to the overview" } }
            },
        );
        (self.status, body).into_response()
    }
}
