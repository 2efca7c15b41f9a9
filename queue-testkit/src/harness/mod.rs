//! Databases for tests: found by URL in the environment, isolated per test.
//!
//! | variable | meaning |
//! |---|---|
//! | `QUEUE_TEST_POSTGRES_URL` | a PostgreSQL database the tests may create schemas in |
//! | `QUEUE_TEST_MYSQL_URL` | a MySQL / MariaDB server the tests may create databases on |
//! | `QUEUE_TEST_POSTGRES_IMAGE`, `QUEUE_TEST_MYSQL_IMAGE` | images for the container fallback |
//!
//! Without a URL, and with the `containers` feature, the harness starts one
//! container per server kind per test binary (see [`containers`]). With
//! neither, a database test fails with one line saying which variable to
//! set: it never passes without having run.
//!
//! Each test gets its own PostgreSQL schema or MySQL database, named
//! `queue_test_<random>`, and drops it when done. Pools belong to the test's
//! own runtime: the harness hands out URLs and options, never a pool.

#[cfg(feature = "containers")]
pub mod containers;
#[cfg(feature = "mysql")]
pub mod mysql;
#[cfg(feature = "postgres")]
pub mod postgres;

/// Starts a database and returns its URL, or says why it could not.
pub type Fallback = fn() -> Result<String, String>;

/// Reads the URL in `var`; without it, asks `fallback` (a container).
///
/// # Panics
/// When neither gives a database, with one line naming `var`.
pub fn database_url(var: &str, fallback: Option<Fallback>) -> String {
    if let Ok(url) = std::env::var(var)
        && !url.trim().is_empty()
    {
        return url;
    }
    let why = match fallback.map(|start| start()) {
        Some(Ok(url)) => return url,
        Some(Err(error)) => error,
        None => "the `containers` feature is off".to_owned(),
    };
    panic!(
        "no database for this test: {var} is not set and no container could be started ({why}); \
         set {var} to a reachable database (scripts/test.sh uses the local servers)"
    );
}

/// Retries `connect` on failure for up to 30 seconds: a container's server
/// may restart once after its first "ready" line.
///
/// # Panics
/// With the last error, naming `what`, when 30 seconds pass.
pub async fn connect_with_retry<T, E, F, Fut>(what: &str, mut connect: F) -> T
where
    E: std::fmt::Display,
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, E>>,
{
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        match connect().await {
            Ok(conn) => return conn,
            Err(error) if std::time::Instant::now() >= deadline => {
                panic!("{what} is unreachable: {error}")
            }
            Err(_) => tokio::time::sleep(std::time::Duration::from_millis(250)).await,
        }
    }
}

/// A fresh name for an isolated schema or database.
pub fn unique_name() -> String {
    format!(
        "queue_test_{}_{:08x}",
        std::process::id(),
        rand::random::<u32>()
    )
}

/// Asserts that `migrations` embeds exactly the `NNNN_name.sql` files of
/// `dir`, with the same versions, names and text: the embedded copy cannot
/// drift from the files operators read.
///
/// # Panics
/// On any difference, naming it.
pub fn assert_migrations_match_dir(
    dir: &std::path::Path,
    migrations: &[queue_core::backend::migration::Migration],
) {
    let mut files: Vec<(u32, String, String)> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()))
        .filter_map(|entry| {
            let path = entry.ok()?.path();
            let stem = path.file_name()?.to_str()?.strip_suffix(".sql")?.to_owned();
            let (version, name) = stem.split_once('_')?;
            let text = std::fs::read_to_string(&path).ok()?;
            Some((version.parse().ok()?, name.to_owned(), text))
        })
        .collect();
    files.sort();
    let embedded: Vec<(u32, String, String)> = migrations
        .iter()
        .map(|m| (m.version, m.name.to_owned(), m.sql.to_owned()))
        .collect();
    assert_eq!(
        files.iter().map(|f| (f.0, &f.1)).collect::<Vec<_>>(),
        embedded.iter().map(|m| (m.0, &m.1)).collect::<Vec<_>>(),
        "migration files in {} and embedded migrations differ",
        dir.display()
    );
    for (file, embedded) in files.iter().zip(&embedded) {
        assert!(
            file.2 == embedded.2,
            "migration {} differs from its file",
            file.0
        );
    }
}
