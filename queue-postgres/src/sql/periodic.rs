//! The statements of `enqueue_periodic` and `schedules`.

/// Records fire $3 (next $4) of schedule $2 unless a fire at or after $3 is
/// recorded; returns a row only when it recorded it. A concurrent recorder
/// of the same schedule makes this one wait and then re-check the WHERE
/// against the committed row, so one caller per fire time gets the row.
pub(super) const ENQUEUE_PERIODIC: &str = "
INSERT INTO {s}.queue_schedule (schedule_name, last_fire_at, next_fire_at, updated_at)
VALUES ($2, $3, $4, COALESCE($1::timestamptz, now()))
ON CONFLICT (schedule_name) DO UPDATE
SET last_fire_at = EXCLUDED.last_fire_at, next_fire_at = EXCLUDED.next_fire_at,
    updated_at = EXCLUDED.updated_at
WHERE queue_schedule.last_fire_at < EXCLUDED.last_fire_at
RETURNING schedule_name";

/// Every schedule's latest recorded fire.
pub(super) const SCHEDULES: &str =
    "SELECT schedule_name, last_fire_at, next_fire_at FROM {s}.queue_schedule";
