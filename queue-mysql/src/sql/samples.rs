//! The statements of the charts' samples: `record_samples`, `samples`.

use crate::bind::tuples;

/// Adds `rows` lag rows (minute, queue, bucket, jobs; one per key, sorted,
/// see `queue_core::backend::sample_rows`) to what their keys hold.
/// (`VALUES(column)`: the form MySQL 8.0 and MariaDB share.)
pub(crate) fn record_lags(rows: usize) -> String {
    format!(
        "INSERT INTO job_sample_lag (minute, queue_name, bucket, jobs) VALUES {}
         ON DUPLICATE KEY UPDATE jobs = jobs + VALUES(jobs)",
        tuples(rows, 4)
    )
}

/// Sets `rows` depth rows (minute, queue, pending, scheduled, running).
pub(crate) fn record_depths(rows: usize) -> String {
    format!(
        "INSERT INTO job_sample_depth (minute, queue_name, pending, scheduled, running) VALUES {}
         ON DUPLICATE KEY UPDATE pending = VALUES(pending), scheduled = VALUES(scheduled),
                                 running = VALUES(running)",
        tuples(rows, 5)
    )
}

/// Deletes the lag rows of minutes before ?, at most 10,000 a call.
pub(crate) const PRUNE_LAG_SAMPLES: &str =
    "DELETE FROM job_sample_lag WHERE minute < ? ORDER BY minute LIMIT 10000";

/// Deletes the depth rows of minutes before ?, at most 10,000 a call.
pub(crate) const PRUNE_DEPTH_SAMPLES: &str =
    "DELETE FROM job_sample_depth WHERE minute < ? ORDER BY minute LIMIT 10000";

/// The lag rows (`bucket`, `jobs` set) and depth rows (`pending`,
/// `scheduled`, `running` set) of minutes in `(?, ?]`, twice: two ranges
/// of the keys' leading minute.
pub(crate) const SAMPLES: &str = "
SELECT queue_name, minute, bucket, jobs,
       CAST(NULL AS SIGNED) AS pending, CAST(NULL AS SIGNED) AS scheduled,
       CAST(NULL AS SIGNED) AS running
FROM job_sample_lag WHERE minute > ? AND minute <= ?
UNION ALL
SELECT queue_name, minute, NULL, NULL, pending, scheduled, running
FROM job_sample_depth WHERE minute > ? AND minute <= ?";
