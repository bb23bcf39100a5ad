//! dracheck's command line: `dracheck …` installed (`src/bin/dracheck.rs`), `cargo xtask …` in
//! a checkout (`src/main.rs`); the same commands under either name.

mod bench;
mod cleanup;
mod cluster;
mod conformance;
mod dist;
mod drivers;
mod exit;
mod explain;
mod fidelity;
mod in_cluster;
mod install;
mod interrupt;
mod inventory;
mod kubeconfig;
mod list;
mod nodes;
mod profiles;
mod providers;
mod report;
mod test_plan;

use std::process::ExitCode;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};

/// The name the command line runs under, which its help and the commands its messages suggest
/// use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Program {
    /// The installed (or unpacked) binary.
    Dracheck,
    /// The in-repo alias (`.cargo/config.toml`).
    CargoXtask,
}

impl Program {
    pub fn name(self) -> &'static str {
        match self {
            Program::Dracheck => "dracheck",
            Program::CargoXtask => "cargo xtask",
        }
    }
}

/// The program running now, as the user typed it (`dracheck`, `cargo xtask`): messages that
/// tell the user a command to run name it, the libraries' too.
fn program() -> &'static str {
    dracheck_adapter::program::name()
}

/// The clap command of `program`, for parsing and for what `dist` generates from it
/// (completions, man pages).
fn command(program: Program) -> clap::Command {
    Cli::command().name(program.name()).bin_name(program.name())
}

/// Conformance checks for Kubernetes Dynamic Resource Allocation drivers and device profiles.
#[derive(Debug, Parser)]
#[command(name = "dracheck", version, propagate_version = true)]
struct Cli {
    /// More diagnostics on stderr, of dracheck, the emulated kubelets, kube and tonic: -v info,
    /// -vv debug, -vvv trace. `RUST_LOG` (tracing's filter syntax, e.g. `kube=debug`) wins.
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    verbose: u8,
    #[command(subcommand)]
    command: Command,
}

/// A tracing subscriber on stderr where `-v` or `RUST_LOG` asks for one; without either,
/// none: dracheck's own output is its progress lines and results.
fn diagnostics(verbose: u8) {
    use tracing_subscriber::EnvFilter;
    let filter = match (EnvFilter::try_from_default_env(), verbose) {
        (Ok(filter), _) => filter,
        (Err(_), 0) => return,
        (Err(_), 1) => EnvFilter::new("info"),
        (Err(_), 2) => EnvFilter::new("debug"),
        (Err(_), _) => EnvFilter::new("trace"),
    };
    let _ = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).try_init();
}

#[derive(Debug, Subcommand)]
// The two large argument sets are boxed, which keeps the variants close in size.
enum Command {
    /// Run, stop and inspect the embedded local cluster (real upstream control-plane binaries).
    #[command(subcommand)]
    Cluster(Box<cluster::ClusterCommand>),
    /// Run the conformance suite against a driver: compatible and impossible claims, the claim
    /// lifecycle, driver and node restarts, node removal; writes a JSON result.
    Conformance(Box<conformance::ConformanceArgs>),
    /// Measure: cluster start-up, the default conformance run (medians over several runs).
    #[command(subcommand)]
    Bench(bench::BenchCommand),
    /// Render a result as JUnit XML, Markdown or HTML (default: all three, next to the JSON).
    Report(report::ReportArgs),
    /// Aggregate the results in a folder into one HTML and Markdown matrix of guarantees by
    /// driver, driver version, Kubernetes version and cluster.
    Matrix(report::MatrixArgs),
    /// The migration gate: may the cluster of result B replace that of result A? Exit 1 on a
    /// regression or a hardware difference that was not allowed.
    Compare(report::CompareArgs),
    /// Why is this pod's claim (or this ResourceClaim) pending although devices are free? The
    /// request against every device the cluster publishes, as the scheduler evaluates it.
    Explain(explain::ExplainArgs),
    /// What NVML says this host's GPUs are, next to what the NVIDIA driver published for its
    /// node, and where they disagree (exit 1).
    Inventory(inventory::InventoryArgs),
    /// Every guarantee the suite can check: what it holds, its profile family (or the driver
    /// contract) and what it needs of the target.
    List(list::ListArgs),
    /// Work with profiles without a cluster: `profile validate FILE…`.
    #[command(subcommand)]
    Profile(profiles::ProfileCommand),
    /// Build (or check) the control-plane binaries, then run the workspace's tests: the machine
    /// state tests alone, then the fidelity table's tiered check (every row targeted, a rotating
    /// few against the whole suite) beside every other test binary, with a summary of each
    /// binary's time. `--quick`: fmt, clippy and the tests that start no cluster. With arguments
    /// after `--`, `cargo test --workspace ARGS`.
    Test(TestArgs),
    /// The fidelity table on its own: each mock fault against the suite, compared with the
    /// table. Targeted (only the scenarios of each row's guarantees) by default; `--full`: every
    /// row against the whole suite, the release gate, recorded in reports/fidelity/.
    Fidelity(fidelity::FidelityArgs),
    /// Remove what runs that are gone (killed before their teardown) left: local state dirs
    /// in $TMPDIR, and with --kubeconfig their namespaces and DeviceClasses on that cluster.
    Cleanup(cleanup::CleanupArgs),
    /// Build the release archive (in a checkout): `dracheck` and `dracheck-mock-driver`, shell
    /// completions, man pages, README, in `dracheck-<version>-<target>.tar.gz` with `SHA256SUMS`.
    Dist(dist::DistArgs),
    /// Print the least access a run needs, as RBAC for `kubectl apply -f -`: a Namespace, a
    /// ServiceAccount, a ClusterRole with exactly the suite's permissions, and its binding.
    Rbac(in_cluster::RbacArgs),
    /// Print a Job that runs `conformance` in the cluster under `rbac`'s ServiceAccount, from
    /// the image `cargo xtask dist --image` builds; `retrieve` gets its results.
    Job(Box<in_cluster::JobArgs>),
    /// Wait for the in-cluster Job to finish, write its result and reports to --out, and exit
    /// with the run's own code (0: every guarantee held, 1: one failed).
    Retrieve(in_cluster::RetrieveArgs),
}

