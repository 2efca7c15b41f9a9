//! Each command, on the storage the URL names.

use std::io::Read;
use std::time::Duration;

use queue::{
    AnyStorage, Capability, GroupKey, HistoryFilter, HistoryPage, JobFilter, JobId, JobPage,
    JobState, MAX_BATCH, NewJob, PayloadMatch, PruneRequest, QueueName, Storage,
};
use serde_json::{Value, json};

use queue_dashboard::DashboardOptions;

use crate::CliError;
use crate::args::{Args, Command, JobSelection, Search};
use crate::{bulk, flow, output, workers};

/// Runs the parsed command line.
pub(crate) async fn run(args: Args) -> Result<(), CliError> {
    let storage = connect(&args).await?;
    let json = args.json;
    match args.command {
        Command::Migrate => {
            let applied = storage.migrate().await?;
            if json {
                output::json(&json!({ "applied": applied }))?;
            } else if applied.is_empty() {
                println!("up to date");
            } else {
                println!("applied migrations {applied:?}");
            }
        }
        Command::Enqueue {
            queue,
            payload,
            priority,
            unique_key,
            max_attempts,
            delay,
            at,
            group,
            depends_on,
            run_if_dependency_fails,
            joins,
        } => {
            let mut job = NewJob::new(queue, read_payload(payload.as_deref())?)
                .priority(priority)
                .depends_on_all(depends_on.into_iter().map(queue::JobId));
            if run_if_dependency_fails {
                job = job.on_dependency_failure(queue::DependencyFailure::Run);
            }
            if let Some(callback) = joins {
                job = job.joins(queue::JobId(callback));
            }
            if let Some(key) = unique_key {
                job = job.unique_key(key);
            }
            if let Some(group) = group {
                job = job.group_key(group);
            }
            if let Some(max) = max_attempts {
                job = job.max_attempts(max);
            }
            if let Some(delay) = delay {
                job = job.delay(delay);
            }
            if let Some(at) = at {
                job = job.run_at(at);
            }
            let outcome = storage.enqueue(job).await?;
            if json {
                output::json(&outcome)?;
            } else if outcome.existed {
                println!("{} (already live with this unique key)", outcome.id);
            } else {
                println!("{}", outcome.id);
            }
        }
        Command::Stats { watch, cap } => loop {
            let stats = storage.stats_capped(cap).await?;
            if json {
                output::json(&stats)?;
            } else {
                output::stats(&stats);
            }
            let Some(seconds) = watch else { break };
            tokio::time::sleep(Duration::from_secs(seconds.max(1))).await;
            if !json {
                println!();
            }
        },
        Command::Show { id } => show(&storage, JobId(id), json).await?,
        Command::History {
            queue,
            status,
            before,
            limit,
            search,
        } => {
            let filter = HistoryFilter {
                queue: queue.map(QueueName::new).transpose()?,
                status: status.map(Into::into),
                before: before.map(JobId),
                limit,
            };
            let payload = payload_match(&search)?;
            let found =
                queue::search_history(&storage, &filter, payload.as_ref(), search.scan).await?;
            let page = HistoryPage {
                records: found.items,
                next: found.next,
            };
            if json {
                let mut body = json!({ "records": page.records, "next": page.next });
                searched(
                    &mut body,
                    payload.as_ref(),
                    found.scanned,
                    found.budget_spent,
                );
                output::json(&body)?;
            } else {
                output::history(&page);
                output::searched(
                    payload.as_ref(),
                    found.scanned,
                    found.budget_spent,
                    page.next,
                );
            }
        }
        Command::Jobs {
            filter,
            before,
            limit,
            search,
        } => {
            let filter = JobFilter {
                before: before.map(JobId),
                limit,
                ..bulk::job_filter(&filter)?
            };
            let payload = payload_match(&search)?;
            let found =
                queue::search_jobs(&storage, &filter, payload.as_ref(), search.scan).await?;
            let page = JobPage {
                jobs: found.items,
                next: found.next,
            };
            let now = storage.now().await?;
            if json {
                let jobs: Vec<Value> = page
                    .jobs
                    .iter()
                    .map(|job| json!({ "state": job.state(now), "job": job }))
                    .collect();
                let mut body = json!({ "jobs": jobs, "next": page.next });
                searched(
                    &mut body,
                    payload.as_ref(),
                    found.scanned,
                    found.budget_spent,
                );
                output::json(&body)?;
            } else {
                output::jobs(&page, now);
                output::searched(
                    payload.as_ref(),
                    found.scanned,
                    found.budget_spent,
                    page.next,
                );
            }
        }
        Command::Retry {
            id,
            queue,
            all,
            yes,
        } => match id {
            Some(id) => {
                storage.retry_dead_letter(JobId(id)).await?;
                done(json, "retried", id)?;
            }
            None if queue.is_some() || all => {
                let described = queue
                    .as_deref()
                    .map_or_else(|| "all queues".to_owned(), |q| format!("queue {q}"));
                let dead_letters = HistoryFilter {
                    queue: queue.map(QueueName::new).transpose()?,
                    ..HistoryFilter::default()
                };
                let action = bulk::Action::Retry;
                let jobs = JobFilter::default();
                bulk::run(&storage, action, jobs, dead_letters, &described, yes, json).await?;
            }
            None => return Err(needs_target("retry", "--queue or --all")),
        },
        Command::Discard { id, filter, yes } => {
            by_id_or_filter(&storage, bulk::Action::Discard, id, &filter, yes, json).await?;
        }
        Command::RunNow { id, filter, yes } => {
            by_id_or_filter(&storage, bulk::Action::RunNow, id, &filter, yes, json).await?;
        }
        Command::Cancel { id } => {
            storage.cancel(JobId(id)).await?;
            done(json, "cancelled", id.to_string())?;
        }
        Command::Config {
            queue,
            concurrency,
            group_concurrency,
            priority_aging,
            fair_groups,
            rate,
            burst,
            lease,
            backoff_base,
            backoff_max,
            backoff_jitter,
        } => {
            let mut limits = flow::limits(
                concurrency,
                rate,
                burst,
                lease,
                backoff_base,
                backoff_max,
                backoff_jitter,
            )?;
            limits.group_concurrency = group_concurrency;
            limits.priority_aging = priority_aging;
            limits.fair_groups = fair_groups;
            limits.validate()?;
            let name = QueueName::new(queue.clone())?;
            storage.configure_queue(&name, &limits).await?;
            done(json, "configured", queue)?;
        }
        Command::GroupLimit {
            queue,
            group,
            limit,
            clear,
        } => {
            let name = QueueName::new(queue.clone())?;
            let key = GroupKey::new(group.clone())?;
            let limit = if clear { None } else { limit };
            storage.set_group_limit(&name, &key, limit).await?;
            match limit {
                Some(_) => done(json, "limited", format!("{queue}/{group}"))?,
                None => done(json, "lifted", format!("{queue}/{group}"))?,
            }
        }
        Command::GroupWeight {
            queue,
            group,
            weight,
            clear,
        } => {
            let name = QueueName::new(queue.clone())?;
            let key = GroupKey::new(group.clone())?;
            let weight = if clear { None } else { weight };
            storage.set_group_weight(&name, &key, weight).await?;
            match weight {
                Some(_) => done(json, "weighted", format!("{queue}/{group}"))?,
                None => done(json, "lifted", format!("{queue}/{group}"))?,
            }
        }
        Command::Groups => {
            let limits = storage.group_limits().await?;
            let weights = if storage.capabilities().supports(Capability::GroupWeights) {
                storage.group_weights().await?
            } else {
                Vec::new()
            };
            let groups = flow::group_settings(&limits, &weights);
            if json {
                output::json(&groups)?;
            } else {
                flow::print_group_settings(&groups);
            }
        }
        Command::Queues => {
            let configs = storage.queue_configs().await?;
            if json {
                output::json(&configs.iter().map(flow::config_json).collect::<Vec<_>>())?;
            } else {
                flow::print_configs(&configs);
            }
        }
        Command::Schedules => {
            let schedules = storage.schedules().await?;
            if json {
                output::json(&schedules)?;
            } else {
                flow::print_schedules(&schedules);
            }
        }
        Command::Workers {
            silent_after,
            forget_after,
        } => workers::run(&storage, silent_after, forget_after, json).await?,
        Command::Pause { queue } => {
            storage.pause_queue(&QueueName::new(queue.clone())?).await?;
            done(json, "paused", queue)?;
        }
        Command::Resume { queue } => {
            storage
                .resume_queue(&QueueName::new(queue.clone())?)
                .await?;
            done(json, "resumed", queue)?;
        }
        Command::Dashboard {
            bind,
            token,
            read_only,
            refresh,
            allowed_hosts,
            secure_cookie,
        } => {
            let options = DashboardOptions {
                read_only,
                token,
                refresh: (refresh > 0).then(|| Duration::from_secs(refresh)),
                allowed_hosts,
                secure_cookie,
            };
            crate::serve::dashboard(storage, bind, options).await?
        }
        Command::Prune { older_than, status } => {
            let request = PruneRequest {
                older_than,
                status: status.map(Into::into),
                limit: MAX_BATCH,
            };
            let mut deleted = 0;
            loop {
                let batch = storage.prune_history(&request).await?;
                deleted += batch;
                if batch < u64::from(MAX_BATCH) {
                    break;
                }
            }
            if json {
                output::json(&json!({ "deleted": deleted }))?;
            } else {
                println!("deleted {deleted} history rows");
            }
        }
    }
    Ok(())
}

