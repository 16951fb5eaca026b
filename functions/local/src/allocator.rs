//! The server's allocator (mimalloc, see `main.rs`), told to keep freed memory for 10 s before
//! giving it back to the OS rather than mimalloc's 1 s. Ingest frees and allocates the same
//! large buffers request after request (a batch's parsed locations, a processing pass's reads);
//! given back after a second, they came back as fresh pages for the kernel to zero
//! (`clear_page_erms` was 15 % of an ingest profile), and `POST /v1/api/location/` ingested
//! 3–16 % less in alternated runs (docs/measurements.md). An idle server still gives its memory
//! back, 10 s later. `MIMALLOC_PURGE_DELAY` set in the environment (milliseconds; -1 never) wins.

use std::ffi::c_long;

/// `mi_option_purge_delay` in mimalloc v3's `mimalloc.h`. libmimalloc-sys does not name it (the
/// numbering may change between versions), so a test holds the number to the option's default.
const PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// How long freed memory is kept, in milliseconds.
const PURGE_DELAY_MS: c_long = 10_000;

/// Sets the delay unless the environment already chose one. Call it first thing in `main`,
/// before any other thread exists: mimalloc stores options as plain values, read by every thread
/// that purges.
pub fn keep_freed_memory() {
    if !shared::config::Env::process().has("MIMALLOC_PURGE_DELAY") {
        // SAFETY: a valid option number and value; the caller runs it while no other thread
        // can read the option (see above).
        unsafe { libmimalloc_sys::mi_option_set(PURGE_DELAY, PURGE_DELAY_MS) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The delay mimalloc uses now.
    fn purge_delay_ms() -> c_long {
        // SAFETY: reads one of mimalloc's options by a valid number.
        unsafe { libmimalloc_sys::mi_option_get(PURGE_DELAY) }
    }

    #[test]
    fn the_option_set_is_mimallocs_purge_delay() {
        // mimalloc v3's default purge delay is 1,000 ms (options.c); the options around number 15
        // default to 0 or 1, so a renumbering would show here. (The harness may run the crate's
        // other test beside this one; a purge there would see the old or the new delay.)
        if !shared::config::Env::process().has("MIMALLOC_PURGE_DELAY") {
            assert_eq!(purge_delay_ms(), 1000, "option {PURGE_DELAY} is not mimalloc's purge delay");
            keep_freed_memory();
            assert_eq!(purge_delay_ms(), PURGE_DELAY_MS);
        }
    }
}
