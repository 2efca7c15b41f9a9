//! Random operation sequences on MySQL / MariaDB, compared with the model.

mod common;

use queue_testkit::model::{ModelConfig, check_against_model};

#[test]
fn mysql_agrees_with_the_model() {
    check_against_model(&common::MySqlFactory, ModelConfig::default());
}
