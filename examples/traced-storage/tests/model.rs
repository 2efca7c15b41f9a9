//! Random operation sequences compared with the reference storage.

mod common;

#[test]
fn traced_storage_agrees_with_the_model() {
    queue_testkit::model::check_against_model(&common::TracedFactory, Default::default());
}