#[derive(Debug, clap::Args)]
struct TestArgs {
    #[command(flatten)]
    bins: cluster::BinArgs,
    /// The quick tier, without clusters: cargo fmt --check, clippy -D warnings, every unit test
    /// and the integration tests that start no cluster.
    #[arg(long, conflicts_with = "cargo_args")]
    quick: bool,
    /// Arguments passed on to `cargo test --workspace` (after `--`), which then runs as it is.
    #[arg(last = true)]
    cargo_args: Vec<String>,
}

/// Runs the command line as `program`.
pub fn main(program: Program) -> ExitCode {
    dracheck_adapter::program::set(program.name());
    let matches = command(program).get_matches();
    let cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    diagnostics(cli.verbose);
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("a tokio runtime");
    let code = runtime.block_on(async {
        match cli.command {
            Command::Cluster(cmd) => cluster::run(*cmd).await,
            Command::Conformance(args) => conformance::run(*args).await,
            Command::Bench(cmd) => bench::run(cmd).await,
            Command::Test(args) => test(args).await,
            Command::Fidelity(args) => fidelity::run(args).await,
            Command::Report(args) => report::report(args),
            Command::Matrix(args) => report::matrix(args),
            Command::Compare(args) => report::compare(args),
            Command::Explain(args) => explain::run(args).await,
            Command::Inventory(args) => inventory::run(args).await,
            Command::Cleanup(args) => cleanup::run(args).await,
            Command::Profile(cmd) => profiles::run(cmd),
            Command::List(args) => list::run(args),
            Command::Dist(args) => dist::run(args).await,
            Command::Rbac(args) => in_cluster::rbac(args),
            Command::Job(args) => in_cluster::job(*args),
            Command::Retrieve(args) => in_cluster::retrieve(args).await,
        }
    });
    ExitCode::from(code)
}

async fn test(args: TestArgs) -> u8 {
    if args.quick {
        return match checkout("test") {
            Ok(root) => test_plan::quick(&std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()), &root).await,
            Err(msg) => {
                eprintln!("dracheck: {msg}");
                exit::BAD_INPUT
            }
        };
    }
    // Where real nodes can run, the tests run them: what they need of the machine is checked
    // before the first build, not found missing after it.
    if dracheck_clusters::local::real::host::check_support().is_ok()
        && let Err(e) = dracheck_clusters::local::real::preflight::check()
    {
        eprintln!("dracheck: {e}");
        return exit::of(e.failure());
    }
    // The tests start real clusters; building the binaries here first keeps that long first
    // build visible instead of hidden in a test's captured output.
    if let Err(code) = cluster::ensure_binaries(&args.bins).await {
        return code;
    }
    // The tests run on emulated nodes unless they ask for real ones (the real-node tests
    // do): the fidelity table alone is some thirty conformance runs. The real node programs
    // are built here, in the open, like the control plane.
    if std::env::var_os("DRACHECK_NODE_KIND").is_none() {
        // SAFETY: single-threaded at this point of the command; the child inherits it.
        unsafe { std::env::set_var("DRACHECK_NODE_KIND", "emulated") };
    }
    if let Err(code) = cluster::ensure_real_node_programs(&args.bins).await {
        return code;
    }
    let root = match checkout("test") {
        Ok(root) => root,
        Err(msg) => {
            eprintln!("dracheck: {msg}");
            return exit::BAD_INPUT;
        }
    };
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    if args.cargo_args.is_empty() {
        return test_plan::run(&cargo, &root).await;
    }
    let status =
        cargo_command(&cargo).args(["test", "--workspace"]).args(&args.cargo_args).current_dir(&root).status().await;
    match status {
        Ok(s) if s.success() => exit::OK,
        Ok(s) => s.code().map_or(exit::FAILED, |c| c.clamp(1, 255) as u8),
        Err(e) => {
            eprintln!("dracheck: could not run `cargo test`: {e}");
            exit::FAILED
        }
    }
}

/// The workspace this program was built from, for the commands that work on a checkout
/// (`test`, `dist`): an installed or unpacked dracheck has none, and says so.
fn checkout(command: &str) -> Result<std::path::PathBuf, String> {
    // The one place the command line looks at its source tree at run time; the other commands
    // use what is embedded in the binary.
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("xtask sits in the workspace");
    if root.join("Cargo.toml").is_file() && root.join("xtask/Cargo.toml").is_file() {
        Ok(root.to_path_buf())
    } else {
        Err(format!(
            "`{} {command}` works on dracheck's source tree, and the one this program was built from ({}) is not \
             there; run it in a checkout: `cargo xtask {command}`",
            program(),
            root.display()
        ))
    }
}

/// `cargo` as the shell would start it: without the variables `cargo run` gave this process,
/// which would make cargo rebuild ring and all above it (see `dracheck_adapter::cargo_run_vars`).
pub(crate) fn cargo_command(cargo: &str) -> tokio::process::Command {
    let mut command = tokio::process::Command::new(cargo);
    for var in dracheck_adapter::cargo_run_vars() {
        command.env_remove(var);
    }
    command
}
