//! `waymark`: run the whole service locally, or administer projects. See `waymark --help`.

/// glibc's malloc took about a third of a warm list request's CPU (many small, short-lived
/// allocations across threads); mimalloc keeps them thread-local.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    local::allocator::keep_freed_memory();
    local::cli::main()
}
