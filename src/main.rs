//! `connect-offsets`: the command-line tool. See `connect-offsets --help`.

mod cli;

fn main() -> std::process::ExitCode {
    cli::main()
}
