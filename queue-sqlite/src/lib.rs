//! SQLite storage for the job queue: an embedded database in one file (or
//! in memory), no server, on sqlx's SQLite driver with the bundled library.
//!
//! This first part opens the database safely and applies the embedded
//! migrations; see [`SqliteStorage::connect`].

mod error;
mod migrate;
mod sql;
mod storage;

pub use error::{OpenError, interpret_error};
pub use migrate::{MIGRATIONS, migrate};
pub use storage::SqliteStorage;
