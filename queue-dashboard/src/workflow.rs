//! A job's workflow on its page: the jobs it depends on and the jobs that
//! depend on it, followed both ways from link to link (`Storage::job_links`)
//! up to [`MOST_NODES`] jobs, drawn as an inline SVG (no script): one column
//! per layer, each job a box coloured by where it stands and linked to its
//! page, each dependency an arrow from the dependency to its dependant.
//!
//! Dependencies only point backwards (an id depends on lower ids:
//! `queue_core::check_batch_dependencies`), so ascending ids are a
//! topological order and a job's layer is one more than its deepest
//! dependency's.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use maud::{Markup, html};
use queue_core::{BatchCounts, JobId, LinkStatus, QueueError, QueueName, Result, Storage};

/// The most jobs one graph explores and draws.
pub(crate) const MOST_NODES: usize = 40;

const BOX_W: usize = 150;
const BOX_H: usize = 30;
const COLUMN: usize = 190;
const ROW: usize = 42;
const MARGIN: usize = 8;

/// One job of the graph.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Node {
    pub(crate) id: JobId,
    pub(crate) queue: Option<QueueName>,
    pub(crate) status: LinkStatus,
}

/// The jobs reached from one job, and the dependencies between them.
#[derive(Debug, Clone, Default)]
pub(crate) struct Graph {
    /// By id.
    pub(crate) nodes: BTreeMap<JobId, Node>,
    /// (dependency, dependant).
    pub(crate) edges: BTreeSet<(JobId, JobId)>,
    /// Whether links were left out at [`MOST_NODES`].
    pub(crate) truncated: bool,
    /// How the start's own dependencies stand (all of them, however many
    /// the graph holds): a batch's progress, read on its callback.
    pub(crate) progress: Option<BatchCounts>,
}

impl Graph {
    /// Follows `start`'s links both ways, breadth first, up to
    /// [`MOST_NODES`] jobs; `start` is `status` in `queue`.
    pub(crate) async fn explore<S: Storage>(storage: &S, start: Node) -> Result<Self> {
        let mut graph = Graph::default();
        let start_id = start.id;
        let mut next = VecDeque::from([start.id]);
        graph.nodes.insert(start.id, start);
        let mut visited = BTreeSet::new();
        while let Some(id) = next.pop_front() {
            if !visited.insert(id) {
                continue;
            }
            let links = match storage.job_links(id).await {
                Ok(links) => links,
                // Pruned from history meanwhile: nothing more to follow.
                Err(QueueError::NotFound { .. }) => continue,
                Err(error) => return Err(error),
            };
            if id == start_id && !links.dependencies.is_empty() {
                graph.progress = Some(BatchCounts::of(&links));
            }
            let sides = [(&links.dependencies, true), (&links.dependants, false)];
            for (side, dependency) in sides {
                for link in side {
                    if !graph.nodes.contains_key(&link.id) {
                        if graph.nodes.len() >= MOST_NODES {
                            graph.truncated = true;
                            continue;
                        }
                        graph.nodes.insert(
                            link.id,
                            Node {
                                id: link.id,
                                queue: link.queue.clone(),
                                status: link.status,
                            },
                        );
                        if link.status != LinkStatus::Gone {
                            next.push_back(link.id);
                        }
                    }
                    graph.edges.insert(if dependency {
                        (link.id, id)
                    } else {
                        (id, link.id)
                    });
                }
            }
        }
        Ok(graph)
    }

    /// Each job's layer: 0 without a dependency in the graph, else one
    /// more than its deepest dependency's.
    pub(crate) fn layers(&self) -> BTreeMap<JobId, usize> {
        let mut layers = BTreeMap::new();
        for id in self.nodes.keys() {
            let layer = self
                .edges
                .iter()
                .filter(|(_, to)| to == id)
                .filter_map(|(from, _)| layers.get(from))
                .map(|layer: &usize| layer + 1)
                .max()
                .unwrap_or(0);
            layers.insert(*id, layer);
        }
        layers
    }
}

/// The CSS class of a node: its state or final status.
fn class(status: LinkStatus) -> String {
    let name = match status {
        LinkStatus::Live(state) => state.as_str(),
        LinkStatus::Finished(status) => status.as_str(),
        LinkStatus::Gone => "gone",
    };
    format!("node {name}")
}

