//! The batch enqueue by binary COPY: a batch of jobs without unique keys
//! goes into `job_queue` as one `COPY ... FROM STDIN (FORMAT binary)`
//! instead of the UNNEST statement of `sql/enqueue.rs`.
//!
//! Two round trips: the storage's now and the batch's ids (in input
//! order, from the sequence, as the INSERT takes them), then the rows. The
//! server neither plans a statement nor unpacks arrays; it reads each
//! row's fields as sent. COPY cannot take `ON CONFLICT`, so a batch with
//! any unique key keeps to the INSERT, and with it the unique-key contract;
//! so do batches under [`COPY_FROM`] jobs, where one round trip beats the
//! saving. A job with dependencies is written waiting, as by the INSERT
//! (`enqueue::written_at`); its links follow in the same transaction.

use chrono::{DateTime, Utc};
use queue_core::{EnqueueOutcome, JobId, ValidJob};
use sqlx::{PgConnection, Row};

use crate::PgStorage;
use crate::enqueue::written_at;

/// The smallest batch that goes in by COPY. Below it the INSERT's one
/// round trip wins: over loopback TCP, COPY ran at 0.92x the INSERT's rate
/// at 64 jobs a batch, 0.97x at 128, 1.02x at 256, 1.17x at 512 and at
/// 1,000 (docs/benchmarks.md, "Batch enqueue by COPY").
pub(crate) const COPY_FROM: usize = 256;

/// Whether `jobs` go in by COPY: enough of them, none with a unique key.
pub(crate) fn by_copy(jobs: &[&ValidJob]) -> bool {
    jobs.len() >= COPY_FROM && jobs.iter().all(|job| job.unique_key.is_none())
}

impl PgStorage {
    /// Inserts `jobs` (none with a unique key) by COPY on `conn`; the
    /// outcome of each, in order. Atomic as one statement: on any error
    /// no job was written (ids taken for them are left unused, as a failed
    /// INSERT leaves its `nextval`s).
    pub(crate) async fn copy_rows(
        &self,
        conn: &mut PgConnection,
        jobs: &[&ValidJob],
    ) -> Result<Vec<EnqueueOutcome>, sqlx::Error> {
        let count = i32::try_from(jobs.len())
            .map_err(|_| sqlx::Error::Protocol("a batch of more than 2^31 jobs".into()))?;
        let row = self
            .on(conn)
            .fetch_one(
                sqlx::query(self.sql.enqueue_copy_ids.clone())
                    .bind(self.now_override())
                    .bind(count),
            )
            .await?;
        let now: DateTime<Utc> = row.try_get("now")?;
        let mut ids: Vec<i64> = row.try_get("ids")?;
        if ids.len() != jobs.len() {
            return Err(sqlx::Error::Protocol(format!(
                "asked for {} ids, got {}",
                jobs.len(),
                ids.len()
            )));
        }
        // One session's calls of a sequence ascend; sorted, the first job
        // gets the smallest whatever order the array came in.
        ids.sort_unstable();
        let data = encode(jobs, &ids, now);
        let mut copy = conn.copy_in_raw(self.sql.enqueue_copy.as_str()).await?;
        copy.send(data).await?;
        copy.finish().await?;
        Ok(ids
            .into_iter()
            .map(|id| EnqueueOutcome {
                id: JobId(id),
                existed: false,
            })
            .collect())
    }
}

/// Microseconds from the Unix epoch to PostgreSQL's, 2000-01-01 UTC.
const PG_EPOCH_MICROS: i64 = 946_684_800_000_000;

/// The COPY's columns per row (`ENQUEUE_COPY`'s list).
const COLUMNS: i16 = 10;

