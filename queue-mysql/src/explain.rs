//! Diagnostics for operators: does a claim read the ready ring's indexes
//! and its jobs by primary key, and how many rows does it lock, on this
//! server and this data? Plans come back
//! as queue-core's [`PlanStep`], one per `EXPLAIN` row.

use diesel::QueryableByName;
use diesel::sql_types::{BigInt, Nullable, Text};
use diesel_async::{AsyncConnection, RunQueryDsl};
use queue_core::backend::PlanStep;
use queue_core::{DequeueRequest, Result};

use crate::MySqlStorage;
use crate::bind::{Param, query};
use crate::error::Failure;
use crate::sql::{INBOX_SOURCE, READY_PEEK, ROWS_LOCKED, SESSION_READS};

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

impl MySqlStorage {
    /// The binds of the claim's read of the ring ([`READY_PEEK`]) for the
    /// first queue of `request`.
    fn peek_params(&self, request: &DequeueRequest) -> Vec<Param> {
        let queue = request.queues()[0].as_str().to_owned();
        let limit = i64::from(request.queue_limits()[0]);
        let mut params = vec![Param::OptTime(self.now_override())];
        for _ in 0..=INBOX_SOURCE {
            params.extend([Param::Text(queue.clone()), Param::Int(limit)]);
        }
        params.push(Param::Text(queue));
        params
    }

    /// The server's plan for the claim's read of the ready ring for the
    /// first queue of `request` (each queue is read the same way).
    ///
    /// # Errors
    /// As any query.
    pub async fn explain_dequeue(&self, request: &DequeueRequest) -> Result<Vec<PlanStep>> {
        let rows = self
            .retrying(true, || async {
                let mut conn = self.connection().await?;
                let params = self.peek_params(request);
                Ok(query(&format!("EXPLAIN {READY_PEEK}"), params)
                    .load::<ExplainRow>(&mut conn)
                    .await?)
            })
            .await?;
        Ok(rows.into_iter().map(ExplainRow::into_step).collect())
    }

    /// How many index or table rows the server reads for a whole claim of
    /// `request` (the session's `Handler_read_*` counters around it; the
    /// limited claim's when a queue of `request` has limits): the due jobs
    /// it takes plus a few per priority level, however many jobs wait for
    /// a later time. The claim is rolled back: nothing is taken.
    ///
    /// # Errors
    /// As any query.
    pub async fn rows_read_by_claim(&self, request: &DequeueRequest) -> Result<u64> {
        let limited = self.claim_is_limited(request).await?;
        self.retrying(true, || async {
            let mut conn = self.connection().await?;
            let before = session_reads(&mut conn).await?;
            let outcome = conn
                .transaction(async |conn| {
                    self.claim_on(conn, request, limited).await?;
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
    /// [`queue_core::Storage::list_jobs`] for `filter` (the session's
    /// `Handler_read_*` counters around it): a page and the index entries
    /// leading to it, wherever the ids of the jobs listed sit, not every
    /// newer job.
    ///
    /// # Errors
    /// [`queue_core::QueueError::InvalidInput`] for a filter `list_jobs`
    /// refuses; otherwise as any query.
    pub async fn rows_read_by_listing(&self, filter: &queue_core::JobFilter) -> Result<u64> {
        filter.validate()?;
        self.retrying(true, || async {
            let mut conn = self.connection().await?;
            let before = session_reads(&mut conn).await?;
            self.list_jobs_on(&mut conn, filter).await?;
            let after = session_reads(&mut conn).await?;
            Ok(after.saturating_sub(before))
        })
        .await
    }

    /// How many index or table rows the server reads to answer
    /// [`queue_core::Storage::list_history`] for `filter` (the session's
    /// `Handler_read_*` counters around it): the page and the index
    /// entries leading to it, wherever its rows sit in id order.
    ///
    /// # Errors
    /// [`queue_core::QueueError::InvalidInput`] for a filter
    /// `list_history` refuses; otherwise as any query.
    pub async fn rows_read_by_history_listing(
        &self,
        filter: &queue_core::HistoryFilter,
    ) -> Result<u64> {
        filter.validate()?;
        self.retrying(true, || async {
            let mut conn = self.connection().await?;
            let before = session_reads(&mut conn).await?;
            crate::inspect::list_history_on(&mut conn, filter).await?;
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

    /// How many rows InnoDB locks for a whole claim of `request` (the
    /// jobs it takes and their ring entries; the limited claim's when a
    /// queue of `request` has limits), in a transaction rolled back:
    /// nothing is claimed.
    ///
    /// # Errors
    /// As any query.
    pub async fn rows_locked_by_claim(&self, request: &DequeueRequest) -> Result<u64> {
        let limited = self.claim_is_limited(request).await?;
        self.retrying(true, || async {
            let mut conn = self.connection().await?;
            let mut locked = 0;
            let outcome = conn
                .transaction(async |conn| {
                    self.claim_on(conn, request, limited).await?;
                    // No row: the transaction locked nothing.
                    let rows = diesel::sql_query(ROWS_LOCKED).load::<Locked>(conn).await?;
                    locked = <[Locked]>::first(&rows)
                        .map_or(0, |row| u64::try_from(row.rows).unwrap_or_default());
                    Err::<(), _>(Failure::Query(diesel::result::Error::RollbackTransaction))
                })
                .await;
            match outcome {
                Err(Failure::Query(diesel::result::Error::RollbackTransaction)) | Ok(()) => {}
                Err(other) => return Err(other),
            }
            Ok(locked)
        })
        .await
    }

    /// The claim of `request` in the caller's transaction, as `dequeue`
    /// runs it: the limited claim when `limited`.
    async fn claim_on(
        &self,
        conn: &mut diesel_async::AsyncMysqlConnection,
        request: &DequeueRequest,
        limited: bool,
    ) -> Result<Vec<queue_core::Job>, Failure> {
        if limited {
            return self.dequeue_limited_on(conn, request).await;
        }
        self.dequeue_on(
            conn,
            request,
            &crate::dequeue::TopLevels::new(),
            &mut crate::dequeue::Groups::new(),
            &crate::dequeue::Orders::default(),
        )
        .await
    }
}
