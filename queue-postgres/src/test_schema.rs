//! What the crate's own tests share: a migrated storage in a new schema.

use queue_testkit::harness::postgres::TestSchema;
use sqlx::PgPool;

use crate::PgStorage;

/// A new test schema, a pool on it and a storage migrated in it.
pub(crate) async fn migrated_storage() -> (TestSchema, PgPool, PgStorage) {
    let schema = TestSchema::create().await;
    let pool = schema.pool().await;
    let storage = PgStorage::from_pool(pool.clone())
        .with_schema(schema.name())
        .expect("valid schema");
    storage.migrate().await.expect("migrate");
    (schema, pool, storage)
}
