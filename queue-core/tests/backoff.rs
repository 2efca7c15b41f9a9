//! Backoff: bounds, jitter, monotone midpoint, extremes, determinism.

use std::time::Duration;

use proptest::prelude::*;
use queue_core::Backoff;
use rand::SeedableRng;
use rand::rngs::StdRng;

const HUNDRED_YEARS: u64 = 100 * 365 * 24 * 60 * 60;

fn backoff() -> impl Strategy<Value = Backoff> {
    (
        1u64..=HUNDRED_YEARS * 1_000_000_000,
        0u64..=HUNDRED_YEARS,
        0u64..=HUNDRED_YEARS,
        0.0f64..=1.0,
    )
        .prop_filter_map("base and max within range", |(base_ns, a, b, jitter)| {
            let (min, max) = (a.min(b), a.max(b));
            Backoff::new(
                Duration::from_nanos(base_ns),
                Duration::from_secs(min),
                Duration::from_secs(max),
                jitter,
            )
            .ok()
        })
}

fn any_attempt() -> impl Strategy<Value = u32> {
    prop_oneof![0u32..80, Just(u32::MAX), Just(u32::MAX - 1), any::<u32>()]
}

#[test]
fn defaults_are_one_second_twenty_percent_one_hour() {
    let b = Backoff::default();
    assert_eq!(b.base(), Duration::from_secs(1));
    assert_eq!(b.jitter(), 0.2);
    assert_eq!(b.min(), Duration::ZERO);
    assert_eq!(b.max(), Duration::from_secs(3600));
}

#[test]
fn nominal_doubles_per_attempt_until_the_cap() {
    let b = Backoff::default();
    let secs: Vec<u64> = (1..=13).map(|a| b.nominal(a).as_secs()).collect();
    assert_eq!(
        secs,
        [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 3600]
    );
    assert_eq!(
        b.nominal(0),
        Duration::from_secs(1),
        "attempt 0 counts as the first"
    );
}

#[test]
fn jitter_bounds_of_the_third_attempt_are_plus_minus_twenty_percent() {
    let b = Backoff::default();
    assert_eq!(
        b.bounds(3),
        (Duration::from_secs_f64(3.2), Duration::from_secs_f64(4.8))
    );
}

#[test]
fn jitter_still_spreads_delays_at_the_cap_but_never_above_it() {
    let b = Backoff::default();
    let (low, high) = b.bounds(40);
    assert_eq!(low, Duration::from_secs(2880));
    assert_eq!(high, Duration::from_secs(3600));
}

#[test]
fn the_same_seed_gives_the_same_delays() {
    let b = Backoff::default();
    let draw = |seed| {
        let mut rng = StdRng::seed_from_u64(seed);
        (1..=10).map(|a| b.delay(a, &mut rng)).collect::<Vec<_>>()
    };
    assert_eq!(draw(7), draw(7));
    assert_ne!(draw(7), draw(8));
}

#[test]
fn min_lifts_short_delays() {
    let b = Backoff::new(
        Duration::from_millis(10),
        Duration::from_secs(1),
        Duration::from_secs(5),
        0.0,
    )
    .expect("valid");
    assert_eq!(b.nominal(1), Duration::from_secs(1));
    assert_eq!(b.nominal(10), Duration::from_secs(5));
}

proptest! {
    #[test]
    fn delay_is_always_within_min_and_max(b in backoff(), attempt in any_attempt(), seed in any::<u64>()) {
        let delay = b.delay(attempt, &mut StdRng::seed_from_u64(seed));
        prop_assert!(delay >= b.min() && delay <= b.max(), "{delay:?} outside [{:?}, {:?}]", b.min(), b.max());
    }

    #[test]
    fn delay_is_within_the_jitter_bounds_of_its_attempt(b in backoff(), attempt in any_attempt(), seed in any::<u64>()) {
        let delay = b.delay(attempt, &mut StdRng::seed_from_u64(seed));
        let (low, high) = b.bounds(attempt);
        prop_assert!(low <= delay && delay <= high, "{delay:?} outside [{low:?}, {high:?}]");
    }

    #[test]
    fn jitter_factor_stays_within_one_plus_minus_jitter(
        base_ms in 1u64..10_000,
        attempt in 1u32..10,
        jitter in 0.0f64..=1.0,
        seed in any::<u64>(),
    ) {
        // A cap far above the nominal keeps clamping out of the way.
        let b = Backoff::new(Duration::from_millis(base_ms), Duration::ZERO, Duration::from_secs(HUNDRED_YEARS), jitter).unwrap();
        let nominal = b.nominal(attempt).as_secs_f64();
        let factor = b.delay(attempt, &mut StdRng::seed_from_u64(seed)).as_secs_f64() / nominal;
        let slack = 1e-9;
        prop_assert!(factor >= 1.0 - jitter - slack && factor <= 1.0 + jitter + slack, "factor {factor}");
    }

    #[test]
    fn midpoint_without_jitter_never_decreases(b in backoff(), attempt in 0u32..u32::MAX) {
        let next = attempt + 1;
        prop_assert!(b.nominal(attempt) <= b.nominal(next));
        prop_assert_eq!(b.delay_with_factor(attempt, 1.0), b.nominal(attempt));
    }

    #[test]
    fn extreme_attempts_and_factors_never_panic(b in backoff(), attempt in any_attempt(), factor in any::<f64>()) {
        let delay = b.delay_with_factor(attempt, factor);
        prop_assert!(delay <= b.max());
    }
}
