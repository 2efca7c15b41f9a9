//! The W3C trace context of the code that enqueued a job.
//!
//! A job carries the `traceparent` (and `tracestate`, if any) current when
//! it was enqueued, so the worker can make the handler's span a child of
//! the enqueuer's. This module only checks and carries the two strings:
//! capturing and restoring them is `queue-worker`'s (feature
//! `opentelemetry`).
//!
//! Backends store it in one nullable text column, `trace_context`, in the
//! form [`TraceContext::to_stored`] writes: the traceparent, then, when a
//! tracestate is set, one space and the tracestate. A traceparent never
//! holds a space, so the first space splits the two.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::{QueueError, Result};

/// The longest tracestate kept, in bytes: the W3C limit for what a
/// platform must propagate.
pub const MAX_TRACESTATE_BYTES: usize = 512;

/// The trace context of a job's enqueuer: a validated W3C `traceparent`
/// and an optional `tracestate`.
///
/// ```
/// use queue_core::TraceContext;
///
/// let ctx = TraceContext::new(
///     "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
///     Some("vendor=value"),
/// )
/// .unwrap();
/// assert_eq!(ctx.trace_id(), "4bf92f3577b34da6a3ce929d0e0e4736");
/// assert_eq!(ctx.parent_id(), "00f067aa0ba902b7");
/// assert!(ctx.sampled());
/// assert!(TraceContext::new("00-not-a-trace", None::<&str>).is_err());
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "RawTraceContext", into = "RawTraceContext")]
pub struct TraceContext {
    traceparent: String,
    tracestate: Option<String>,
}

/// The serialized form: both strings, checked on the way in.
#[derive(Serialize, Deserialize)]
struct RawTraceContext {
    traceparent: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    tracestate: Option<String>,
}

impl TryFrom<RawTraceContext> for TraceContext {
    type Error = QueueError;

    fn try_from(raw: RawTraceContext) -> Result<Self> {
        Self::new(raw.traceparent, raw.tracestate)
    }
}

impl From<TraceContext> for RawTraceContext {
    fn from(ctx: TraceContext) -> Self {
        Self {
            traceparent: ctx.traceparent,
            tracestate: ctx.tracestate,
        }
    }
}

impl TraceContext {
    /// Checks `traceparent` (and `tracestate`, when given) and keeps them.
    /// An empty tracestate counts as none.
    ///
    /// # Errors
    /// [`QueueError::InvalidInput`] naming `traceparent` when it is not
    /// `version-traceid-parentid-flags` in lowercase hex (version `00` is
    /// exactly 55 characters, version `ff` is forbidden, an all-zero trace
    /// or parent id is invalid), or `tracestate` when it is longer than
    /// [`MAX_TRACESTATE_BYTES`], holds a character outside printable ASCII,
    /// or has a list member without `=`.
    pub fn new(
        traceparent: impl Into<String>,
        tracestate: Option<impl Into<String>>,
    ) -> Result<Self> {
        let traceparent = traceparent.into();
        check_traceparent(&traceparent)
            .map_err(|reason| QueueError::invalid("traceparent", reason))?;
        let tracestate = tracestate.map(Into::into).filter(|s| !s.is_empty());
        if let Some(state) = &tracestate {
            check_tracestate(state).map_err(|reason| QueueError::invalid("tracestate", reason))?;
        }
        Ok(Self {
            traceparent,
            tracestate,
        })
    }

    /// The `traceparent` header value.
    pub fn traceparent(&self) -> &str {
        &self.traceparent
    }

    /// The `tracestate` header value, if any.
    pub fn tracestate(&self) -> Option<&str> {
        self.tracestate.as_deref()
    }

    /// The trace id: 32 lowercase hex digits.
    pub fn trace_id(&self) -> &str {
        &self.traceparent[3..35]
    }

    /// The enqueuer's span id, the parent of the handler's span: 16
    /// lowercase hex digits.
    pub fn parent_id(&self) -> &str {
        &self.traceparent[36..52]
    }

    /// The trace flags' byte.
    pub fn flags(&self) -> u8 {
        u8::from_str_radix(&self.traceparent[53..55], 16).unwrap_or(0)
    }

    /// True when the enqueuer's trace was sampled (flag bit 0).
    pub fn sampled(&self) -> bool {
        self.flags() & 1 == 1
    }

    /// The text a backend stores in its `trace_context` column.
    pub fn to_stored(&self) -> String {
        match &self.tracestate {
            Some(state) => format!("{} {state}", self.traceparent),
            None => self.traceparent.clone(),
        }
    }

