//! Statements with their parameters, bound in the order of their `?`s.

use chrono::{DateTime, NaiveDateTime, Utc};
use diesel::mysql::Mysql;
use diesel::query_builder::{BoxedSqlQuery, SqlQuery};
use diesel::sql_types::{BigInt, Datetime, Nullable, Text};

/// One `?` of a statement.
#[derive(Debug, Clone)]
pub(crate) enum Param {
    Int(i64),
    OptInt(Option<i64>),
    Text(String),
    OptText(Option<String>),
    Time(NaiveDateTime),
    OptTime(Option<NaiveDateTime>),
}

/// A UTC instant as the naive DATETIME(6) value stored for it.
pub(crate) fn naive(at: DateTime<Utc>) -> NaiveDateTime {
    at.naive_utc()
}

/// A statement ready to run.
pub(crate) type Query = BoxedSqlQuery<'static, Mysql, SqlQuery>;

/// `sql` with `params` bound in order.
pub(crate) fn query(sql: &str, params: Vec<Param>) -> Query {
    let mut query = diesel::sql_query(sql.to_owned()).into_boxed::<Mysql>();
    for param in params {
        query = match param {
            Param::Int(v) => query.bind::<BigInt, _>(v),
            Param::OptInt(v) => query.bind::<Nullable<BigInt>, _>(v),
            Param::Text(v) => query.bind::<Text, _>(v),
            Param::OptText(v) => query.bind::<Nullable<Text>, _>(v),
            Param::Time(v) => query.bind::<Datetime, _>(v),
            Param::OptTime(v) => query.bind::<Nullable<Datetime>, _>(v),
        };
    }
    query
}

/// `(?, ?, …)` with `n` placeholders.
pub(crate) fn placeholders(n: usize) -> String {
    let mut out = String::with_capacity(n * 3 + 2);
    out.push('(');
    for i in 0..n {
        if i > 0 {
            out.push_str(", ");
        }
        out.push('?');
    }
    out.push(')');
    out
}

/// `(?, ?), (?, ?), …`: `rows` tuples of `width` placeholders.
pub(crate) fn tuples(rows: usize, width: usize) -> String {
    let one = placeholders(width);
    vec![one; rows].join(", ")
}
