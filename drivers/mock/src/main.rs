use std::process::ExitCode;

use clap::Parser as _;
use dracheck_mock_driver::cli::Args;
use dracheck_mock_driver::error::Failure;

#[tokio::main]
async fn main() -> ExitCode {
    let args = Args::parse();
    // kube's and tonic's own diagnostics, into the driver's log, where RUST_LOG asks for them
    // (a run passes its environment on to the drivers it starts).
    if let Ok(filter) = tracing_subscriber::EnvFilter::try_from_default_env() {
        tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).with_ansi(false).init();
    }
    if args.print_version {
        println!("{}", args.version_line());
        return ExitCode::SUCCESS;
    }
    match dracheck_mock_driver::run(args).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("dracheck-mock-driver: {e}");
            status(e.failure())
        }
    }
}

/// The exit status of a failed start or run (README.md lists them): the suite's numbers for
/// bad input (2) and an unreachable cluster (3), 1 when serving fails later on. A program of
/// its own, the mock chooses its process's codes here, not in its library.
fn status(f: Failure) -> ExitCode {
    ExitCode::from(match f {
        Failure::BadInput => 2,
        Failure::ClusterUnreachable => 3,
        Failure::ServeFailed => 1,
    })
}