    /// Reads what [`TraceContext::to_stored`] wrote.
    ///
    /// # Errors
    /// [`QueueError::InvalidInput`] as [`TraceContext::new`].
    pub fn from_stored(stored: String) -> Result<Self> {
        match stored.split_once(' ') {
            Some((parent, state)) => Self::new(parent, Some(state)),
            None => Self::new(stored, None::<String>),
        }
    }
}

impl fmt::Display for TraceContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_stored())
    }
}

fn is_lower_hex(s: &str) -> bool {
    s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

fn check_traceparent(value: &str) -> std::result::Result<(), String> {
    let shape = "must be version-traceid-parentid-flags: 2, 32, 16 and 2 lowercase hex digits";
    if value.len() < 55 || !value.is_ascii() {
        return Err(format!("is {value:?}, it {shape}"));
    }
    let (version, trace_id, parent_id, flags) =
        (&value[0..2], &value[3..35], &value[36..52], &value[53..55]);
    let dashes = [2, 35, 52].iter().all(|&i| value.as_bytes()[i] == b'-');
    if !dashes
        || ![version, trace_id, parent_id, flags]
            .iter()
            .all(|s| is_lower_hex(s))
    {
        return Err(format!("is {value:?}, it {shape}"));
    }
    if version == "ff" {
        return Err("has version ff, which is forbidden".into());
    }
    // Version 00 is exactly 55 characters; a later version may append
    // fields after a dash, which this reader keeps but does not interpret.
    if value.len() > 55 && (version == "00" || value.as_bytes()[55] != b'-') {
        return Err(format!("is {value:?}, it has characters after the flags"));
    }
    if trace_id.bytes().all(|b| b == b'0') {
        return Err("has an all-zero trace id".into());
    }
    if parent_id.bytes().all(|b| b == b'0') {
        return Err("has an all-zero parent id".into());
    }
    Ok(())
}

fn check_tracestate(value: &str) -> std::result::Result<(), String> {
    if value.len() > MAX_TRACESTATE_BYTES {
        return Err(format!(
            "is {} bytes, the most kept is {MAX_TRACESTATE_BYTES}",
            value.len()
        ));
    }
    if !value.bytes().all(|b| (0x20..=0x7e).contains(&b)) {
        return Err("holds a character outside printable ASCII".into());
    }
    for member in value.split(',').map(str::trim).filter(|m| !m.is_empty()) {
        match member.split_once('=') {
            Some((key, val)) if !key.is_empty() && !val.is_empty() => {}
            _ => return Err(format!("has the member {member:?}, not key=value")),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::TraceContext;

    const PARENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    #[test]
    fn a_valid_context_reads_its_parts_and_round_trips() {
        let ctx = TraceContext::new(PARENT, Some("a=1,b=2")).expect("valid");
        assert_eq!(ctx.trace_id(), "4bf92f3577b34da6a3ce929d0e0e4736");
        assert_eq!(ctx.parent_id(), "00f067aa0ba902b7");
        assert_eq!(ctx.flags(), 1);
        assert_eq!(
            TraceContext::from_stored(ctx.to_stored()).ok(),
            Some(ctx.clone())
        );
        let json = serde_json::to_string(&ctx).expect("serializes");
        assert_eq!(serde_json::from_str::<TraceContext>(&json).ok(), Some(ctx));
        let bare = TraceContext::new(PARENT, None::<String>).expect("valid");
        assert_eq!(bare.to_stored(), PARENT);
        assert_eq!(TraceContext::from_stored(PARENT.into()).ok(), Some(bare));
        assert_eq!(
            TraceContext::new(PARENT, Some(""))
                .ok()
                .and_then(|c| c.tracestate().map(String::from)),
            None
        );
    }

    #[test]
    fn bad_input_names_its_field() {
        let field = |parent: &str, state: Option<&str>| {
            TraceContext::new(parent, state)
                .err()
                .and_then(|e| e.invalid_field())
        };
        for bad in [
            "",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
            "00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01 x",
        ] {
            assert_eq!(field(bad, None), Some("traceparent"), "{bad:?}");
        }
        assert!(
            TraceContext::new(
                "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-future",
                None::<String>
            )
            .is_ok()
        );
        for bad in ["novalue", "a=1,=2", "a=\u{e9}", "a=1\nb=2"] {
            assert_eq!(field(PARENT, Some(bad)), Some("tracestate"), "{bad:?}");
        }
        assert_eq!(field(PARENT, Some(&"a=1,".repeat(200))), Some("tracestate"));
        assert!(serde_json::from_str::<TraceContext>(r#"{"traceparent":"nope"}"#).is_err());
    }
}
