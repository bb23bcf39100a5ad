//! `cargo xtask …`: dracheck's command line as the in-repo alias (`.cargo/config.toml`).

fn main() -> std::process::ExitCode {
    xtask::main(xtask::Program::CargoXtask)
}
