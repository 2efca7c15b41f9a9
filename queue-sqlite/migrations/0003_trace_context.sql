-- The W3C trace context of the code that enqueued a job (issue 34): the
-- traceparent, then one space and the tracestate when there is one, as
-- queue_core::TraceContext::to_stored writes it. NULL: none was given.
-- History keeps it, and a dead letter sent back to the live table takes it
-- along.
ALTER TABLE job_queue ADD COLUMN trace_context TEXT;
ALTER TABLE job_history ADD COLUMN trace_context TEXT;