/// `jobs` with their `ids` as one binary COPY stream: the signature, flags
/// and header extension, then per row its field count and each field as
/// a length and bytes (-1 for NULL), then the trailer.
fn encode(jobs: &[&ValidJob], ids: &[i64], now: DateTime<Utc>) -> Vec<u8> {
    let mut out = Vec::with_capacity(19 + jobs.len() * 160 + 2);
    out.extend_from_slice(b"PGCOPY\n\xff\r\n\0");
    out.extend_from_slice(&0_i32.to_be_bytes());
    out.extend_from_slice(&0_i32.to_be_bytes());
    let now_field = timestamp(now);
    for (job, id) in jobs.iter().zip(ids) {
        out.extend_from_slice(&COLUMNS.to_be_bytes());
        field(&mut out, &id.to_be_bytes());
        field(&mut out, job.queue.as_str().as_bytes());
        field(&mut out, &job.priority.to_be_bytes());
        jsonb(&mut out, &job.payload);
        // Validation keeps max_attempts within i32, as the INSERT's bind.
        let max_attempts = i32::try_from(job.max_attempts).unwrap_or(i32::MAX);
        field(&mut out, &max_attempts.to_be_bytes());
        let available_at = written_at(job).unwrap_or_else(|| job.available_at(now));
        field(&mut out, &timestamp(available_at));
        field(&mut out, &now_field);
        field(&mut out, &now_field);
        let trace = job.trace_context.as_ref().map(|ctx| ctx.to_stored());
        optional(&mut out, trace.as_deref().map(str::as_bytes));
        optional(
            &mut out,
            job.group_key.as_ref().map(|key| key.as_str().as_bytes()),
        );
    }
    out.extend_from_slice(&(-1_i16).to_be_bytes());
    out
}

/// A field of `bytes`. Every field here is far under 2^31 bytes (names
/// and keys are bounded by validation, payloads by the server's 1 GB).
fn field(out: &mut Vec<u8>, bytes: &[u8]) {
    let len = i32::try_from(bytes.len()).unwrap_or(i32::MAX);
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(bytes);
}

/// A field that may be NULL.
fn optional(out: &mut Vec<u8>, bytes: Option<&[u8]>) {
    match bytes {
        Some(bytes) => field(out, bytes),
        None => out.extend_from_slice(&(-1_i32).to_be_bytes()),
    }
}

/// A `jsonb` field: format version 1, then the JSON text, written in place.
fn jsonb(out: &mut Vec<u8>, value: &serde_json::Value) {
    let at = out.len();
    out.extend_from_slice(&0_i32.to_be_bytes());
    out.push(1);
    // Writing a Value into a Vec cannot fail: its keys are strings and
    // the Vec's writes are infallible.
    serde_json::to_writer(&mut *out, value).expect("a JSON value serializes");
    let len = i32::try_from(out.len() - at - 4).unwrap_or(i32::MAX);
    out[at..at + 4].copy_from_slice(&len.to_be_bytes());
}

/// A `timestamptz` in binary: microseconds since 2000-01-01 UTC.
fn timestamp(at: DateTime<Utc>) -> [u8; 8] {
    (at.timestamp_micros() - PG_EPOCH_MICROS).to_be_bytes()
}

#[cfg(test)]
mod tests {
    use chrono::TimeZone;
    use queue_core::NewJob;
    use queue_core::backend::validate_batch;
    use serde_json::json;

    use super::*;

    #[test]
    fn the_stream_has_the_signature_each_row_and_the_trailer() {
        let jobs = validate_batch(&[
            NewJob::new("q", json!({"a": 1})).priority(-3),
            NewJob::new("q", json!(null)).group_key("tenant"),
        ])
        .expect("valid");
        let refs: Vec<&ValidJob> = jobs.iter().collect();
        let now = Utc
            .with_ymd_and_hms(2000, 1, 1, 0, 0, 1)
            .single()
            .expect("a time");
        let data = encode(&refs, &[7, 8], now);
        assert_eq!(&data[..11], b"PGCOPY\n\xff\r\n\0");
        assert_eq!(&data[data.len() - 2..], &(-1_i16).to_be_bytes());
        // The first row: 10 fields, id 7, queue "q", priority -3.
        let row = &data[19..];
        assert_eq!(&row[..2], &10_i16.to_be_bytes());
        assert_eq!(&row[2..6], &8_i32.to_be_bytes());
        assert_eq!(&row[6..14], &7_i64.to_be_bytes());
        assert_eq!(&row[14..18], &1_i32.to_be_bytes());
        assert_eq!(&row[18..19], b"q");
        assert_eq!(&row[23..27], &(-3_i32).to_be_bytes());
        // The payload: its length, version 1, the text.
        let text = br#"{"a":1}"#;
        let len = i32::try_from(text.len() + 1).expect("small");
        assert_eq!(&row[27..31], &len.to_be_bytes());
        assert_eq!(row[31], 1);
        assert_eq!(&row[32..32 + text.len()], text);
        // One second after PostgreSQL's epoch.
        assert_eq!(timestamp(now), 1_000_000_i64.to_be_bytes());
    }
}
