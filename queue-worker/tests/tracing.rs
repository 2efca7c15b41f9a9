//! Trace propagation across the queue (feature `opentelemetry`): a job
//! enqueued inside a span runs in a handler span whose parent is that span,
//! read back from OpenTelemetry's in-memory exporter, on the in-memory
//! storage and on SQLite.

#![cfg(feature = "opentelemetry")]

use std::sync::Arc;
use std::time::{Duration, Instant};

use opentelemetry::trace::{SpanId, TraceId, TracerProvider as _};
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider, SpanData};
use queue_core::{HistoryFilter, NewJob, Storage};
use queue_sqlite::SqliteStorage;
use queue_testkit::MemoryStorage;
use queue_worker::{JobContext, NewJobTraceExt, QueueOptions, WorkerBuilder};
use serde_json::json;
use tracing::Instrument;
use tracing_subscriber::layer::SubscriberExt;

/// A subscriber exporting every span to an in-memory exporter.
struct Traced {
    exporter: InMemorySpanExporter,
    provider: SdkTracerProvider,
    _guard: tracing::subscriber::DefaultGuard,
}

impl Traced {
    /// Installs the subscriber for this thread (the tests run on a
    /// current-thread runtime, so the worker's tasks see it too).
    fn install() -> Self {
        let exporter = InMemorySpanExporter::default();
        let provider = SdkTracerProvider::builder()
            .with_simple_exporter(exporter.clone())
            .build();
        let layer = tracing_opentelemetry::layer().with_tracer(provider.tracer("queue-test"));
        let subscriber = tracing_subscriber::registry().with(layer);
        let guard = tracing::subscriber::set_default(subscriber);
        Self {
            exporter,
            provider,
            _guard: guard,
        }
    }

    fn spans(&self) -> Vec<SpanData> {
        self.provider.force_flush().expect("flush");
        self.exporter.get_finished_spans().expect("finished spans")
    }

    fn named(&self, name: &str) -> Vec<SpanData> {
        self.spans()
            .into_iter()
            .filter(|span| span.name == name)
            .collect()
    }
}

/// Enqueues two jobs inside a span "enqueue" (one by `with_current_trace`
/// through the storage, one through `Worker::enqueue`, which captures by
/// itself) and one outside any span, runs them, and checks the handler
/// spans' parents.
async fn handler_spans_are_children_of_the_enqueuer<S: Storage>(storage: Arc<S>) {
    let traced = Traced::install();
    let worker = WorkerBuilder::from_arc(Arc::clone(&storage))
        .queue(
            "traced",
            QueueOptions::with_concurrency(1),
            |_ctx: JobContext| async move {
                tracing::info_span!("handler work").in_scope(|| {});
                Ok(None)
            },
        )
        .expect("queue")
        .start()
        .expect("start");

    let enqueue_span = tracing::info_span!("enqueue");
    let (direct, through_worker) = async {
        let direct = storage
            .enqueue(NewJob::new("traced", json!("direct")).with_current_trace())
            .await
            .expect("enqueue");
        let through = worker
            .enqueue(NewJob::new("traced", json!("worker")))
            .await
            .expect("enqueue");
        (direct.id, through.id)
    }
    .instrument(enqueue_span)
    .await;
    let untraced = storage
        .enqueue(NewJob::new("traced", json!("untraced")))
        .await
        .expect("enqueue")
        .id;

    let until = Instant::now() + Duration::from_secs(20);
    loop {
        let filter = HistoryFilter::default();
        let done = storage
            .list_history(&filter)
            .await
            .expect("history")
            .records;
        if done.len() == 3 {
            break;
        }
        assert!(Instant::now() < until, "jobs did not finish: {done:?}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    worker.shutdown(Duration::from_secs(5)).await;

    let enqueuers = traced.named("enqueue");
    assert_eq!(enqueuers.len(), 1, "{enqueuers:?}");
    let enqueuer = &enqueuers[0].span_context;
    let stored = storage
        .get_history(direct)
        .await
        .expect("history")
        .and_then(|record| record.trace_context)
        .expect("the job kept its trace context");
    assert_eq!(stored.trace_id(), enqueuer.trace_id().to_string());
    assert_eq!(stored.parent_id(), enqueuer.span_id().to_string());

    let jobs = traced.named("job");
    assert_eq!(jobs.len(), 3, "{jobs:?}");
    let job_span = |id: queue_core::JobId| {
        jobs.iter()
            .find(|span| {
                span.attributes
                    .iter()
                    .any(|kv| kv.key.as_str() == "job_id" && kv.value.as_str() == id.to_string())
            })
            .unwrap_or_else(|| panic!("no span for job {id}: {jobs:?}"))
    };
    for id in [direct, through_worker] {
        let span = job_span(id);
        assert_eq!(
            span.span_context.trace_id(),
            enqueuer.trace_id(),
            "job {id}"
        );
        assert_eq!(span.parent_span_id, enqueuer.span_id(), "job {id}");
        assert!(
            span.attributes
                .iter()
                .any(|kv| kv.key.as_str() == "traceparent"
                    && kv.value.as_str() == stored.traceparent()),
            "job {id} records the traceparent: {span:?}"
        );
    }
    let lone = job_span(untraced);
    assert_ne!(lone.span_context.trace_id(), enqueuer.trace_id());
    assert_eq!(lone.parent_span_id, SpanId::INVALID);
    assert_ne!(lone.span_context.trace_id(), TraceId::INVALID);

    // The handler's own spans nest under the job span.
    let work = traced.named("handler work");
    assert_eq!(work.len(), 3);
    let traced_job = job_span(direct);
    assert!(work.iter().any(
        |span| span.parent_span_id == traced_job.span_context.span_id()
            && span.span_context.trace_id() == enqueuer.trace_id()
    ));
}

#[tokio::test]
async fn memory_handler_spans_are_children_of_the_enqueuer() {
    handler_spans_are_children_of_the_enqueuer(Arc::new(MemoryStorage::new())).await;
}

#[tokio::test]
async fn sqlite_handler_spans_are_children_of_the_enqueuer() {
    let storage = SqliteStorage::connect("sqlite::memory:")
        .await
        .expect("sqlite");
    handler_spans_are_children_of_the_enqueuer(Arc::new(storage)).await;
}
