//! The enqueuer's trace context, restored around each handler run.
//!
//! Every job's span (`job`, with `queue`, `job_id`, `attempt`) records the
//! stored traceparent as its `traceparent` field. With the feature
//! `opentelemetry`, the span is also made a child of the enqueuer's span
//! (tracing-opentelemetry's `set_parent`, before the span is first
//! entered), so a trace exported from the enqueuer and the handler is one
//! tree; and [`NewJobTraceExt::with_current_trace`] captures the current
//! span's context when a job is built.

use queue_core::Job;
use tracing::{Span, info_span};

/// The span a run of `job` is instrumented with: a child of the enqueuer's
/// span when the job carries a trace context and the feature
/// `opentelemetry` is on.
pub(crate) fn job_span(job: &Job, attempt: u32) -> Span {
    let traceparent = job.trace_context.as_ref().map(|ctx| ctx.traceparent());
    let span = info_span!(
        "job",
        queue = %job.queue,
        job_id = %job.id,
        attempt,
        traceparent = traceparent,
    );
    #[cfg(feature = "opentelemetry")]
    if let Some(ctx) = &job.trace_context {
        otel::set_parent(&span, ctx);
    }
    span
}

#[cfg(feature = "opentelemetry")]
pub use otel::{NewJobTraceExt, current_trace_context};

#[cfg(feature = "opentelemetry")]
mod otel {
    use std::str::FromStr;

    use opentelemetry::Context;
    use opentelemetry::trace::{
        SpanContext, SpanId, TraceContextExt, TraceFlags, TraceId, TraceState,
    };
    use queue_core::{NewJob, TraceContext};
    use tracing::Span;
    use tracing_opentelemetry::OpenTelemetrySpanExt;

    /// The OpenTelemetry context of the current `tracing` span as a W3C
    /// trace context, or `None` when there is no valid one (no span, or no
    /// `tracing-opentelemetry` layer in the subscriber).
    pub fn current_trace_context() -> Option<TraceContext> {
        let cx = Span::current().context();
        let span = cx.span();
        let span_context = span.span_context();
        if !span_context.is_valid() {
            return None;
        }
        let traceparent = format!(
            "00-{}-{}-{:02x}",
            span_context.trace_id(),
            span_context.span_id(),
            span_context.trace_flags().to_u8()
        );
        let tracestate = span_context.trace_state().header();
        TraceContext::new(traceparent, Some(tracestate)).ok()
    }

    /// Fills a [`NewJob`]'s trace context from the current span.
    pub trait NewJobTraceExt {
        /// The job with [`current_trace_context`] as its trace context,
        /// or unchanged when there is none.
        fn with_current_trace(self) -> Self;
    }

    impl NewJobTraceExt for NewJob {
        fn with_current_trace(self) -> Self {
            match current_trace_context() {
                Some(ctx) => self.trace_context(ctx),
                None => self,
            }
        }
    }

    /// Makes `span` a child of the remote span `ctx` names. A subscriber
    /// without the OpenTelemetry layer leaves the span as it is.
    pub(super) fn set_parent(span: &Span, ctx: &TraceContext) {
        let (Ok(trace_id), Ok(span_id)) = (
            TraceId::from_hex(ctx.trace_id()),
            SpanId::from_hex(ctx.parent_id()),
        ) else {
            return;
        };
        let state = ctx
            .tracestate()
            .and_then(|s| TraceState::from_str(s).ok())
            .unwrap_or_default();
        let remote = SpanContext::new(trace_id, span_id, TraceFlags::new(ctx.flags()), true, state);
        let parent = Context::new().with_remote_span_context(remote);
        // Err only when no OpenTelemetry layer listens: nothing to link.
        let _ = span.set_parent(parent);
    }
}
