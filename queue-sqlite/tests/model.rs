//! Random operation sequences on SQLite, compared with the model.

mod common;

use queue_testkit::model::{ModelConfig, check_against_model};

#[test]
fn sqlite_agrees_with_the_model() {
    check_against_model(&common::SqliteFactory, ModelConfig::default());
}
