//! Statements with their parameters, bound in the order of their `?`s.

use chrono::{DateTime, NaiveDateTime, Utc};
use diesel::mysql::Mysql;
use diesel::query_builder::{BoxedSqlQuery, SqlQuery};
use diesel::sql_types::{BigInt, Datetime, Double, Nullable, Text};

/// One `?` of a statement.
#[derive(Debug, Clone)]
pub(crate) enum Param {
    Int(i64),
    OptInt(Option<i64>),
    Text(String),
    OptText(Option<String>),
    Time(NaiveDateTime),
    OptTime(Option<NaiveDateTime>),
    OptDouble(Option<f64>),
}

/// A UTC instant as the naive DATETIME(6) value stored for it.
pub(crate) fn naive(at: DateTime<Utc>) -> NaiveDateTime {
    at.naive_utc()
}

/// The binds of `sql.rs`'s `job_filter` for `filter` at `now`: each
/// filter's value when it is set, in the order of its conditions.
pub(crate) fn job_filter(filter: &queue_core::JobFilter, now: NaiveDateTime) -> Vec<Param> {
    let mut params = Vec::new();
    if let Some(queue) = &filter.queue {
        params.push(Param::Text(queue.as_str().to_owned()));
    }
    if let Some(state) = filter.state {
        let nows = crate::sql::state_filter(state).matches('?').count();
        params.extend((0..nows).map(|_| Param::Time(now)));
    }
    if let Some(id) = filter.id {
        params.push(Param::Int(id.get()));
    }
    if let Some(key) = &filter.unique_key {
        params.push(Param::Text(key.as_str().to_owned()));
    }
    if let Some(before) = filter.before {
        params.push(Param::Int(before.get()));
    }
    params
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
            Param::OptDouble(v) => query.bind::<Nullable<Double>, _>(v),
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

/// A statement the connection prepares once and keeps (diesel's statement
/// cache, keyed by the SQL text and bind types), unlike `sql_query`, which
/// diesel prepares, runs and closes every time: two round trips and a
/// server-side prepare per call instead of one. Only for statements of a
/// bounded number of shapes (fixed text, or IN-lists sized by
/// [`id_list`]), so each connection keeps a few dozen at most, far below
/// the server's `max_prepared_stmt_count` (16,382 by default) however many
/// connections run.
pub(crate) struct Cached {
    sql: String,
    params: Vec<Param>,
}

/// `sql` (one `?` per parameter, none inside literals) with `params`,
/// prepared once per connection.
pub(crate) fn cached(sql: impl Into<String>, params: Vec<Param>) -> Cached {
    Cached {
        sql: sql.into(),
        params,
    }
}

impl diesel::query_builder::QueryFragment<Mysql> for Cached {
    fn walk_ast<'b>(
        &'b self,
        mut out: diesel::query_builder::AstPass<'_, 'b, Mysql>,
    ) -> diesel::QueryResult<()> {
        let mut pieces = self.sql.split('?');
        if let Some(first) = pieces.next() {
            out.push_sql(first);
        }
        let mut params = self.params.iter();
        for piece in pieces {
            let param = params.next().ok_or_else(|| {
                diesel::result::Error::QueryBuilderError("more placeholders than parameters".into())
            })?;
            match param {
                Param::Int(v) => out.push_bind_param::<BigInt, _>(v)?,
                Param::OptInt(v) => out.push_bind_param::<Nullable<BigInt>, _>(v)?,
                Param::Text(v) => out.push_bind_param::<Text, _>(v)?,
                Param::OptText(v) => out.push_bind_param::<Nullable<Text>, _>(v)?,
                Param::Time(v) => out.push_bind_param::<Datetime, _>(v)?,
                Param::OptTime(v) => out.push_bind_param::<Nullable<Datetime>, _>(v)?,
                Param::OptDouble(v) => out.push_bind_param::<Nullable<Double>, _>(v)?,
            }
            out.push_sql(piece);
        }
        if params.next().is_some() {
            return Err(diesel::result::Error::QueryBuilderError(
                "more parameters than placeholders".into(),
            ));
        }
        Ok(())
    }
}

impl diesel::query_builder::QueryId for Cached {
    type QueryId = ();
    const HAS_STATIC_QUERY_ID: bool = false;
}

impl diesel::query_builder::Query for Cached {
    type SqlType = diesel::sql_types::Untyped;
}

/// The largest IN-list given a shape of its own; longer lists are sized to
/// a multiple of it.
const ID_LIST_MAX_BUCKET: usize = 1024;

/// `ids` padded (repeating the last one, which changes no IN-list's
/// meaning) to a power of two up to 1024, or to a multiple of 1024: few
/// statement shapes, so [`cached`] statements stay few.
pub(crate) fn id_list(ids: &[i64]) -> Vec<i64> {
    let mut padded = ids.to_vec();
    if let Some(&last) = ids.last() {
        padded.resize(bucket(ids.len()), last);
    }
    padded
}

/// The padded length [`id_list`] uses for `n` items.
pub(crate) fn bucket(n: usize) -> usize {
    if n <= ID_LIST_MAX_BUCKET {
        n.next_power_of_two()
    } else {
        n.div_ceil(ID_LIST_MAX_BUCKET) * ID_LIST_MAX_BUCKET
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn id_lists_pad_to_few_shapes_with_their_last_id() {
        assert_eq!(id_list(&[]), Vec::<i64>::new());
        assert_eq!(id_list(&[7]), [7]);
        assert_eq!(id_list(&[1, 2, 3]), [1, 2, 3, 3]);
        assert_eq!(id_list(&[1, 2, 3, 4, 5]).len(), 8);
        assert_eq!(bucket(1024), 1024);
        assert_eq!(bucket(1025), 2048);
        assert_eq!(bucket(3000), 3072);
        let shapes: std::collections::HashSet<usize> = (1..=5000).map(bucket).collect();
        assert_eq!(
            shapes.len(),
            11 + 4,
            "powers of two to 1024, then 2048..5120"
        );
    }

    #[test]
    fn cached_statements_count_their_placeholders() {
        use diesel::query_builder::QueryFragment;
        let ok = cached("SELECT ? + ?", vec![Param::Int(1), Param::Int(2)]);
        assert!(
            ok.to_sql(&mut diesel::mysql::MysqlQueryBuilder::new(), &Mysql)
                .is_ok()
        );
        let short = cached("SELECT ? + ?", vec![Param::Int(1)]);
        assert!(
            short
                .to_sql(&mut diesel::mysql::MysqlQueryBuilder::new(), &Mysql)
                .is_err()
        );
        let long = cached("SELECT ?", vec![Param::Int(1), Param::Int(2)]);
        assert!(
            long.to_sql(&mut diesel::mysql::MysqlQueryBuilder::new(), &Mysql)
                .is_err()
        );
    }
}