/// The storage at `--database-url`, in `--schema` when one is given.
async fn connect(args: &Args) -> Result<AnyStorage, CliError> {
    let Some(url) = args
        .database_url
        .as_deref()
        .filter(|url| !url.trim().is_empty())
    else {
        return Err(CliError::usage(
            "no database: pass --database-url or set QUEUE_DATABASE_URL",
        ));
    };
    let storage = queue::connect(url).await?;
    let storage = match args.schema.as_deref() {
        Some(schema) => storage.with_schema(schema)?,
        None => storage,
    };
    match args
        .read_url
        .as_deref()
        .filter(|url| !url.trim().is_empty())
    {
        None => Ok(storage),
        Some(read_url) => match storage {
            AnyStorage::Postgres(pg) => Ok(AnyStorage::Postgres(
                pg.with_read_url(read_url).await.map_err(|error| {
                    let message = crate::one_line(&format!(
                        "--read-url {}: {}",
                        queue::redact_url(read_url),
                        queue::redact_secrets(&error.to_string(), read_url)
                    ));
                    if error.invalid_field().is_some() {
                        CliError::usage(message)
                    } else {
                        CliError::failed(message)
                    }
                })?,
            )),
            other => Err(CliError::usage(format!(
                "--read-url reads from a PostgreSQL standby; the {} backend has none",
                other.backend()
            ))),
        },
    }
}

