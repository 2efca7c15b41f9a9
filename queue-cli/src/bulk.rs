//! Commands on what a filter selects: count it, ask, then act in bounded
//! batches until done.

use std::io::{BufRead, IsTerminal, Write};

use queue::{Capability, HistoryFilter, JobFilter, JobState, MAX_PAGE_SIZE, QueueName, Storage};
use serde_json::json;

use crate::CliError;
use crate::args::JobSelection;
use crate::output;

/// What a bulk command does to each selected job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Action {
    /// `run-now`: scheduled jobs become available now.
    RunNow,
    /// `discard`: live jobs go to history as discarded.
    Discard,
    /// `retry`: dead letters go back to their queue.
    Retry,
}

impl Action {
    fn verb(self) -> &'static str {
        match self {
            Self::RunNow => "run now",
            Self::Discard => "discard",
            Self::Retry => "retry",
        }
    }

    fn done(self) -> &'static str {
        match self {
            Self::RunNow => "made available",
            Self::Discard => "discarded",
            Self::Retry => "retried",
        }
    }
}

/// The `JobFilter` a selection stands for (its limit set per call).
pub(crate) fn job_filter(selection: &JobSelection) -> Result<JobFilter, CliError> {
    Ok(JobFilter {
        queue: selection.queue.clone().map(QueueName::new).transpose()?,
        state: selection.state.map(Into::into),
        unique_key: selection
            .unique_key
            .clone()
            .map(queue::UniqueKey::new)
            .transpose()?,
        ..JobFilter::default()
    })
}

/// Counts what `action` would touch, asks unless `yes`, then acts in
/// batches of at most 1,000 until that many are done or none is left.
pub(crate) async fn run(
    storage: &impl Storage,
    action: Action,
    jobs: JobFilter,
    dead_letters: HistoryFilter,
    described: &str,
    yes: bool,
    json: bool,
) -> Result<(), CliError> {
    // Both checked before counting and asking, so that nobody confirms an
    // action the storage cannot take.
    let declared = storage.capabilities();
    let operation = match action {
        Action::RunNow => "run_now",
        Action::Discard => "discard_jobs",
        Action::Retry => "retry_dead_letters",
    };
    declared.require(Capability::BulkActions, operation)?;
    if action != Action::Retry {
        declared.require(Capability::ListJobs, "list_jobs")?;
    }
    let jobs = match action {
        // Only scheduled jobs can be made available now.
        Action::RunNow if jobs.state.is_none() => JobFilter {
            state: Some(JobState::Scheduled),
            ..jobs
        },
        _ => jobs,
    };
    let matching = count(storage, action, &jobs, &dead_letters).await?;
    if matching == 0 {
        return finish(action, 0, json);
    }
    if !yes {
        confirm(&format!(
            "{} {matching} {} ({described})?",
            action.verb(),
            if action == Action::Retry {
                "dead letters"
            } else {
                "jobs"
            }
        ))?;
    }
    let mut total = 0;
    while total < matching {
        let limit = u32::try_from((matching - total).min(u64::from(MAX_PAGE_SIZE)))
            .unwrap_or(MAX_PAGE_SIZE);
        let moved = match action {
            Action::RunNow => {
                storage
                    .run_now(&JobFilter {
                        limit,
                        ..jobs.clone()
                    })
                    .await?
            }
            Action::Discard => {
                storage
                    .discard_jobs(&JobFilter {
                        limit,
                        ..jobs.clone()
                    })
                    .await?
            }
            Action::Retry => {
                storage
                    .retry_dead_letters(&HistoryFilter {
                        limit,
                        ..dead_letters.clone()
                    })
                    .await?
            }
        };
        if moved == 0 {
            break;
        }
        total += moved;
    }
    finish(action, total, json)
}

/// How many jobs (or dead letters) the action would touch now.
async fn count(
    storage: &impl Storage,
    action: Action,
    jobs: &JobFilter,
    dead_letters: &HistoryFilter,
) -> Result<u64, CliError> {
    let mut total = 0;
    let mut before = None;
    loop {
        let (seen, next) = if action == Action::Retry {
            let page = storage
                .list_dead_letters(&HistoryFilter {
                    before,
                    limit: MAX_PAGE_SIZE,
                    ..dead_letters.clone()
                })
                .await?;
            (page.records.len(), page.next)
        } else {
            let page = storage
                .list_jobs(&JobFilter {
                    before,
                    limit: MAX_PAGE_SIZE,
                    ..jobs.clone()
                })
                .await?;
            (page.jobs.len(), page.next)
        };
        total += seen as u64;
        match next {
            Some(next) => before = Some(next),
            None => return Ok(total),
        }
    }
}

/// Asks `question` on the terminal; anything but `y` or `yes` declines.
fn confirm(question: &str) -> Result<(), CliError> {
    let stdin = std::io::stdin();
    if !stdin.is_terminal() {
        return Err(CliError::usage(format!(
            "{question} refused: standard input is not a terminal; pass --yes to confirm"
        )));
    }
    eprint!("{question} [y/N] ");
    let _ = std::io::stderr().flush();
    let mut answer = String::new();
    stdin
        .lock()
        .read_line(&mut answer)
        .map_err(|e| CliError::usage(format!("cannot read the answer: {e}")))?;
    if matches!(answer.trim().to_ascii_lowercase().as_str(), "y" | "yes") {
        Ok(())
    } else {
        Err(CliError::failed("cancelled, nothing changed"))
    }
}

fn finish(action: Action, total: u64, json: bool) -> Result<(), CliError> {
    if json {
        output::json(&json!({ action.done().replace(' ', "_"): total }))
    } else {
        println!("{} {total}", action.done());
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use queue::{Capabilities, Capability, NewJob, Storage};
    use queue_testkit::MemoryStorage;
    use queue_testkit::restricted::Restricted;

    use super::{Action, run};

    /// Each bulk command on a storage without bulk actions (or, for run-now
    /// and discard, without job listings) stops before counting or asking,
    /// with one line naming what is missing, and changes nothing.
    #[tokio::test]
    async fn bulk_commands_name_the_capability_the_storage_lacks() {
        let memory = std::sync::Arc::new(MemoryStorage::new());
        memory
            .enqueue(NewJob::new("q", serde_json::json!(1)))
            .await
            .expect("enqueue");
        let cases = [
            (Capabilities::CORE, Action::Discard, "bulk_actions"),
            (Capabilities::CORE, Action::RunNow, "bulk_actions"),
            (Capabilities::CORE, Action::Retry, "bulk_actions"),
            (
                Capabilities::CORE.with(Capability::BulkActions),
                Action::Discard,
                "list_jobs",
            ),
        ];
        for (offered, action, named) in cases {
            let storage = Restricted::shared(std::sync::Arc::clone(&memory), offered);
            let error = run(
                &storage,
                action,
                queue::JobFilter::default(),
                queue::HistoryFilter::default(),
                "every job",
                true,
                false,
            )
            .await
            .expect_err("refused");
            assert_eq!(error.code, 1, "{action:?}: {}", error.message);
            assert!(!error.message.contains('\n'), "one line: {}", error.message);
            assert!(
                error.message.contains(named),
                "{action:?}: {}",
                error.message
            );
        }
        assert_eq!(
            memory.stats().await.expect("stats").len(),
            1,
            "nothing changed"
        );
    }
}
