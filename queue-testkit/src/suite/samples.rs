//! Start lags and depths per queue and minute ([`Storage::record_samples`],
//! [`Storage::samples`]): lags add up across calls and handles, a depth
//! replaces the minute's, the window and order hold, and bad input records
//! nothing.

use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};
use queue_core::{Depth, LagHistogram, MAX_SAMPLES_PER_CALL, QueueSample, Storage, minute_of};

use super::{Ctx, assert_invalid, queue, secs};

/// A sample of `q` in `minute` with `lags` (in ms) counted and `depth`.
pub fn sample(q: &str, minute: DateTime<Utc>, lags: &[u64], depth: Option<Depth>) -> QueueSample {
    let mut lag = LagHistogram::new();
    for &ms in lags {
        lag.record(Duration::from_millis(ms));
    }
    QueueSample {
        queue: queue(q),
        minute,
        lag,
        depth,
    }
}

fn depth(pending: u64, scheduled: u64, running: u64) -> Option<Depth> {
    Some(Depth {
        pending,
        scheduled,
        running,
    })
}

impl<S: Storage> Ctx<S> {
    /// Records `samples`, which must be valid.
    pub async fn record_samples(&self, samples: &[QueueSample]) {
        (self.storage.record_samples(samples).await).expect("record_samples");
    }

    /// The samples of the last hour.
    pub async fn hour_of_samples(&self) -> Vec<QueueSample> {
        (self.storage.samples(secs(3600)).await).expect("samples")
    }
}

/// Lags of one queue and minute add up over calls (and within one call);
/// other queues and minutes keep their own.
pub async fn recorded_lags_add_up_per_queue_and_minute<S: Storage>(ctx: Ctx<S>) {
    let this = minute_of(ctx.now());
    let before = this - TimeDelta::minutes(1);
    ctx.record_samples(&[
        sample("q1", this, &[1, 5, 5000], None),
        sample("q2", this, &[40], None),
        sample("q1", this, &[5], None),
    ])
    .await;
    ctx.record_samples(&[
        sample("q1", this, &[5, 100_000_000], None),
        sample("q1", before, &[2], None),
    ])
    .await;
    assert_eq!(
        ctx.hour_of_samples().await,
        vec![
            sample("q1", before, &[2], None),
            sample("q1", this, &[1, 5, 5, 5, 5000, 100_000_000], None),
            sample("q2", this, &[40], None),
        ]
    );
}

/// A depth replaces the one its queue and minute held (the last of one
/// call wins); a lag-only sample leaves it; an empty sample records
/// nothing.
pub async fn a_later_depth_replaces_the_minutes_depth<S: Storage>(ctx: Ctx<S>) {
    let this = minute_of(ctx.now());
    ctx.record_samples(&[sample("q", this, &[], depth(10, 2, 3))])
        .await;
    ctx.record_samples(&[
        sample("q", this, &[], depth(7, 0, 1)),
        sample("q", this, &[], depth(6, 5, 4)),
        sample("empty", this, &[], None),
    ])
    .await;
    ctx.record_samples(&[sample("q", this, &[9], None)]).await;
    assert_eq!(
        ctx.hour_of_samples().await,
        vec![sample("q", this, &[9], depth(6, 5, 4))]
    );
    ctx.record_samples(&[sample("q", this, &[], depth(0, 0, 0))])
        .await;
    assert_eq!(
        ctx.hour_of_samples().await,
        vec![sample("q", this, &[9], depth(0, 0, 0))],
        "a depth of zero is a depth"
    );
}

