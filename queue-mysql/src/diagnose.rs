//! Diagnostics for operators: does a claim use the dequeue index, and how
//! many rows does it lock, on this server and this data?

use diesel::QueryableByName;
use diesel::sql_types::{BigInt, Nullable, Text};
use diesel_async::{AsyncConnection, RunQueryDsl};
use queue_core::{DequeueRequest, Result};

use crate::MySqlStorage;
use crate::bind::{Param, query};
use crate::error::retrying;
use crate::sql::PICK;

/// One row of the server's `EXPLAIN` (the columns both servers share).
#[derive(QueryableByName, Debug, Clone, PartialEq, Eq)]
pub struct PlanStep {
    /// The table read.
    #[diesel(sql_type = Nullable<Text>)]
    pub table: Option<String>,
    /// The access type: `range`, `ref`, `ALL` (a full scan), …
    #[diesel(sql_type = Nullable<Text>, column_name = "type")]
    pub access: Option<String>,
    /// The index used.
    #[diesel(sql_type = Nullable<Text>)]
    pub key: Option<String>,
    /// Notes such as `Using filesort`.
    #[diesel(sql_type = Nullable<Text>, column_name = "Extra")]
    pub extra: Option<String>,
}

#[derive(QueryableByName)]
struct Locked {
    #[diesel(sql_type = BigInt)]
    rows: i64,
}

impl MySqlStorage {
    fn pick_params(&self, request: &DequeueRequest) -> Vec<Param> {
        let queue = request.queues()[0].as_str().to_owned();
        let now = self
            .now_override()
            .unwrap_or_else(|| chrono::Utc::now().naive_utc());
        vec![
            Param::Text(queue.clone()),
            Param::Time(now),
            Param::Text(queue),
            Param::Int(i64::from(request.limit())),
        ]
    }

    /// The server's plan for the claim's scan of the first queue of
    /// `request` (each queue of a claim is scanned the same way).
    ///
    /// # Errors
    /// As any query.
    pub async fn explain_dequeue(&self, request: &DequeueRequest) -> Result<Vec<PlanStep>> {
        let params = self.pick_params(request);
        retrying(true, || async {
            let mut conn = self.connection().await?;
            Ok(query(&format!("EXPLAIN {PICK}"), params.clone())
                .load::<PlanStep>(&mut conn)
                .await?)
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
        let params = self.pick_params(request);
        retrying(true, || async {
            let mut conn = self.connection().await?;
            // The locking read changes nothing; committing releases its locks.
            conn.transaction(async |conn| {
                query(PICK, params.clone()).execute(conn).await?;
                let locked = diesel::sql_query(
                    "SELECT CAST(trx_rows_locked AS SIGNED) AS `rows` FROM information_schema.innodb_trx \
                     WHERE trx_mysql_thread_id = CONNECTION_ID()",
                )
                .get_result::<Locked>(conn)
                .await?;
                Ok(u64::try_from(locked.rows).unwrap_or_default())
            })
            .await
        })
        .await
    }
}
