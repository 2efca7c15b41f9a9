//! Results: one `result key=value ...` line each as they come, and a table
//! at the end.

use std::fmt::Write as _;

/// One measured figure set.
#[derive(Debug, Clone)]
pub(crate) struct Row {
    workload: String,
    params: Vec<(String, String)>,
    figures: Vec<(String, String)>,
}

impl Row {
    /// A row of `workload`.
    pub(crate) fn new(workload: &str) -> Self {
        Self {
            workload: workload.to_owned(),
            params: Vec::new(),
            figures: Vec::new(),
        }
    }

    /// A setting the figures depend on.
    pub(crate) fn param(mut self, key: &str, value: impl ToString) -> Self {
        self.params.push((key.to_owned(), value.to_string()));
        self
    }

    /// A measured figure.
    pub(crate) fn figure(mut self, key: &str, value: impl ToString) -> Self {
        self.figures.push((key.to_owned(), value.to_string()));
        self
    }

    /// A figure in milliseconds with three decimals.
    pub(crate) fn ms(self, key: &str, value: f64) -> Self {
        self.figure(key, format!("{value:.3}"))
    }
}

/// Every row of a run, for the closing table.
#[derive(Debug)]
pub(crate) struct Report {
    backend: &'static str,
    rows: Vec<Row>,
}

impl Report {
    pub(crate) fn new(backend: &'static str) -> Self {
        Self {
            backend,
            rows: Vec::new(),
        }
    }

    /// Prints the settings line.
    pub(crate) fn settings(&self, settings: &[(&str, String)]) {
        let mut line = format!("settings backend={}", self.backend);
        for (key, value) in settings {
            let _ = write!(line, " {key}={value}");
        }
        println!("{line}");
    }

    /// Prints `row` as a `result` line and keeps it for the table.
    pub(crate) fn push(&mut self, row: Row) {
        let mut line = format!("result backend={} workload={}", self.backend, row.workload);
        for (key, value) in row.params.iter().chain(&row.figures) {
            let _ = write!(line, " {key}={value}");
        }
        println!("{line}");
        self.rows.push(row);
    }

    /// The human table of every row.
    pub(crate) fn table(&self) -> String {
        let lines: Vec<[String; 3]> = self
            .rows
            .iter()
            .map(|row| [row.workload.clone(), join(&row.params), join(&row.figures)])
            .collect();
        let header = [
            "workload".to_owned(),
            "settings".to_owned(),
            "figures".to_owned(),
        ];
        let widths: Vec<usize> = (0..3)
            .map(|i| {
                lines
                    .iter()
                    .chain(std::iter::once(&header))
                    .map(|l| l[i].len())
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        let mut out = format!("\n{} on {}\n", "queue-bench", self.backend);
        for line in std::iter::once(&header).chain(&lines) {
            let _ = writeln!(
                out,
                "{:<w0$}  {:<w1$}  {}",
                line[0],
                line[1],
                line[2],
                w0 = widths[0],
                w1 = widths[1]
            );
        }
        out
    }
}

fn join(pairs: &[(String, String)]) -> String {
    pairs
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(" ")
}
