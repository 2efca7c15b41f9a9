//! PostgreSQL server settings a soak sets for its run (`autovacuum`,
//! `autovacuum_naptime`): `ALTER SYSTEM` and `pg_reload_conf()`, no
//! restart, and put back afterwards as `postgresql.auto.conf` had them
//! (also after an error, Ctrl-C or SIGTERM: the caller restores on every
//! path but SIGKILL), printing what was done or what to run by hand.

use std::time::{Duration, Instant};

use sqlx::PgPool;

use crate::BenchError;

/// One setting changed for the run.
#[derive(Debug)]
struct Changed {
    name: &'static str,
    /// The value in effect before the run.
    before: String,
    /// What `postgresql.auto.conf` said before the run (`None`: nothing).
    auto_conf: Option<String>,
}

/// The settings changed for the run, restored by [`ServerSettings::restore`].
#[derive(Debug)]
pub(crate) struct ServerSettings {
    pool: PgPool,
    changed: Vec<Changed>,
}

impl ServerSettings {
    /// Sets each `(name, value)` for the run; on an error puts back those
    /// already set.
    pub(crate) async fn apply(
        pool: PgPool,
        wanted: &[(&'static str, String)],
    ) -> Result<Self, BenchError> {
        let mut settings = Self {
            pool,
            changed: Vec::new(),
        };
        for (name, value) in wanted {
            if let Err(error) = settings.set(name, value).await {
                settings.restore().await;
                return Err(error);
            }
        }
        Ok(settings)
    }

    async fn set(&mut self, name: &'static str, value: &str) -> Result<(), BenchError> {
        let before = self.current(name).await?;
        let auto_conf: Option<String> = sqlx::query_scalar(
            "SELECT setting FROM pg_file_settings \
             WHERE name = $1 AND sourcefile LIKE '%postgresql.auto.conf' \
             ORDER BY seqno DESC LIMIT 1",
        )
        .bind(name)
        .fetch_optional(&self.pool)
        .await?;
        let statement = format!("ALTER SYSTEM SET {name} = '{}'", value.replace('\'', "''"));
        let file = auto_conf.as_deref().unwrap_or("no entry").to_owned();
        sqlx::raw_sql(sqlx::AssertSqlSafe(statement.clone()))
            .execute(&self.pool)
            .await?;
        self.changed.push(Changed {
            name,
            before: before.clone(),
            auto_conf,
        });
        self.reload(&[(name, value)]).await?;
        let now = self.current(name).await?;
        println!(
            "soak: {name} was {before} (postgresql.auto.conf: {file}); {statement}, \
             pg_reload_conf(): now {now}"
        );
        Ok(())
    }

    async fn current(&self, name: &str) -> Result<String, BenchError> {
        Ok(sqlx::query_scalar("SELECT current_setting($1)")
            .bind(name)
            .fetch_one(&self.pool)
            .await?)
    }

    /// Reloads the configuration and waits (up to 5 s) until this session
    /// sees every `(name, value)`.
    async fn reload(&self, expected: &[(&str, &str)]) -> Result<(), BenchError> {
        sqlx::query("SELECT pg_reload_conf()")
            .execute(&self.pool)
            .await?;
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let mut seen = true;
            for (name, value) in expected {
                seen &= self.current(name).await? == *value;
            }
            if seen || Instant::now() >= deadline {
                return Ok(());
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Puts `postgresql.auto.conf` back as it was and reloads; prints what
    /// it did, or what to run by hand if it failed.
    pub(crate) async fn restore(self) {
        for changed in self.changed.iter().rev() {
            let statement = match &changed.auto_conf {
                Some(value) => format!(
                    "ALTER SYSTEM SET {} = '{}'",
                    changed.name,
                    value.replace('\'', "''")
                ),
                None => format!("ALTER SYSTEM RESET {}", changed.name),
            };
            let outcome = async {
                sqlx::raw_sql(sqlx::AssertSqlSafe(statement.clone()))
                    .execute(&self.pool)
                    .await?;
                self.reload(&[(changed.name, changed.before.as_str())])
                    .await?;
                self.current(changed.name).await
            }
            .await;
            match outcome {
                Ok(now) => println!(
                    "soak: restored {}: {statement}, pg_reload_conf(): now {now} \
                     (was {} before the run)",
                    changed.name, changed.before
                ),
                Err(error) => eprintln!(
                    "soak: could not restore {} ({error}); run by hand: \
                     psql -c \"{statement}\" -c \"SELECT pg_reload_conf()\"",
                    changed.name
                ),
            }
        }
    }
}
