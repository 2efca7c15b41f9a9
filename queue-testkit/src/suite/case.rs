//! What a case is made of: the factory's fixture, the context a case
//! receives, and the case itself.

use std::future::Future;
use std::sync::Arc;

use async_trait::async_trait;
use queue_core::{Capability, Clock, ManualClock, Storage};

use super::BoxFuture;

/// A fresh storage for one case, what to run after it, and how to open a
/// second handle on it.
pub struct Fixture<S> {
    pub(super) storage: S,
    pub(super) teardown: Option<BoxFuture<()>>,
    second: Option<BoxFuture<S>>,
}

impl<S> Fixture<S> {
    /// A storage that needs no clean-up.
    pub fn new(storage: S) -> Self {
        Self {
            storage,
            teardown: None,
            second: None,
        }
    }

    /// Lets cases that need two handles run: `open` makes a second storage
    /// on the same database as this one (its own pool or connections, the
    /// same clock and schema or namespace), as a second host would. It runs
    /// only for the cases that ask (see [`Ctx::second`]), before the case;
    /// the teardown runs after both handles are dropped.
    pub fn with_second_handle(mut self, open: impl Future<Output = S> + Send + 'static) -> Self {
        self.second = Some(Box::pin(open));
        self
    }

    /// Takes the opener of the second handle, if the factory gave one.
    pub fn take_second_handle(&mut self) -> Option<BoxFuture<S>> {
        self.second.take()
    }

    /// Runs `teardown` after the case, once the storage is dropped (e.g. to
    /// drop the case's schema or database).
    pub fn with_teardown(mut self, teardown: impl Future<Output = ()> + Send + 'static) -> Self {
        self.teardown = Some(Box::pin(teardown));
        self
    }

    /// The storage and the teardown, to run them by hand.
    pub fn into_parts(self) -> (S, Option<BoxFuture<()>>) {
        (self.storage, self.teardown)
    }
}

/// Makes a fresh, empty, isolated storage per case.
#[async_trait]
pub trait StorageFactory: Send + Sync {
    /// The storage under test.
    type Storage: Storage;

    /// A new storage that reads `clock` for every "now", with nothing in it.
    /// A factory that cannot make one (no database configured, a server
    /// unreachable) panics with the reason: a case never passes without
    /// having run.
    async fn create(&self, clock: Clock) -> Fixture<Self::Storage>;
}

/// What a case receives: the storage and the clock it reads.
pub struct Ctx<S> {
    /// The storage under test, shareable across tasks.
    pub storage: Arc<S>,
    /// Its clock; advance it to let time pass.
    pub clock: ManualClock,
    /// A second handle on the same database, for a case that needs two
    /// ([`Case::handles`] 2); `None` otherwise.
    pub other: Option<Arc<S>>,
}

impl<S> Ctx<S> {
    /// The second handle on the same database, as another host holds it.
    ///
    /// # Panics
    /// In a case that did not ask for two handles ([`Case::handles`]).
    pub fn second(&self) -> &S {
        self.other
            .as_deref()
            .expect("a case that uses a second handle declares handles: 2")
    }
}

impl<S> Clone for Ctx<S> {
    fn clone(&self) -> Self {
        Self {
            storage: Arc::clone(&self.storage),
            clock: self.clock.clone(),
            other: self.other.clone(),
        }
    }
}

/// One conformance case.
pub struct Case<S> {
    /// The area file it lives in, e.g. `enqueue`.
    pub area: &'static str,
    /// Its function name.
    pub name: &'static str,
    /// The optional capabilities it exercises besides the core: it runs only
    /// on a storage that declares every one of them.
    pub requires: &'static [Capability],
    /// How many handles on one database it uses: 1, or 2 for a promise
    /// that must hold across processes (it runs only when the factory opens
    /// a second handle: [`Fixture::with_second_handle`]).
    pub handles: u8,
    /// Runs it; a failed case panics.
    pub run: fn(Ctx<S>) -> BoxFuture<()>,
}

impl<S> Case<S> {
    /// `area::name`.
    pub fn label(&self) -> String {
        format!("{}::{}", self.area, self.name)
    }
}
