//! Diagnostics for operators: does a claim use the dequeue index, and how
//! many rows does it lock, on this server and this data? Plans come back
//! as queue-core's [`PlanStep`], one per `EXPLAIN` row.

use diesel::QueryableByName;
use diesel::sql_types::{BigInt, Nullable, Text};
use diesel_async::{AsyncConnection, RunQueryDsl};
use queue_core::backend::PlanStep;
use queue_core::{DequeueRequest, Result};

use crate::MySqlStorage;
use crate::bind::{Param, query};
use crate::dequeue::Level;
use crate::error::Failure;
use crate::sql::{DEQUEUE_LEVEL, DEQUEUE_PICK, ROWS_LOCKED, SESSION_READS};

/// One row of the server's `EXPLAIN` (the columns both servers share).
#[derive(QueryableByName)]
pub(crate) struct ExplainRow {
    #[diesel(sql_type = Nullable<Text>)]
    pub(crate) table: Option<String>,
    #[diesel(sql_type = Nullable<Text>, column_name = "type")]
    pub(crate) access: Option<String>,
    #[diesel(sql_type = Nullable<Text>)]
    pub(crate) key: Option<String>,
    /// Text: the servers send this column as a string.
    #[diesel(sql_type = Nullable<Text>)]
    rows: Option<String>,
    #[diesel(sql_type = Nullable<Text>, column_name = "Extra")]
    extra: Option<String>,
}

impl ExplainRow {
    fn into_step(self) -> PlanStep {
        PlanStep {
            operation: self.access.unwrap_or_default(),
            table: self.table,
            index: self.key,
            rows: self.rows.and_then(|rows| rows.parse().ok()),
            cost: None,
            actual_rows: None,
            buffers: None,
            detail: self.extra,
        }
    }
}

#[derive(QueryableByName)]
struct StatusRow {
    #[diesel(sql_type = Text, column_name = "Variable_name")]
    _name: String,
    #[diesel(sql_type = Text, column_name = "Value")]
    value: String,
}

/// Index and table reads of this session so far. `SHOW SESSION STATUS`
/// rather than a status table: MySQL 8 moved those to performance_schema,
/// MariaDB keeps them in information_schema.
async fn session_reads(conn: &mut crate::AsyncMysqlConnection) -> diesel::QueryResult<u64> {
    let rows = diesel::sql_query(SESSION_READS)
        .load::<StatusRow>(conn)
        .await?;
    Ok(rows
        .iter()
        .filter_map(|r| r.value.parse::<u64>().ok())
        .sum())
}

#[derive(QueryableByName)]
struct Locked {
    #[diesel(sql_type = BigInt)]
    rows: i64,
}

/// The highest priority among the unleased jobs of `queue` (0 when none):
/// the level a claim scans first.
async fn top_level(
    conn: &mut crate::AsyncMysqlConnection,
    queue: &str,
) -> diesel::QueryResult<i32> {
    let levels = query(
        DEQUEUE_LEVEL,
        vec![
            Param::Text(queue.to_owned()),
            Param::Int(i64::from(i32::MAX) + 1),
        ],
    )
    .load::<Level>(conn)
    .await?;
    Ok(levels.into_iter().next().map_or(0, |l| l.priority))
}

impl MySqlStorage {
    /// The binds of the claim's scan ([`DEQUEUE_PICK`]) of the first queue of
    /// `request` at priority `level`.
    fn pick_params(&self, request: &DequeueRequest, level: i32) -> Vec<Param> {
        let queue = request.queues()[0].as_str().to_owned();
        let now = self.now_override();
        vec![
            Param::OptTime(now),
            Param::Text(queue.clone()),
            Param::Int(i64::from(level)),
            Param::OptTime(now),
            Param::Text(queue),
            Param::Int(i64::from(request.queue_limits()[0])),
        ]
    }

    /// The server's plan for the claim's scan of the highest priority level
    /// of the first queue of `request` (each level of each queue is
    /// scanned the same way).
    ///
    /// # Errors
    /// As any query.
    pub async fn explain_dequeue(&self, request: &DequeueRequest) -> Result<Vec<PlanStep>> {
        let rows = self
            .retrying(true, || async {
                let mut conn = self.connection().await?;
                let level = top_level(&mut conn, request.queues()[0].as_str()).await?;
                let params = self.pick_params(request, level);
                Ok(query(&format!("EXPLAIN {DEQUEUE_PICK}"), params)
                    .load::<ExplainRow>(&mut conn)
                    .await?)
            })
            .await?;
        Ok(rows.into_iter().map(ExplainRow::into_step).collect())
    }

    /// How many index or table rows the server reads for a whole claim of
    /// `request` (the session's `Handler_read_*` counters around it): the
    /// due jobs it takes plus a few per priority level, however many jobs
    /// wait for a later time. The claim is rolled back: nothing is taken.
    ///
    /// # Errors
    /// As any query.
    pub async fn rows_read_by_claim(&self, request: &DequeueRequest) -> Result<u64> {
        self.retrying(true, || async {
            let mut conn = self.connection().await?;
            let before = session_reads(&mut conn).await?;
            let outcome = conn
                .transaction(async |conn| {
                    self.dequeue_on(conn, request, &crate::dequeue::TopLevels::new())
                        .await?;
                    Err::<(), _>(Failure::Query(diesel::result::Error::RollbackTransaction))
                })
                .await;
            match outcome {
                Err(Failure::Query(diesel::result::Error::RollbackTransaction)) | Ok(()) => {}
                Err(other) => return Err(other),
            }
            let after = session_reads(&mut conn).await?;
            Ok(after.saturating_sub(before))
        })
        .await
    }

    /// How many index or table rows the server reads to answer
    /// [`queue_core::Storage::next_due`] for `queue` (the session's
    /// `Handler_read_*` counters around the statement): a few per distinct
    /// priority, whatever the backlog.
    ///
    /// # Errors
    /// As any query.
    pub async fn rows_read_by_next_due(&self, queue: &queue_core::QueueName) -> Result<u64> {
        let now = self.now_override();
        self.retrying(true, || async {
            let mut conn = self.connection().await?;
            let before = session_reads(&mut conn).await?;
            crate::inspect::next_due_in_queue(&mut conn, queue, now).await?;
            let after = session_reads(&mut conn).await?;
            Ok(after.saturating_sub(before))
        })
        .await
    }

    /// How many rows InnoDB locks for the claim's scan of the first queue
    /// of `request`: the locking read alone, in its own transaction, so
    /// nothing is claimed.
    ///
    /// # Errors
    /// As any query.
    pub async fn rows_locked_by_claim(&self, request: &DequeueRequest) -> Result<u64> {
        self.retrying(true, || async {
            let mut conn = self.connection().await?;
            let level = top_level(&mut conn, request.queues()[0].as_str()).await?;
            let params = self.pick_params(request, level);
            // The locking read changes nothing; committing releases its locks.
            conn.transaction(async |conn| {
                query(DEQUEUE_PICK, params.clone()).execute(conn).await?;
                let locked = diesel::sql_query(ROWS_LOCKED)
                    .get_result::<Locked>(conn)
                    .await?;
                Ok(u64::try_from(locked.rows).unwrap_or_default())
            })
            .await
        })
        .await
    }
}
