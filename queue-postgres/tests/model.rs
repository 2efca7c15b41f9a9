//! Random operation sequences on PostgreSQL, compared with the model.

mod common;

use queue_testkit::model::{ModelConfig, check_against_model};

#[test]
fn postgres_agrees_with_the_model() {
    check_against_model(&common::PgFactory, ModelConfig::default());
}
