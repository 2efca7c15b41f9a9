//! A case of the author's own, written with the kit's public building
//! blocks (`Ctx::fill`, `Ctx::configure`, `concurrency_limit`, `request`,
//! `acks_of`) and run like the suite's, on a fresh storage and manual clock.

mod common;

use queue_core::{Capability, Storage};
use queue_testkit::suite::{self, Case, Ctx, acks_of, concurrency_limit, request};

/// Wrapping a storage keeps its concurrency limit: two claims of ten never
/// hold more than three leases, and acking frees the slots.
async fn wrapping_keeps_the_concurrency_limit<S: Storage>(ctx: Ctx<S>) {
    ctx.fill("q", 10).await;
    ctx.configure("q", concurrency_limit(3)).await;
    let first = ctx
        .storage
        .dequeue(&request(&["q"], 10, "a"))
        .await
        .expect("claim");
    let second = ctx
        .storage
        .dequeue(&request(&["q"], 10, "b"))
        .await
        .expect("claim");
    assert_eq!((first.len(), second.len()), (3, 0));
    ctx.storage.ack_batch(&acks_of(&first)).await.expect("ack");
    let third = ctx
        .storage
        .dequeue(&request(&["q"], 10, "b"))
        .await
        .expect("claim");
    assert_eq!(third.len(), 3);
}

#[test]
fn traced_storage_keeps_the_concurrency_limit() {
    suite::block_on(suite::run_case(
        &common::TracedFactory,
        Case {
            area: "own",
            name: "wrapping_keeps_the_concurrency_limit",
            requires: &[Capability::FlowLimits],
            handles: 1,
            run: |ctx| Box::pin(wrapping_keeps_the_concurrency_limit(ctx)),
        },
    ));
}
