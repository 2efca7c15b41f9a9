//! What only backend authors need. The first resident: reading values
//! back from the database, with one error for a value the queue never
//! writes.

mod stored;

pub use stored::{corrupt, stored, stored_count, stored_optional};