/// The payload argument, or standard input for `-` or none, as JSON.
fn read_payload(argument: Option<&str>) -> Result<Value, CliError> {
    let text = match argument {
        Some(text) if text != "-" => text.to_owned(),
        _ => {
            let mut text = String::new();
            std::io::stdin().read_to_string(&mut text).map_err(|e| {
                CliError::usage(format!("cannot read the payload from standard input: {e}"))
            })?;
            text
        }
    };
    serde_json::from_str(&text)
        .map_err(|e| CliError::usage(format!("the payload is not JSON: {e}")))
}

/// Prints a live job, or its history row once finished.
async fn show(storage: &AnyStorage, id: JobId, json: bool) -> Result<(), CliError> {
    // A job's dependencies and dependants, where the storage has them; a
    // job with neither shows as before.
    let links = async || -> Result<Option<queue::JobLinks>, CliError> {
        if !storage.capabilities().supports(Capability::Dependencies) {
            return Ok(None);
        }
        let links = storage.job_links(id).await?;
        Ok((!links.dependencies.is_empty() || !links.dependants.is_empty()).then_some(links))
    };
    if let Some(job) = storage.get_job(id).await? {
        let now = storage.now().await?;
        let links = links().await?;
        if json {
            let mut shown = json!({ "live": true, "state": job.state(now), "job": job });
            if let Some(links) = &links {
                shown["links"] = json!(links);
            }
            output::json(&shown)?;
        } else {
            output::job(&job, now);
            output::links(links.as_ref());
        }
        return Ok(());
    }
    match storage.get_history(id).await? {
        Some(record) if json => {
            let mut shown = json!({ "live": false, "record": record });
            if let Some(links) = links().await? {
                shown["links"] = json!(links);
            }
            output::json(&shown)
        }
        Some(record) => {
            output::record(&record);
            output::links(links().await?.as_ref());
            Ok(())
        }
        None => Err(CliError::failed(format!(
            "job {id} not found, live or in history"
        ))),
    }
}

