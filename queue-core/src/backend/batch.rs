//! A batch of new jobs as every backend takes it: validated whole before
//! anything is written, and repeats of a unique key inside it resolved as
//! if the jobs came one at a time.

use std::collections::HashMap;

use crate::{NewJob, QueueName, Result, UniqueKey, ValidJob};

/// Validates every job of a batch, and the dependencies between them
/// ([`crate::check_batch_dependencies`]); the first invalid job fails the
/// whole batch, so nothing of it is written.
///
/// # Errors
/// The first job's [`NewJob::validate`] error, else the dependencies'.
pub fn validate_batch(jobs: &[NewJob]) -> Result<Vec<ValidJob>> {
    let valid = jobs
        .iter()
        .map(NewJob::validate)
        .collect::<Result<Vec<_>>>()?;
    crate::check_batch_dependencies(&valid)?;
    Ok(valid)
}

/// For each job, the index of the first job in `jobs` with the same queue
/// and unique key (its own index when it has no key or comes first).
///
/// Backends use it to give later repeats of a key inside one batch the
/// first job's outcome with `existed = true`, as if the batch were
/// enqueued one job at a time.
pub fn first_occurrences(jobs: &[ValidJob]) -> Vec<usize> {
    let mut seen: HashMap<(&QueueName, &UniqueKey), usize> = HashMap::new();
    jobs.iter()
        .enumerate()
        .map(|(i, job)| match &job.unique_key {
            Some(key) => *seen.entry((&job.queue, key)).or_insert(i),
            None => i,
        })
        .collect()
}
