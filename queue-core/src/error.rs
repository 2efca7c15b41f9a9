//! The one error type every storage backend and the worker speak.

use crate::{Capability, Lease};

/// A boxed error from a driver or other lower layer.
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Shorthand for results whose error is [`QueueError`].
pub type Result<T, E = QueueError> = std::result::Result<T, E>;

/// Everything that can go wrong in a queue operation.
///
/// The variants are semantic: callers match on what happened, not on which
/// database said it. Driver detail travels as the `source`.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum QueueError {
    /// An argument was rejected before anything was written.
    #[error("invalid {field}: {reason}")]
    InvalidInput {
        /// The field or argument that was rejected, e.g. `queue` or `max_attempts`.
        field: &'static str,
        /// Why it was rejected, in words a user can act on.
        reason: String,
    },

    /// The lease no longer belongs to its holder: it expired and the job was
    /// claimed again, or the job was finished, discarded or reclaimed.
    /// Nothing was changed.
    #[error("lease lost for job {} (worker {}, attempt {})", .lease.job_id, .lease.worker_id, .lease.attempt)]
    LeaseLost {
        /// The lease that was presented.
        lease: Lease,
    },

    /// The named thing does not exist (in the place the operation looks).
    #[error("{what} not found")]
    NotFound {
        /// What was looked for, e.g. `live job 42` or `dead letter 7`.
        what: String,
    },

    /// The operation would break a uniqueness rule, e.g. retrying a dead
    /// letter whose unique key is live again.
    #[error("conflict: {reason}")]
    Conflict {
        /// What collided.
        reason: String,
    },

    /// The storage does not implement this operation: it belongs to a
    /// [`Capability`] the storage does not declare
    /// ([`crate::Storage::capabilities`]). Nothing was changed.
    #[error("{}", not_supported_message(.operation, .capability))]
    NotSupported {
        /// The operation's name, e.g. `pause_queue`.
        operation: &'static str,
        /// The capability it belongs to, when it belongs to one.
        capability: Option<Capability>,
    },

    /// A payload, result or error value could not be turned into JSON or back.
    #[error("serialization failed: {0}")]
    Serialization(#[source] serde_json::Error),

    /// The database could not be reached (connection refused or lost, pool
    /// timed out). Worth retrying after a pause.
    #[error("storage unavailable: {0}")]
    Unavailable(#[source] BoxError),

    /// Any other failure reported by the storage backend.
    #[error("storage backend error: {0}")]
    Backend(#[source] BoxError),
}

impl QueueError {
    /// Builds an [`QueueError::InvalidInput`] for `field`.
    pub fn invalid(field: &'static str, reason: impl Into<String>) -> Self {
        Self::InvalidInput {
            field,
            reason: reason.into(),
        }
    }

    /// Builds a [`QueueError::NotFound`] describing `what`.
    pub fn not_found(what: impl Into<String>) -> Self {
        Self::NotFound { what: what.into() }
    }

    /// Builds a [`QueueError::NotSupported`] for `operation` of `capability`.
    pub fn not_supported(capability: Capability, operation: &'static str) -> Self {
        Self::NotSupported {
            operation,
            capability: Some(capability),
        }
    }

    /// Wraps a driver error as [`QueueError::Backend`].
    pub fn backend(source: impl Into<BoxError>) -> Self {
        Self::Backend(source.into())
    }

    /// Wraps a connectivity error as [`QueueError::Unavailable`].
    pub fn unavailable(source: impl Into<BoxError>) -> Self {
        Self::Unavailable(source.into())
    }

    /// True when repeating the same call later may succeed.
    pub fn is_transient(&self) -> bool {
        matches!(self, Self::Unavailable(_))
    }

    /// The field an [`QueueError::InvalidInput`] names, if this is one.
    pub fn invalid_field(&self) -> Option<&'static str> {
        match self {
            Self::InvalidInput { field, .. } => Some(field),
            _ => None,
        }
    }
}

fn not_supported_message(operation: &str, capability: &Option<Capability>) -> String {
    match capability {
        Some(capability) => format!(
            "this storage does not support {} (capability {capability}, Storage::{operation})",
            capability.what()
        ),
        None => format!("this storage does not support Storage::{operation}"),
    }
}

impl From<serde_json::Error> for QueueError {
    fn from(error: serde_json::Error) -> Self {
        Self::Serialization(error)
    }
}