/// `discard` and `run-now`: one job by id, or what the filter selects.
async fn by_id_or_filter(
    storage: &AnyStorage,
    action: bulk::Action,
    id: Option<i64>,
    selection: &JobSelection,
    yes: bool,
    json: bool,
) -> Result<(), CliError> {
    match (id, selection.is_given()) {
        (Some(_), true) => Err(CliError::usage(
            "give a job id or a filter (--queue, --state, --unique-key, --all), not both",
        )),
        (Some(id), false) if action == bulk::Action::Discard => {
            storage.discard(JobId(id)).await?;
            done(json, "discarded", id)
        }
        (Some(id), false) => {
            if storage.get_job(JobId(id)).await?.is_none() {
                return Err(CliError::failed(format!("live job {id} not found")));
            }
            let moved = storage.run_now(&JobFilter::id(JobId(id))).await?;
            if moved == 0 {
                return Err(CliError::failed(format!(
                    "job {id} is not scheduled: only a delayed or retrying job can run now"
                )));
            }
            done(json, "made available", id)
        }
        (None, true) => {
            let described = describe(selection);
            let jobs = bulk::job_filter(selection)?;
            let history = HistoryFilter::default();
            bulk::run(storage, action, jobs, history, &described, yes, json).await
        }
        (None, false) => Err(needs_target(
            if action == bulk::Action::Discard {
                "discard"
            } else {
                "run-now"
            },
            "--queue, --state, --unique-key or --all",
        )),
    }
}

/// The usage error of a command given neither an id nor a filter.
fn needs_target(command: &str, filters: &str) -> CliError {
    CliError::usage(format!("{command} needs a job id or a filter ({filters})"))
}

/// A selection in words, for the confirmation question.
fn describe(selection: &JobSelection) -> String {
    let mut parts = Vec::new();
    if let Some(queue) = &selection.queue {
        parts.push(format!("queue {queue}"));
    }
    if let Some(state) = selection.state {
        parts.push(format!("state {}", JobState::from(state)));
    }
    if let Some(key) = &selection.unique_key {
        parts.push(format!("unique key {key}"));
    }
    if parts.is_empty() {
        "every live job".to_owned()
    } else {
        parts.join(", ")
    }
}

/// Confirms a mutation.
fn done(json: bool, what: &str, target: impl std::fmt::Display) -> Result<(), CliError> {
    if json {
        output::json(&json!({ what: target.to_string() }))
    } else {
        println!("{what} {target}");
        Ok(())
    }
}

/// The payload match of `--where`, if given (its own `--scan` checked by
/// the search).
fn payload_match(search: &Search) -> Result<Option<PayloadMatch>, CliError> {
    Ok(search
        .payload
        .as_deref()
        .map(str::parse::<PayloadMatch>)
        .transpose()?)
}

/// Adds what a search read to a listing's JSON answer (nothing without
/// `--where`).
fn searched(body: &mut Value, payload: Option<&PayloadMatch>, scanned: u32, budget_spent: bool) {
    if payload.is_some() {
        body["scanned"] = json!(scanned);
        body["budget_spent"] = json!(budget_spent);
    }
}
