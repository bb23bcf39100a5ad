use std::process::ExitCode;

use clap::Parser as _;
use dracheck_mock_driver::cli::Args;

#[tokio::main]
async fn main() -> ExitCode {
    let args = Args::parse();
    if args.print_version {
        println!("{}", args.version_line());
        return ExitCode::SUCCESS;
    }
    match dracheck_mock_driver::run(args).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("dracheck-mock-driver: {e}");
            ExitCode::from(u8::try_from(e.exit_code()).unwrap_or(1))
        }
    }
}
