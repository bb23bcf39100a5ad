//! `dracheck …`: the command line installed (`cargo install --path xtask --bin dracheck`) or
//! unpacked from the release archive that `cargo xtask dist` builds.

fn main() -> std::process::ExitCode {
    xtask::main(xtask::Program::Dracheck)
}
