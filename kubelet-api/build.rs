//! Generates the kubelet plugin API from the protos in `proto/` with protox, a pure-Rust
//! protobuf compiler, so that building needs no system `protoc`.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let files = [
        "proto/dra/v1/api.proto",
        "proto/dra/v1beta1/api.proto",
        "proto/pluginregistration/v1/api.proto",
        "proto/dra-health/v1/api.proto",
        "proto/dra-health/v1alpha1/api.proto",
    ];
    println!("cargo:rerun-if-changed=proto");
    let fds = protox::compile(files, ["proto"])?;
    tonic_prost_build::configure().build_server(true).build_client(true).compile_fds(fds)?;
    Ok(())
}
