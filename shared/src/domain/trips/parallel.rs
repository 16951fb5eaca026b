//! One long trip's analysis on two cores. A summary of 100,000 fixes is one request, and on a
//! small machine the other core would sit idle while it is computed; the steps that split
//! (scoring fixes, stop scans, smoothing, simplification) split here, into halves whose results
//! are put back in order, so the figures are the same as from one pass.

use std::ops::Range;

/// Work items at or above which [`in_two`] uses a second thread (a thread costs tens of µs).
const PARALLEL_ITEMS: usize = 20_000;

/// Whether work of `size` items is worth a second thread (and there is a second core).
pub(super) fn worth_two(size: usize) -> bool {
    size >= PARALLEL_ITEMS && cores() >= 2 && !ONE_THREAD.with(std::cell::Cell::get)
}

thread_local! {
    /// Set by tests to compute in one pass what they compare the halves with.
    static ONE_THREAD: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// `f()` computed in one pass on this thread, as before any split.
#[cfg(test)]
pub(super) fn one_pass<T>(f: impl FnOnce() -> T) -> T {
    ONE_THREAD.with(|o| o.set(true));
    let out = f();
    ONE_THREAD.with(|o| o.set(false));
    out
}

/// The cores a request may use at once (read once: the standard library asks the cgroup each
/// time).
pub(super) fn cores() -> usize {
    static CORES: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *CORES.get_or_init(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

/// `f` of `0..mid` and of `mid..len`, in that order: on two threads at once when `size` (what
/// the work is proportional to) is [`worth_two`] and both halves hold something, else as one
/// call of `f(0..len)`.
pub(super) fn in_two<T: Send>(size: usize, len: usize, mid: usize, f: &(impl Fn(Range<usize>) -> T + Sync)) -> Vec<T> {
    if !worth_two(size) || mid == 0 || mid >= len {
        return vec![f(0..len)];
    }
    std::thread::scope(|s| {
        let second = s.spawn(|| f(mid..len));
        let first = f(0..mid);
        vec![first, second.join().expect("a half of the analysis panicked")]
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn halves_come_back_in_order_and_small_work_stays_whole() {
        if cores() < 2 {
            return;
        }
        let f = |r: Range<usize>| (r.start, r.end, std::thread::current().id());
        let here = std::thread::current().id();
        let two = in_two(PARALLEL_ITEMS, 10, 4, &f);
        assert_eq!(two.iter().map(|p| (p.0, p.1)).collect::<Vec<_>>(), [(0, 4), (4, 10)]);
        assert!(two[0].2 == here && two[1].2 != here, "the second half runs on a thread of its own");
        for (size, mid) in [(PARALLEL_ITEMS - 1, 4), (PARALLEL_ITEMS, 0), (PARALLEL_ITEMS, 10)] {
            let one = in_two(size, 10, mid, &f);
            assert_eq!(one.len(), 1);
            assert_eq!((one[0].0, one[0].1, one[0].2), (0, 10, here));
        }
        assert_eq!(one_pass(|| in_two(PARALLEL_ITEMS, 10, 4, &f)).len(), 1);
    }
}
