//! Every SQL statement of the SQLite backend, named after its operation.

/// The ledger of applied migrations.
pub(crate) const MIGRATE_CREATE_LEDGER: &str =
    "CREATE TABLE IF NOT EXISTS queue_schema_migrations (
    version    INTEGER PRIMARY KEY,
    name       TEXT    NOT NULL,
    checksum   INTEGER NOT NULL,
    applied_at INTEGER NOT NULL DEFAULT (CAST(unixepoch('subsec') * 1000000 AS INTEGER))
)";

/// The migrations recorded as applied.
pub(crate) const MIGRATE_APPLIED: &str = "SELECT version, checksum FROM queue_schema_migrations";

/// Records one applied migration.
pub(crate) const MIGRATE_RECORD: &str =
    "INSERT INTO queue_schema_migrations (version, name, checksum) VALUES (?1, ?2, ?3)";

/// Checks the file is a readable SQLite database before anything is written.
pub(crate) const OPEN_CHECK: &str = "SELECT count(*) FROM sqlite_schema";

/// The database's clock: UTC microseconds since the Unix epoch.
pub(crate) const NOW_MICROS: &str = "SELECT CAST(unixepoch('subsec') * 1000000 AS INTEGER)";
