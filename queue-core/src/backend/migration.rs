//! Numbered SQL migrations, as the backends embed and apply them.

use crate::{QueueError, Result};

/// One migration file: `NNNN_name.sql`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Migration {
    /// The number before the underscore; versions start at 1 and have no gaps.
    pub version: u32,
    /// The name after the underscore.
    pub name: &'static str,
    /// The file's SQL: statements each ending with `;` at the end of a line.
    pub sql: &'static str,
}

impl Migration {
    /// A stable FNV-1a hash of the SQL, recorded when applied so that an
    /// edited migration is detected instead of silently ignored.
    pub fn checksum(&self) -> i64 {
        let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
        for byte in self.sql.bytes() {
            hash ^= u64::from(byte);
            hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
        }
        i64::from_ne_bytes(hash.to_ne_bytes())
    }

    /// The statements of the file, for drivers that run one at a time.
    ///
    /// A statement ends at a line whose code (the part before any `--`
    /// comment) ends in `;`; chunks holding only comments are dropped. The
    /// splitter does not parse string literals, so migrations keep `--` and
    /// line-ending `;` out of them.
    pub fn statements(&self) -> Vec<&'static str> {
        let mut statements = Vec::new();
        let mut start = 0;
        let mut offset = 0;
        for line in self.sql.split_inclusive('\n') {
            offset += line.len();
            let code = line.split("--").next().unwrap_or_default().trim();
            if code.ends_with(';') {
                push_statement(&mut statements, &self.sql[start..offset]);
                start = offset;
            }
        }
        push_statement(&mut statements, &self.sql[start..]);
        statements
    }
}

fn push_statement(statements: &mut Vec<&'static str>, chunk: &'static str) {
    let has_code = chunk
        .lines()
        .map(str::trim)
        .any(|line| !line.is_empty() && !line.starts_with("--"));
    if has_code {
        statements.push(chunk.trim());
    }
}

impl Migration {
    /// The error for a migration recorded with another checksum: the file
    /// was edited after it was applied somewhere.
    pub fn edited_error(&self) -> QueueError {
        QueueError::Conflict {
            reason: format!(
                "migration {} ({}) was applied with different SQL than this library embeds",
                self.version, self.name
            ),
        }
    }
}

/// Checks that `migrations` are numbered 1, 2, 3 … in order.
pub fn check_sequence(migrations: &[Migration]) -> Result<()> {
    for (index, migration) in migrations.iter().enumerate() {
        let expected = u32::try_from(index + 1).unwrap_or(u32::MAX);
        if migration.version != expected {
            return Err(QueueError::invalid(
                "migrations",
                format!(
                    "migration {} ({}) found where version {expected} was expected",
                    migration.version, migration.name
                ),
            ));
        }
    }
    Ok(())
}

/// The migrations still to apply, given the `(version, checksum)` pairs a
/// database recorded: those not recorded, in order.
///
/// A recorded version whose checksum differs is the
/// [`Migration::edited_error`]; recorded versions this library does not
/// know (a newer release applied them) are ignored.
pub fn unapplied(migrations: &[Migration], recorded: &[(u32, i64)]) -> Result<Vec<Migration>> {
    let mut pending = Vec::new();
    for migration in migrations {
        match recorded
            .iter()
            .find(|(version, _)| *version == migration.version)
        {
            Some((_, checksum)) if *checksum == migration.checksum() => {}
            Some(_) => return Err(migration.edited_error()),
            None => pending.push(*migration),
        }
    }
    Ok(pending)
}
