//! The charts' samples: per minute a hash `{ns}:sample:<minute>` and the
//! sorted set `{ns}:sample_minutes`, in the namespace's global slot (see
//! `scripts/record_samples.lua`), so that one script records a batch of
//! every queue's samples whole.

use std::time::Duration;

use queue_core::backend::{
    DepthRow, LagRow, SampleRows, corrupt, lag_text, sample_rows, stored_instant,
};
use queue_core::time::duration_micros;
use queue_core::{QueueName, QueueSample, Result, SAMPLE_RETENTION, validate_window};

use crate::{RedisStorage, scripts};

impl RedisStorage {
    pub(crate) async fn record_samples_scripted(&self, samples: &[QueueSample]) -> Result<()> {
        let rows = sample_rows(samples)?;
        if rows.lags.is_empty() && rows.depths.is_empty() {
            return Ok(());
        }
        // One histogram per queue and minute: the rows come sorted by
        // queue, minute and bucket.
        let histograms: Vec<_> = rows
            .lags
            .chunk_by(|a, b| (&a.queue, a.minute) == (&b.queue, b.minute))
            .collect();
        let mut args = vec![
            self.now_arg(),
            duration_micros(SAMPLE_RETENTION).to_string(),
            histograms.len().to_string(),
        ];
        for rows in histograms {
            args.extend([
                rows[0].minute.timestamp_micros().to_string(),
                rows[0].queue.as_str().to_owned(),
                lag_text(rows),
            ]);
        }
        for row in &rows.depths {
            args.extend([
                row.minute.timestamp_micros().to_string(),
                row.queue.as_str().to_owned(),
                row.pending.to_string(),
                row.scheduled.to_string(),
                row.running.to_string(),
            ]);
        }
        let _: i64 = self
            .invoke(&scripts::RECORD_SAMPLES, &self.keys.global(), &args)
            .await?;
        Ok(())
    }

    pub(crate) async fn samples_scripted(&self, window: Duration) -> Result<Vec<QueueSample>> {
        validate_window(window)?;
        let args = [self.now_arg(), duration_micros(window).to_string()];
        let answer: Vec<String> = self
            .invoke(&scripts::SAMPLES, &self.keys.global(), &args)
            .await?;
        let mut rows = SampleRows::default();
        for entry in answer.chunks_exact(3) {
            sample_field(&entry[0], &entry[1], &entry[2], &mut rows)?;
        }
        Ok(rows.into_samples())
    }
}

/// One field of a minute's hash: `l<queue>` holds its lag histogram,
/// 'bucket:jobs ...' (or, written before, `l<bucket><queue>` one bucket's
/// jobs), `d<queue>` its depth, 'pending scheduled running'.
fn sample_field(minute: &str, field: &str, value: &str, into: &mut SampleRows) -> Result<()> {
    let bad = || corrupt("sample", format!("{minute:?} {field:?} {value:?}"));
    let minute = stored_instant("sample minute", minute.parse().map_err(|_| bad())?)?;
    let number = |text: &str| text.parse::<i64>().map_err(|_| bad());
    let queue = |name: &str| QueueName::new(name).map_err(|_| bad());
    if let Some(name) = field.strip_prefix('l') {
        if value.contains(':') {
            into.push_lag_text(&queue(name)?, minute, value)
                .ok_or_else(bad)?;
        } else {
            // A field per bucket, `l<bucket, 3 digits><queue>` holding
            // jobs, as the first charts release wrote them: read beside
            // the newer field, their lags add up, until they age out.
            let (bucket, name) = name.split_at_checked(3).ok_or_else(bad)?;
            into.lags.push(LagRow {
                queue: queue(name)?,
                minute,
                bucket: bucket.parse().map_err(|_| bad())?,
                jobs: number(value)?,
            });
        }
    } else if let Some(name) = field.strip_prefix('d') {
        let mut counts = value.split(' ').map(number);
        let mut next = || counts.next().unwrap_or_else(|| Err(bad()));
        into.depths.push(DepthRow {
            queue: queue(name)?,
            minute,
            pending: next()?,
            scheduled: next()?,
            running: next()?,
        });
    } else {
        return Err(bad());
    }
    Ok(())
}
