//! The storage's own write transactions on a Galera node.
//!
//! Galera rolls a local transaction back when a write replicated from
//! another node conflicts with it (a brute-force abort); its next
//! statement should then fail with 1213. Through the driver's binary
//! protocol that error sometimes never arrives (issue 37; seen with a
//! `SELECT @@in_transaction` of 0 right before a COMMIT that then
//! succeeded): the statements after the abort run outside any
//! transaction, each committed on its own under autocommit, and the
//! COMMIT has nothing left to commit. An enqueue that lost a race on a
//! unique key reported a job created that never existed, and a periodic
//! fire that lost the race on its schedule row still inserted its job.
//!
//! So on a Galera node a transaction of the storage's own ([`Guard`])
//! turns autocommit off, so that whatever runs after an abort waits in a
//! new implicit transaction, and opens a savepoint, released right
//! before COMMIT. A transaction rolled back under it has lost the
//! savepoint: the release fails (1305, which the storage takes for the
//! conflict it is and retries), and the rollback that follows discards
//! what ran after the abort. Off Galera the guard does nothing.
//!
//! Guarded: every transaction of several statements the storage runs on
//! its own connections (enqueue, periodic fire, claim, ack, nack,
//! heartbeat, reclaim, discard, cancel, retry of dead letters, run now).
//! Its other writes are autocommit statements, each committed on its
//! own, which Galera retries or fails as a whole. Not guarded: whatever
//! runs in the caller's own transaction (`enqueue_in`, `ack_in`,
//! `nack_in`), whose COMMIT is the caller's.

use diesel_async::pooled_connection::deadpool::Object;
use diesel_async::{AsyncMysqlConnection, SimpleAsyncConnection};

use crate::MySqlStorage;
use crate::error::Failure;

/// The guard's first statements, right after `BEGIN`. (Turning autocommit
/// off inside a transaction commits nothing.)
const GUARD_OPEN: &str = "SET SESSION autocommit = 0; SAVEPOINT queue_galera_guard";

/// The guard's last statement, right before `COMMIT`: it fails when the
/// transaction was rolled back since [`GUARD_OPEN`].
const GUARD_CLOSE: &str = "RELEASE SAVEPOINT queue_galera_guard";

/// After a committed transaction.
const AUTOCOMMIT_ON: &str = "SET SESSION autocommit = 1";

/// After a failed one: a rollback first, so that turning autocommit on
/// cannot commit what ran after an abort.
const ROLLBACK_AUTOCOMMIT_ON: &str = "ROLLBACK; SET SESSION autocommit = 1";

/// Whether a write transaction of the storage's own is guarded (on a
/// Galera node) or not (elsewhere, and in the caller's transactions).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Guard {
    on: bool,
}

impl Guard {
    /// No guard: off Galera, or inside a transaction the guard is not
    /// ours to open (the caller's, or a nested one).
    pub(crate) const NONE: Guard = Guard { on: false };

    /// First thing inside the transaction.
    pub(crate) async fn open(self, conn: &mut AsyncMysqlConnection) -> Result<(), Failure> {
        if self.on {
            conn.batch_execute(GUARD_OPEN).await?;
        }
        Ok(())
    }

    /// Last thing inside the transaction, before `COMMIT`: fails when the
    /// transaction was rolled back since [`Guard::open`].
    pub(crate) async fn close(self, conn: &mut AsyncMysqlConnection) -> Result<(), Failure> {
        if self.on {
            conn.batch_execute(GUARD_CLOSE).await?;
        }
        Ok(())
    }

    /// After the transaction, committed or not (`outcome`): autocommit on
    /// again; a connection where that fails leaves the pool.
    pub(crate) async fn finish<T>(
        self,
        mut conn: Object<AsyncMysqlConnection>,
        outcome: Result<T, Failure>,
    ) -> Result<T, Failure> {
        if self.on {
            let restore = if outcome.is_ok() {
                AUTOCOMMIT_ON
            } else {
                ROLLBACK_AUTOCOMMIT_ON
            };
            if conn.batch_execute(restore).await.is_err() {
                drop(Object::take(conn));
            }
        }
        outcome
    }
}

impl MySqlStorage {
    /// The guard of a write transaction of the storage's own on `conn`:
    /// on when the server is a Galera node.
    pub(crate) async fn guard(&self, conn: &mut AsyncMysqlConnection) -> Result<Guard, Failure> {
        Ok(Guard {
            on: self.server_traits(conn).await?.galera,
        })
    }
}
