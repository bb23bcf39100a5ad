//! `nvidia-smi -L` output: which GPUs (and MIG devices) a container sees.

/// The UUIDs in `nvidia-smi -L` output, in order: `GPU 0: NVIDIA A100-SXM4-40GB (UUID:
/// GPU-…)` lines and the indented `MIG 1g.5gb Device 0: (UUID: MIG-…)` lines.
pub fn uuids(output: &str) -> Vec<String> {
    output
        .lines()
        .filter_map(|l| {
            let l = l.trim();
            if !(l.starts_with("GPU ") || l.starts_with("MIG ")) {
                return None;
            }
            let rest = &l[l.rfind("(UUID: ")? + "(UUID: ".len()..];
            Some(rest.strip_suffix(')')?.trim().to_string())
        })
        .collect()
}

/// Whether the container saw exactly the allocated `want` UUIDs: no fewer (allocation not
/// delivered) and no more (isolation broken); the suite's one comparison of seen and allocated.
pub fn sees_exactly(output: &str, want: &[String]) -> Result<(), dracheck_adapter::SeenOther> {
    dracheck_adapter::sees_exactly(uuids(output), want)
}
