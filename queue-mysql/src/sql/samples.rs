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

/// What [`SAMPLES`]' `GROUP_CONCAT` needs: the longest histogram (101
/// buckets of `bucket:jobs`, 2,424 bytes) is above MySQL 8's default of
/// 1,024, where a longer value is cut short with only a warning.
pub(crate) const SAMPLES_SESSION: &str = "SET SESSION group_concat_max_len = 65536";

/// Per queue and minute in `(?, ?]`, its lags as one text (`lags` set,
/// `queue_core::backend::lag_text`'s form: a row per sample rather than
/// per bucket), and its depth (`pending`, `scheduled`, `running` set),
/// twice: two ranges of the keys' leading minute.
pub(crate) const SAMPLES: &str = "
SELECT queue_name, minute, GROUP_CONCAT(bucket, ':', jobs SEPARATOR ' ') AS lags,
       CAST(NULL AS SIGNED) AS pending, CAST(NULL AS SIGNED) AS scheduled,
       CAST(NULL AS SIGNED) AS running
FROM job_sample_lag WHERE minute > ? AND minute <= ?
GROUP BY minute, queue_name
UNION ALL
SELECT queue_name, minute, NULL, pending, scheduled, running
FROM job_sample_depth WHERE minute > ? AND minute <= ?";