/// Only minutes in `(now - window, now]` are answered, by queue then
/// minute; a window under a minute or over 7 days is rejected.
pub async fn samples_answer_their_window_by_queue_then_minute<S: Storage>(ctx: Ctx<S>) {
    // Whole minutes, so that a window of whole minutes ends on one.
    let offset = ctx.now() - minute_of(ctx.now());
    ctx.clock
        .advance((TimeDelta::minutes(1) - offset).to_std().expect("positive"));
    let now = ctx.now();
    assert_eq!(now, minute_of(now));
    let ago = |minutes: i64| now - TimeDelta::minutes(minutes);
    ctx.record_samples(&[
        sample("b", ago(0), &[1], None),
        sample("a", ago(10), &[1], None),
        sample("b", ago(3), &[1], depth(1, 1, 1)),
        sample("a", ago(0), &[1], None),
        sample("a", now + TimeDelta::minutes(1), &[1], None),
        sample("a", ago(60 * 24 * 2), &[1], None),
    ])
    .await;
    let window = |minutes: u64| ctx.storage.samples(secs(minutes * 60));
    assert_eq!(
        window(10).await.expect("samples"),
        vec![
            sample("a", ago(0), &[1], None),
            sample("b", ago(3), &[1], depth(1, 1, 1)),
            sample("b", ago(0), &[1], None),
        ],
        "the minute one window ago is out, a minute ahead of now is out"
    );
    assert_eq!(window(11).await.expect("samples").len(), 4);
    assert_eq!(window(60 * 24 * 3).await.expect("samples").len(), 5);
    assert_invalid(ctx.storage.samples(secs(59)).await, "window");
    assert_invalid(ctx.storage.samples(secs(8 * 24 * 3600)).await, "window");
}

/// A minute that is not whole, a bucket past the last, or too many
/// samples: `InvalidInput` naming it, and nothing of the call recorded.
pub async fn record_samples_with_invalid_input_records_nothing<S: Storage>(ctx: Ctx<S>) {
    let this = minute_of(ctx.now());
    let good = sample("q", this, &[3], depth(1, 0, 0));
    let mut off_minute = sample("q", this + TimeDelta::seconds(1), &[3], None);
    assert_invalid(
        ctx.storage
            .record_samples(&[good.clone(), off_minute.clone()])
            .await,
        "minute",
    );
    off_minute.minute = this + TimeDelta::milliseconds(1);
    assert_invalid(
        ctx.storage
            .record_samples(&[good.clone(), off_minute])
            .await,
        "minute",
    );
    let mut past_the_last = sample("q", this, &[], None);
    past_the_last
        .lag
        .add_to_bucket(queue_core::MAX_LAG_BUCKET + 1, 1);
    assert_invalid(
        ctx.storage
            .record_samples(&[good.clone(), past_the_last])
            .await,
        "lag",
    );
    let too_many = vec![good.clone(); MAX_SAMPLES_PER_CALL + 1];
    assert_invalid(ctx.storage.record_samples(&too_many).await, "samples");
    let mut huge = sample("q", this, &[], None);
    huge.lag.add_to_bucket(3, u64::MAX);
    assert_invalid(
        ctx.storage.record_samples(&[good.clone(), huge]).await,
        "lag",
    );
    assert_eq!(ctx.hour_of_samples().await, Vec::new());
    ctx.record_samples(&vec![good.clone(); MAX_SAMPLES_PER_CALL])
        .await;
    let mut expected = sample("q", this, &[], depth(1, 0, 0));
    expected
        .lag
        .add_to_bucket(queue_core::lag_bucket(Duration::from_millis(3)), 1000);
    assert_eq!(
        ctx.hour_of_samples().await,
        vec![expected],
        "the most a call takes"
    );
}

/// Two handles (two worker hosts) recording the same queue and minute:
/// their lags add up, and each reads what the other wrote.
pub async fn samples_of_two_handles_add_up<S: Storage>(ctx: Ctx<S>) {
    let this = minute_of(ctx.now());
    let (one, other) = (
        [sample("q", this, &[1, 2], None)],
        [sample("q", this, &[2, 4000], depth(3, 0, 2))],
    );
    let first = ctx.storage.record_samples(&one);
    let second = ctx.second().record_samples(&other);
    let (first, second) = tokio::join!(first, second);
    first.expect("record through the first handle");
    second.expect("record through the second handle");
    let expected = vec![sample("q", this, &[1, 2, 2, 4000], depth(3, 0, 2))];
    assert_eq!(ctx.hour_of_samples().await, expected);
    assert_eq!(
        (ctx.second().samples(secs(3600)).await).expect("samples through the second"),
        expected
    );
}
