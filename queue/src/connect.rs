//! [`connect`]: the backend chosen by the URL's scheme.

use queue_core::{QueueError, Result, redact_secrets, redact_url};

use crate::AnyStorage;

/// Connects to the database at `url`, choosing the backend by its scheme:
/// `sqlite://path?mode=rwc` or `sqlite::memory:` (feature `sqlite`),
/// `postgres://` or `postgresql://` (feature `postgres`), `mysql://` or
/// `mariadb://` (feature `mysql`), `redis://` or
/// `redis+cluster://host:port,host:port` (feature `redis`; `rediss://`, TLS,
/// is refused: this build has no TLS client). Call [`AnyStorage::migrate`]
/// before use.
///
/// # Errors
/// - [`QueueError::InvalidInput`] (field `url`) for a scheme no backend
///   serves, or one whose feature is off, naming the URL with its password
///   hidden.
/// - The backend's error when the server cannot be reached; its message
///   names the URL with its password hidden.
pub async fn connect(url: &str) -> Result<AnyStorage> {
    let scheme = url.split_once(':').map_or("", |(scheme, _)| scheme);
    let storage = match scheme.to_ascii_lowercase().as_str() {
        "postgres" | "postgresql" => postgres(url).await,
        "mysql" | "mariadb" => mysql(url),
        "sqlite" => sqlite(url).await,
        "redis" | "rediss" | "redis+cluster" | "rediss+cluster" => redis(url).await,
        _ => Err(QueueError::invalid(
            "url",
            format!(
                "{}: expected sqlite://, postgres://, postgresql://, mysql://, mariadb://, \
                 redis://, rediss:// or redis+cluster://",
                redact_url(url)
            ),
        )),
    };
    // Whatever a driver said about the URL, its secrets are hidden.
    storage.map_err(|error| match error {
        QueueError::InvalidInput { field, reason } => QueueError::InvalidInput {
            field,
            reason: redact_secrets(&reason, url),
        },
        QueueError::Unavailable(source) => QueueError::Unavailable(
            format!(
                "{}: {}",
                redact_url(url),
                redact_secrets(&source.to_string(), url)
            )
            .into(),
        ),
        QueueError::Backend(source) => QueueError::Backend(
            format!(
                "{}: {}",
                redact_url(url),
                redact_secrets(&source.to_string(), url)
            )
            .into(),
        ),
        other => other,
    })
}

#[cfg(feature = "postgres")]
async fn postgres(url: &str) -> Result<AnyStorage> {
    Ok(queue_postgres::PgStorage::connect(url).await?.into())
}

#[cfg(not(feature = "postgres"))]
async fn postgres(url: &str) -> Result<AnyStorage> {
    Err(feature_off(url, "postgres"))
}

#[cfg(feature = "mysql")]
fn mysql(url: &str) -> Result<AnyStorage> {
    // The driver knows only `mysql://`; MariaDB speaks the same protocol.
    let url = match url.split_once("://") {
        Some((scheme, rest)) if scheme.eq_ignore_ascii_case("mariadb") => format!("mysql://{rest}"),
        _ => url.to_owned(),
    };
    Ok(queue_mysql::MySqlStorage::connect(&url)?.into())
}

#[cfg(not(feature = "mysql"))]
fn mysql(url: &str) -> Result<AnyStorage> {
    Err(feature_off(url, "mysql"))
}

#[cfg(feature = "sqlite")]
async fn sqlite(url: &str) -> Result<AnyStorage> {
    Ok(queue_sqlite::SqliteStorage::connect(url).await?.into())
}

#[cfg(not(feature = "sqlite"))]
async fn sqlite(url: &str) -> Result<AnyStorage> {
    Err(feature_off(url, "sqlite"))
}

#[cfg(feature = "redis")]
async fn redis(url: &str) -> Result<AnyStorage> {
    Ok(queue_redis::RedisStorage::connect(url).await?.into())
}

#[cfg(not(feature = "redis"))]
async fn redis(url: &str) -> Result<AnyStorage> {
    Err(feature_off(url, "redis"))
}

#[cfg(any(
    not(feature = "postgres"),
    not(feature = "mysql"),
    not(feature = "sqlite"),
    not(feature = "redis")
))]
fn feature_off(url: &str, feature: &str) -> QueueError {
    QueueError::invalid(
        "url",
        format!(
            "{}: this build of the `queue` crate has no `{feature}` feature; enable it in Cargo.toml",
            redact_url(url)
        ),
    )
}