/// `graph` as an SVG, `current` outlined.
pub(crate) fn draw(graph: &Graph, current: JobId) -> Markup {
    let layers = graph.layers();
    let mut rows: BTreeMap<usize, usize> = BTreeMap::new();
    let mut place: BTreeMap<JobId, (usize, usize)> = BTreeMap::new();
    for (id, layer) in &layers {
        let row = rows.entry(*layer).or_default();
        place.insert(*id, (MARGIN + layer * COLUMN, MARGIN + *row * ROW));
        *row += 1;
    }
    let columns = rows.len().max(1);
    let tallest = rows.values().copied().max().unwrap_or(1);
    let width = 2 * MARGIN + (columns - 1) * COLUMN + BOX_W;
    let height = 2 * MARGIN + (tallest - 1) * ROW + BOX_H;
    let (finished, live) = graph
        .nodes
        .values()
        .partition::<Vec<_>, _>(|n| !matches!(n.status, LinkStatus::Live(_)));
    html! {
        svg.workflow width=(width) height=(height) viewBox=(format!("0 0 {width} {height}")) role="img" {
            title {
                "workflow: " (graph.nodes.len()) " jobs (" (live.len()) " live, "
                (finished.len()) " finished), " (graph.edges.len()) " dependencies"
            }
            @for (from, to) in &graph.edges {
                @if let (Some((x1, y1)), Some((x2, y2))) = (place.get(from), place.get(to)) {
                    line.edge x1=(x1 + BOX_W) y1=(y1 + BOX_H / 2) x2=(x2) y2=(y2 + BOX_H / 2) {}
                }
            }
            @for node in graph.nodes.values() {
                @if let Some((x, y)) = place.get(&node.id) {
                    a href=(format!("/jobs/{}", node.id)) {
                        rect class=(if node.id == current { format!("{} current", class(node.status)) } else { class(node.status) })
                            x=(x) y=(y) width=(BOX_W) height=(BOX_H) rx="4" {}
                        text x=(x + 6) y=(y + 13) { "#" (node.id) " " (node.queue.as_ref().map_or("-", |q| q.as_str())) }
                        text.state x=(x + 6) y=(y + 25) { (node.status) }
                    }
                }
            }
        }
    }
}

/// The page's workflow section: the graph and a table of the same jobs,
/// or nothing when the job has no links.
pub(crate) fn section(graph: &Graph, current: JobId) -> Markup {
    if graph.edges.is_empty() {
        return html! {};
    }
    html! {
        h2 { "Workflow" }
        @if let Some(progress) = graph.progress {
            p.batch-progress { "its dependencies: " (progress) }
        }
        (draw(graph, current))
        @if graph.truncated {
            p.muted { "the first " (MOST_NODES) " jobs reached; follow a job to see further" }
        }
        table.workflow-jobs {
            thead { tr { th { "job" } th { "queue" } th { "state" } th { "depends on" } } }
            tbody {
                @for node in graph.nodes.values() {
                    tr {
                        td { a href=(format!("/jobs/{}", node.id)) { (node.id) } }
                        td { (node.queue.as_ref().map_or("-", |q| q.as_str())) }
                        td { (node.status) }
                        td {
                            @for (from, _) in graph.edges.iter().filter(|(_, to)| *to == node.id) {
                                a href=(format!("/jobs/{from}")) { (from) } " "
                            }
                        }
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use queue_core::JobState;

    fn node(id: i64, status: LinkStatus) -> Node {
        Node {
            id: JobId(id),
            queue: Some(QueueName::new("q").expect("valid")),
            status,
        }
    }

    fn diamond() -> Graph {
        let mut graph = Graph::default();
        for id in 1..=4 {
            graph
                .nodes
                .insert(JobId(id), node(id, LinkStatus::Live(JobState::Waiting)));
        }
        for (from, to) in [(1, 2), (1, 3), (2, 4), (3, 4), (1, 4)] {
            graph.edges.insert((JobId(from), JobId(to)));
        }
        graph
    }

    #[test]
    fn a_layer_is_one_more_than_the_deepest_dependency() {
        let layers = diamond().layers();
        let expected: BTreeMap<JobId, usize> = [(1, 0), (2, 1), (3, 1), (4, 2)]
            .map(|(id, l)| (JobId(id), l))
            .into();
        assert_eq!(layers, expected);
    }

    #[test]
    fn every_job_is_a_linked_box_and_every_dependency_a_line() {
        let svg = draw(&diamond(), JobId(2)).into_string();
        assert_eq!(svg.matches("<rect").count(), 4, "{svg}");
        assert_eq!(svg.matches("<line").count(), 5, "{svg}");
        for id in 1..=4 {
            assert!(svg.contains(&format!("href=\"/jobs/{id}\"")), "{svg}");
        }
        assert_eq!(svg.matches("current").count(), 1, "{svg}");
        assert!(svg.contains("class=\"node waiting current\""), "{svg}");
        // Three columns of boxes: the width fits them.
        assert!(svg.contains(&format!("width=\"{}\"", 2 * MARGIN + 2 * COLUMN + BOX_W)));
    }
}
