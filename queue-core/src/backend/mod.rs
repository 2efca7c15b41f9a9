//! What only backend authors need: one home for every rule a backend must
//! apply the same way as the others, so that no backend keeps its own copy.
//!
//! | concept | item |
//! |---|---|
//! | reading values back, corrupt columns | [`stored`], [`stored_optional`], [`stored_count`], [`stored_millis`], [`corrupt`] |
//! | a lease's fencing columns | [`LeaseKey`] |
//! | the claim order, with priority aging and fair groups | [`claim_order`], [`aged_priority`], [`aged_claim_order`], [`refuse_priority_aging`], [`fair_order`], [`FairTurn`], [`refuse_fair_groups`] |
//! | a fair queue's pick over a storage's indexed reads | [`pick_fair`], [`FairReader`], [`FairRow`], [`FairPick`], [`merge_by_next`] |
//! | validating a batch, repeats of a unique key inside it | [`validate_batch`], [`first_occurrences`] |
//! | retrying a rolled-back statement | [`RetryPolicy`], [`retrying`] |
//! | when a pooled connection is checked before use | [`PING_IDLE_AFTER`] |
//! | numbered migrations, their checksums and ledger | [`migration`] |
//! | a statement's plan, for `explain_*` diagnostics | [`PlanStep`] |
//! | which queues have claim limits (the limited claim path) | [`LimitedQueues`] |
//! | samples as rows, merged the same way everywhere; their window and retention | [`SampleRows`], [`sample_rows`], [`coalesce_samples`], [`lag_text`], [`sample_window`], [`samples_expire_before`] |
//! | group concurrency in the claim, and refusing it without the capability | [`GroupSlots`], [`refuse_group_keys`], [`refuse_group_concurrency`], [`unconfigured_queue`] |
//! | refusing dependencies without [`crate::Capability::Dependencies`], joins without [`crate::Capability::Batches`] | [`refuse_dependencies`], [`refuse_joins`] |
//! | a `job_links` row as a link | [`job_link`], [`LiveLink`], [`FinishedLink`] |

mod batch;
mod fair;
mod flow;
mod groups;
mod lease;
mod links;
pub mod migration;
mod order;
mod plan;
mod retry;
mod samples;
mod stored;
mod turn;

pub use batch::{first_occurrences, validate_batch};
pub use fair::{FairPick, FairReader, FairRow, merge_by_next, pick_fair};
pub use flow::LimitedQueues;
pub use groups::{
    GroupSlots, refuse_dependencies, refuse_group_concurrency, refuse_group_keys, refuse_joins,
    unconfigured_queue,
};
pub use lease::{LeaseKey, acked_one, first_mentions, one_ack};
pub use links::{FinishedLink, LiveLink, job_link};
pub use order::{
    FairTurn, aged_claim_order, aged_priority, claim_order, fair_order, refuse_fair_groups,
    refuse_priority_aging,
};
pub use plan::PlanStep;
pub use retry::{PING_IDLE_AFTER, RetryPolicy, retrying};
pub use samples::{
    DepthRow, LagRow, SampleRows, coalesce_samples, lag_text, sample_rows, sample_window,
    samples_expire_before,
};
pub use stored::{
    corrupt, json_text, stored, stored_count, stored_instant, stored_millis, stored_optional,
};
pub use turn::Turn;
