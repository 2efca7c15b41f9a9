//! The statements of the charts' samples: `record_samples`, `samples`.

/// Adds lag rows ($1-$4: minutes, queues, buckets, jobs; one row per key,
/// sorted, see `queue_core::backend::sample_rows`) to what their keys
/// hold, sets depth rows ($5-$9: minutes, queues, pending, scheduled,
/// running), and deletes the rows of minutes 7 days or more before now
/// ($10 or the server's).
pub(super) const RECORD_SAMPLES: &str = "
WITH lag AS (
    INSERT INTO {s}.job_sample_lag AS l (minute, queue_name, bucket, jobs)
    SELECT * FROM unnest($1::timestamptz[], $2::text[], $3::smallint[], $4::bigint[])
    ON CONFLICT (minute, queue_name, bucket) DO UPDATE SET jobs = l.jobs + EXCLUDED.jobs
),
depth AS (
    INSERT INTO {s}.job_sample_depth AS d (minute, queue_name, pending, scheduled, running)
    SELECT * FROM unnest($5::timestamptz[], $6::text[], $7::bigint[], $8::bigint[], $9::bigint[])
    ON CONFLICT (minute, queue_name) DO UPDATE
    SET pending = EXCLUDED.pending, scheduled = EXCLUDED.scheduled, running = EXCLUDED.running
),
old_lag AS (
    DELETE FROM {s}.job_sample_lag
    WHERE minute < COALESCE($10::timestamptz, now()) - interval '7 days'
),
old_depth AS (
    DELETE FROM {s}.job_sample_depth
    WHERE minute < COALESCE($10::timestamptz, now()) - interval '7 days'
)
SELECT 1";

/// Per queue and minute in `(now - $2 us, now]`, now being $1 or the
/// server's, its lags (`buckets` and `jobs` set, two arrays in one order:
/// a row per sample rather than per bucket) and its depth (`pending`,
/// `scheduled`, `running` set): two ranges of the keys' leading minute.
/// The bounds are written in each WHERE, not in a CTE: the planner then
/// hashes the groups (55 ms for a day of four queues' samples, 104,000
/// lag rows) where, with the bounds out of its sight, it sorted them on
/// disk first (96 ms).
pub(super) const SAMPLES: &str = "
SELECT l.queue_name, l.minute, array_agg(l.bucket) AS buckets, array_agg(l.jobs) AS jobs,
       NULL::bigint AS pending, NULL::bigint AS scheduled, NULL::bigint AS running
FROM {s}.job_sample_lag l
WHERE l.minute > COALESCE($1::timestamptz, now()) - $2::bigint * interval '1 microsecond'
  AND l.minute <= COALESCE($1::timestamptz, now())
GROUP BY l.minute, l.queue_name
UNION ALL
SELECT d.queue_name, d.minute, NULL, NULL, d.pending, d.scheduled, d.running
FROM {s}.job_sample_depth d
WHERE d.minute > COALESCE($1::timestamptz, now()) - $2::bigint * interval '1 microsecond'
  AND d.minute <= COALESCE($1::timestamptz, now())";
