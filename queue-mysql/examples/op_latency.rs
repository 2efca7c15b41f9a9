//! Single-connection latency of each `Storage` operation on MySQL / MariaDB
//! (each a short transaction: see the crate docs for its statements).
//!
//! ```sh
//! cargo run --release -p queue-mysql --example op_latency -- mysql://root@127.0.0.1:3306/ 2000
//! ```
//!
//! Works in the database `queue_latency`, which it drops and recreates.

use diesel_async::{AsyncConnection, AsyncMysqlConnection, SimpleAsyncConnection};
use queue_mysql::MySqlStorage;

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let server = args
        .next()
        .unwrap_or_else(|| "mysql://root@127.0.0.1:3306/".into());
    let n: usize = args.next().map(|s| s.parse()).transpose()?.unwrap_or(2000);

    let mut admin = AsyncMysqlConnection::establish(&server).await?;
    admin
        .batch_execute("DROP DATABASE IF EXISTS queue_latency; CREATE DATABASE queue_latency")
        .await?;
    let url = format!("{}/queue_latency", server.trim_end_matches('/'));
    let storage = MySqlStorage::connect_with_size(&url, 1)?;
    storage.migrate().await?;
    queue_testkit::latency::measure(&storage, "mysql", n).await?;
    Ok(())
}
