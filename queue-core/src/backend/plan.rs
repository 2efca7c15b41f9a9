//! What a backend's `explain_*` diagnostics return: the plan of one of its
//! statements as a flat list of steps, the same type on every backend.

/// One step of a statement's plan, as the database reported it.
///
/// PostgreSQL reports a tree of nodes: its steps are the nodes, depth
/// first. MySQL and MariaDB report one `EXPLAIN` row per table access.
#[derive(Debug, Clone, PartialEq)]
pub struct PlanStep {
    /// What the step does: a PostgreSQL node type (`Index Scan`, `Sort`,
    /// `Seq Scan`, …) or a MySQL access type (`range`, `ref`, `ALL`, …).
    pub operation: String,
    /// The table the step reads, if it reads one.
    pub table: Option<String>,
    /// The index the step uses, if any.
    pub index: Option<String>,
    /// The planner's estimate of the rows the step produces, if given.
    pub rows: Option<f64>,
    /// The planner's estimated total cost of the step, its children's
    /// included, if given (PostgreSQL's `Total Cost`: among other things
    /// it decides whether a statement is JIT-compiled).
    pub cost: Option<f64>,
    /// The rows the step produced, over all its loops, when the statement
    /// was executed to explain it (PostgreSQL's `EXPLAIN ANALYZE`).
    pub actual_rows: Option<f64>,
    /// The pages (buffers) the step touched, when the statement was
    /// executed with buffer counting (PostgreSQL's shared hit + read
    /// blocks, its children's included).
    pub buffers: Option<f64>,
    /// Anything else the database said of the step (MySQL's `Extra`, such
    /// as `Using filesort`).
    pub detail: Option<String>,
}

impl PlanStep {
    /// True when the step reads `table` whole, without an index.
    pub fn scans_whole(&self, table: &str) -> bool {
        self.table.as_deref() == Some(table)
            && matches!(self.operation.as_str(), "Seq Scan" | "ALL")
    }
}
