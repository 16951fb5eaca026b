//! `waymark`: run the whole service locally, or administer projects. See `waymark --help`.

fn main() -> std::process::ExitCode {
    local::cli::main()
}
