//! The migration helpers: statement splitting, checksums, numbering.

use queue_core::backend::migration::{Migration, check_sequence, unapplied};

const SQL: &str = "-- a comment; not an end\nCREATE TABLE a (\n  x INT -- trailing;\n);\n\nCREATE INDEX b ON a (x);\n-- only a comment;\n";

fn migration(version: u32, sql: &'static str) -> Migration {
    Migration {
        version,
        name: "test",
        sql,
    }
}

#[test]
fn statements_split_at_line_ending_semicolons_and_skip_comment_chunks() {
    let statements = migration(1, SQL).statements();
    assert_eq!(statements.len(), 2, "{statements:#?}");
    assert!(statements[0].contains("CREATE TABLE a"));
    assert!(statements[0].ends_with(");"));
    assert_eq!(statements[1], "CREATE INDEX b ON a (x);");
}

#[test]
fn a_last_statement_without_semicolon_is_kept() {
    assert_eq!(
        migration(1, "SELECT 1;\nSELECT 2").statements(),
        ["SELECT 1;", "SELECT 2"]
    );
}

#[test]
fn checksum_is_stable_and_changes_with_the_text() {
    assert_eq!(migration(1, SQL).checksum(), migration(2, SQL).checksum());
    assert_ne!(
        migration(1, SQL).checksum(),
        migration(1, "SELECT 1;").checksum()
    );
    // FNV-1a of the empty input is its offset basis.
    assert_eq!(migration(1, "").checksum() as u64, 0xcbf2_9ce4_8422_2325);
}

#[test]
fn versions_must_count_up_from_one_without_gaps() {
    assert!(check_sequence(&[migration(1, ""), migration(2, "")]).is_ok());
    let err = check_sequence(&[migration(1, ""), migration(3, "")]).expect_err("gap");
    assert_eq!(err.invalid_field(), Some("migrations"));
    assert!(check_sequence(&[migration(2, "")]).is_err());
}

#[test]
fn unapplied_skips_recorded_ignores_unknown_and_rejects_edited() {
    let all = [migration(1, "A;"), migration(2, "B;"), migration(3, "C;")];
    let recorded = [(1, all[0].checksum()), (9, 0)];
    let pending = unapplied(&all, &recorded).expect("pending");
    assert_eq!(
        pending.iter().map(|m| m.version).collect::<Vec<_>>(),
        [2, 3]
    );
    let edited = [(2, all[2].checksum())];
    let error = unapplied(&all, &edited).expect_err("edited migration");
    assert!(error.to_string().contains("migration 2"), "{error}");
}
