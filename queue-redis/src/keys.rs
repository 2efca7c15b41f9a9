//! Key names. Every key of a queue starts with `<namespace>:{<queue>}`, so
//! one hash tag puts all of them (and every script touching them) on one
//! cluster slot; the namespace's global keys share the tag `{<namespace>}`.

use queue_core::{JobId, QueueError, Result};

/// Bits of a job id that hold its queue's index: ids encode their queue,
/// so a lookup by id needs no global map.
pub(crate) const QUEUE_BITS: u32 = 20;

/// The most queues one namespace can hold (the index is never 0).
pub(crate) const MAX_QUEUES: i64 = (1 << QUEUE_BITS) - 1;

/// The largest job sequence number: ids stay positive `i64`s.
const MAX_SEQ: i64 = i64::MAX >> QUEUE_BITS;

/// The namespace every key of a storage lives under.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Keys {
    namespace: String,
}

impl Default for Keys {
    /// [`crate::DEFAULT_NAMESPACE`].
    fn default() -> Self {
        Self {
            namespace: crate::DEFAULT_NAMESPACE.to_owned(),
        }
    }
}

impl Keys {
    /// Checks `namespace`: 1 to 64 bytes of ASCII letters, digits, `_`,
    /// `-`, `.` and `:` (no braces, which would change the hash tags).
    pub(crate) fn new(namespace: &str) -> Result<Self> {
        let valid = !namespace.is_empty()
            && namespace.len() <= 64
            && namespace
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.' | b':'));
        if !valid {
            return Err(QueueError::invalid(
                "namespace",
                format!(
                    "{namespace:?} must be 1 to 64 ASCII letters, digits, '_', '-', '.' or ':'"
                ),
            ));
        }
        Ok(Self {
            namespace: namespace.to_owned(),
        })
    }

    /// The namespace.
    pub(crate) fn namespace(&self) -> &str {
        &self.namespace
    }

    /// The prefix of every key of `queue`: `<namespace>:{<queue>}`, the
    /// name escaped so that it holds no brace (`%` -> `%25`, `{` -> `%7B`,
    /// `}` -> `%7D`): the tag is then always the whole queue name.
    pub(crate) fn queue(&self, queue: &str) -> String {
        let mut prefix = String::with_capacity(self.namespace.len() + queue.len() + 3);
        prefix.push_str(&self.namespace);
        prefix.push_str(":{");
        for c in queue.chars() {
            match c {
                '%' => prefix.push_str("%25"),
                '{' => prefix.push_str("%7B"),
                '}' => prefix.push_str("%7D"),
                c => prefix.push(c),
            }
        }
        prefix.push('}');
        prefix
    }

    /// The prefix of the namespace's global keys: `{<namespace>}` (queue
    /// registry and job sequence).
    pub(crate) fn global(&self) -> String {
        format!("{{{}}}", self.namespace)
    }

    /// The hash of queue name -> index.
    pub(crate) fn queues(&self) -> String {
        format!("{}:queues", self.global())
    }

    /// The hash of queue index -> name.
    pub(crate) fn queue_names(&self) -> String {
        format!("{}:queue_names", self.global())
    }

    /// The pub/sub channel of wake-ups (messages are queue names).
    pub(crate) fn channel(&self) -> String {
        format!("{}:wakeups", self.namespace)
    }

    /// The pub/sub channel of cancellations (messages are the ids of jobs
    /// discarded or cancelled).
    pub(crate) fn cancels(&self) -> String {
        format!("{}:cancels", self.namespace)
    }
}

/// A job id as the scripts carry it: 19 zero-padded digits, so that the
/// lexical order of members is the numeric order of ids.
pub(crate) fn token(id: JobId) -> String {
    format!("{:019}", id.get())
}

/// [`token`] written into `out`, without allocating.
pub(crate) fn write_token(id: JobId, out: &mut [u8; 19]) {
    let mut n = id.get().unsigned_abs();
    for digit in out.iter_mut().rev() {
        *digit = b'0' + (n % 10) as u8;
        n /= 10;
    }
}

/// The id of the `seq`-th job, in the queue with index `queue_index`.
pub(crate) fn job_id(seq: i64, queue_index: i64) -> Result<JobId> {
    if !(1..=MAX_SEQ).contains(&seq) || !(1..=MAX_QUEUES).contains(&queue_index) {
        return Err(QueueError::backend(format!(
            "job sequence {seq} or queue index {queue_index} is out of range"
        )));
    }
    Ok(JobId((seq << QUEUE_BITS) | queue_index))
}

/// The index of the queue a job id belongs to.
pub(crate) fn queue_index(id: JobId) -> i64 {
    id.get() & MAX_QUEUES
}

#[cfg(test)]
mod tests {
    use super::{Keys, MAX_QUEUES, MAX_SEQ, job_id, queue_index, token, write_token};
    use queue_core::JobId;

    #[test]
    fn queue_prefixes_keep_one_tag_whatever_the_name() {
        let keys = Keys::new("ns").expect("valid");
        assert_eq!(keys.queue("emails"), "ns:{emails}");
        assert_eq!(keys.queue("}a{%"), "ns:{%7Da%7B%25}");
        assert_ne!(keys.queue("%7D"), keys.queue("}"));
        assert_eq!(keys.global(), "{ns}");
        assert!(Keys::new("a{b").is_err());
        assert!(Keys::new("").is_err());
    }

    #[test]
    fn ids_encode_their_queue_and_sort_by_sequence() {
        let a = job_id(1, 7).expect("in range");
        let b = job_id(2, 1).expect("in range");
        assert!(a < b);
        assert_eq!(queue_index(a), 7);
        assert_eq!(queue_index(b), 1);
        assert_eq!(token(JobId(42)), "0000000000000000042");
        for id in [JobId(42), job_id(MAX_SEQ, MAX_QUEUES).expect("the largest")] {
            let mut written = [0u8; 19];
            write_token(id, &mut written);
            assert_eq!(std::str::from_utf8(&written), Ok(token(id).as_str()));
        }
        assert!(job_id(0, 1).is_err());
        assert!(job_id(1, 0).is_err());
    }
}
