//! Container images written here, without Docker: a root filesystem as one layer, the image
//! config, and an archive of both that an image loader reads. One writer, [`image_archive`],
//! for two kinds of archive:
//!
//! - [`Format::Docker`]: a docker-archive (`manifest.json` naming the image in `RepoTags`, and
//!   the blobs), which `ctr images import` names from `RepoTags`. The real nodes' images
//!   (`local::real::images`) are these.
//! - [`Format::Oci`]: an OCI image layout (`oci-layout`, `index.json`, `blobs/sha256/…`) that
//!   carries docker's `manifest.json` too, as `docker save` writes it since Docker 25. Every
//!   loader names the image without being told: containerd (`ctr images import`, and Docker on
//!   the containerd store) prefers the layout and takes the name from the index's
//!   `io.containerd.image.name` annotation, a full reference that its default `import-<date>`
//!   prefix leaves alone (the prefix, or `--base-name`, only completes a bare tag such as
//!   `org.opencontainers.image.ref.name`); podman reads the same annotation; Docker's own store
//!   reads `manifest.json`. `cargo xtask dist --image` writes one.
//!
//! Same inputs, same bytes: entries sorted, mtimes 0, owner root, no creation time in the
//! config, so an image's digest changes only with what is in it.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read as _, Write as _};

use crate::error::{ClusterError, Result};

/// A `PATH` for images: the usual dirs, as Debian's root has it.
pub const PATH_ENV: &str = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// Media types of the OCI image spec.
pub const MEDIA_INDEX: &str = "application/vnd.oci.image.index.v1+json";
pub const MEDIA_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
pub const MEDIA_CONFIG: &str = "application/vnd.oci.image.config.v1+json";
pub const MEDIA_LAYER: &str = "application/vnd.oci.image.layer.v1.tar";
pub const MEDIA_LAYER_GZIP: &str = "application/vnd.oci.image.layer.v1.tar+gzip";

/// containerd's annotation of an index entry with the image's full name.
pub const ANNOTATION_IMAGE_NAME: &str = "io.containerd.image.name";
/// The OCI annotation of an index entry with the image's tag.
pub const ANNOTATION_REF_NAME: &str = "org.opencontainers.image.ref.name";

/// One entry of a tarball.
pub enum Node<'a> {
    Dir { mode: u32 },
    File { mode: u32, data: &'a [u8] },
    Symlink { target: &'a str },
}

/// A tarball of `entries` in path order, every entry owned by root with mtime 0, so that the
/// bytes depend on nothing but the entries. Parent dirs not among them are added, mode 0755.
pub fn tarball(mut entries: Vec<(String, Node<'_>)>) -> Result<Vec<u8>> {
    let listed: BTreeSet<&str> = entries.iter().map(|(path, _)| path.as_str()).collect();
    let mut parents = BTreeSet::new();
    for (path, _) in &entries {
        let mut at = path.as_str();
        while let Some((parent, _)) = at.rsplit_once('/') {
            if !listed.contains(parent) {
                parents.insert(parent.to_string());
            }
            at = parent;
        }
    }
    entries.extend(parents.into_iter().map(|dir| (dir, Node::Dir { mode: 0o755 })));
    entries.sort_by(|a, b| a.0.cmp(&b.0));
    let mut builder = tar::Builder::new(Vec::new());
    let failed = |path: &str| ClusterError::io(format!("packing {path} into an image archive"));
    for (path, node) in &entries {
        let mut header = tar::Header::new_ustar();
        header.set_uid(0);
        header.set_gid(0);
        header.set_mtime(0);
        match node {
            Node::Dir { mode } => {
                header.set_entry_type(tar::EntryType::Directory);
                header.set_mode(*mode);
                header.set_size(0);
                builder.append_data(&mut header, format!("{path}/"), std::io::empty()).map_err(failed(path))?;
            }
            Node::File { mode, data } => {
                header.set_entry_type(tar::EntryType::Regular);
                header.set_mode(*mode);
                header.set_size(data.len() as u64);
                builder.append_data(&mut header, path, *data).map_err(failed(path))?;
            }
            Node::Symlink { target } => {
                header.set_entry_type(tar::EntryType::Symlink);
                header.set_mode(0o777);
                header.set_size(0);
                builder.append_link(&mut header, path, target).map_err(failed(path))?;
            }
        }
    }
    builder.into_inner().map_err(failed("the end"))
}

/// A layer as an archive stores it.
pub struct Layer {
    /// The blob: the tarball, or the tarball compressed.
    pub blob: Vec<u8>,
    /// `sha256:<hex>` of the uncompressed tarball, the config's `rootfs.diff_ids`.
    pub diff_id: String,
    /// Its OCI media type, which says whether it is compressed.
    pub media_type: &'static str,
}

impl Layer {
    /// The tarball as it is: quick to write, and its own diff ID.
    pub fn uncompressed(tar: Vec<u8>) -> Layer {
        Layer { diff_id: format!("sha256:{}", sha256_hex(&tar)), blob: tar, media_type: MEDIA_LAYER }
    }

    /// The tarball gzipped (default level; the gzip header has no time or name, so the same
    /// tarball gives the same blob).
    pub fn gzip(tar: &[u8]) -> Result<Layer> {
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        let blob = gz.write_all(tar).and_then(|()| gz.finish()).map_err(ClusterError::io("gzipping an image layer"))?;
        Ok(Layer { blob, diff_id: format!("sha256:{}", sha256_hex(tar)), media_type: MEDIA_LAYER_GZIP })
    }
}

/// Which archive [`image_archive`] writes; see the module doc.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// docker-archive: `manifest.json` and the blobs.
    Docker,
    /// OCI image layout, with docker's `manifest.json` as well.
    Oci,
}

/// An archive of one image, `tag` (a full reference: `registry/name:tag`), of one layer and a
/// config holding `container_config` (`Entrypoint`, `Env`, …), for this machine's architecture.
/// Blobs are stored under their digests; both formats name the same config and layer blobs.
pub fn image_archive(format: Format, tag: &str, layer: &Layer, container_config: serde_json::Value) -> Result<Vec<u8>> {
    let config = serde_json::json!({
        "architecture": oci_architecture(),
        "os": "linux",
        "config": container_config,
        "rootfs": { "type": "layers", "diff_ids": [layer.diff_id] },
    });
    let config = serde_json::to_vec(&config).map_err(json_failed)?;
    let blob = |bytes: &[u8]| format!("blobs/sha256/{}", sha256_hex(bytes));
    let docker_manifest =
        serde_json::json!([{ "Config": blob(&config), "RepoTags": [tag], "Layers": [blob(&layer.blob)] }]).to_string();
    let mut entries = vec![
        ("blobs".to_string(), Node::Dir { mode: 0o755 }),
        ("blobs/sha256".to_string(), Node::Dir { mode: 0o755 }),
        (blob(&config), Node::File { mode: 0o644, data: &config }),
        (blob(&layer.blob), Node::File { mode: 0o644, data: &layer.blob }),
        ("manifest.json".to_string(), Node::File { mode: 0o644, data: docker_manifest.as_bytes() }),
    ];
    let (manifest, index);
    if format == Format::Oci {
        manifest = serde_json::to_vec(&serde_json::json!({
            "schemaVersion": 2,
            "mediaType": MEDIA_MANIFEST,
            "config": descriptor(MEDIA_CONFIG, &config),
            "layers": [descriptor(layer.media_type, &layer.blob)],
        }))
        .map_err(json_failed)?;
        let mut entry = descriptor(MEDIA_MANIFEST, &manifest);
        entry["platform"] = serde_json::json!({ "architecture": oci_architecture(), "os": "linux" });
        entry["annotations"] = serde_json::json!({ ANNOTATION_IMAGE_NAME: tag, ANNOTATION_REF_NAME: tag_of(tag) });
        index = serde_json::to_vec(&serde_json::json!({
            "schemaVersion": 2,
            "mediaType": MEDIA_INDEX,
            "manifests": [entry],
        }))
        .map_err(json_failed)?;
        entries.extend([
            (blob(&manifest), Node::File { mode: 0o644, data: &manifest }),
            ("index.json".to_string(), Node::File { mode: 0o644, data: &index }),
            ("oci-layout".to_string(), Node::File { mode: 0o644, data: br#"{"imageLayoutVersion":"1.0.0"}"# }),
        ]);
    }
    tarball(entries)
}

/// An OCI descriptor of `blob`.
fn descriptor(media_type: &str, blob: &[u8]) -> serde_json::Value {
    serde_json::json!({ "mediaType": media_type, "digest": format!("sha256:{}", sha256_hex(blob)), "size": blob.len() })
}

/// The tag of a reference (`0.1.0` of `dracheck.io/dracheck:0.1.0`), `latest` where it has none.
fn tag_of(reference: &str) -> &str {
    match reference.rsplit_once(':') {
        Some((_, tag)) if !tag.contains('/') => tag,
        _ => "latest",
    }
}

fn json_failed(e: serde_json::Error) -> ClusterError {
    ClusterError::Io { context: "writing an image config".into(), source: std::io::Error::other(e) }
}

/// The hex SHA-256 of `data`.
pub fn sha256_hex(data: &[u8]) -> String {
    ring::digest::digest(&ring::digest::SHA256, data).as_ref().iter().map(|b| format!("{b:02x}")).collect()
}

/// The architecture of this machine in OCI's words; the images hold its binaries.
pub fn oci_architecture() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        "powerpc64" => "ppc64le",
        other => other,
    }
}

/// How an ELF executable starts, which says what an image of it must hold besides it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Linking {
    /// No program interpreter: it needs nothing else.
    Static,
    /// The dynamic loader it names (`PT_INTERP`), which loads its shared libraries.
    Dynamic { interpreter: String },
}

/// How `bin`, a 64-bit little-endian ELF file, is linked; `None` for anything else.
pub fn elf_linking(bin: &[u8]) -> Option<Linking> {
    const PT_INTERP: u64 = 3;
    let at = |offset: u64, len: usize| -> Option<u64> {
        let offset = usize::try_from(offset).ok()?;
        let bytes = bin.get(offset..offset.checked_add(len)?)?;
        Some(bytes.iter().rev().fold(0u64, |acc, b| (acc << 8) | u64::from(*b)))
    };
    if bin.get(..6) != Some(b"\x7fELF\x02\x01".as_slice()) {
        return None;
    }
    let (phoff, phentsize, phnum) = (at(0x20, 8)?, at(0x36, 2)?, at(0x38, 2)?);
    let mut linking = Linking::Static;
    for i in 0..phnum {
        let header = phoff.checked_add(i * phentsize)?;
        if at(header, 4)? == PT_INTERP {
            // p_offset and p_filesz: where the loader's path lies, NUL-terminated.
            let (offset, size) = (at(header.saturating_add(8), 8)?, at(header.saturating_add(32), 8)?);
            let path = usize::try_from(offset)
                .ok()
                .zip(usize::try_from(size).ok())
                .and_then(|(offset, size)| bin.get(offset..offset.checked_add(size)?))
                .unwrap_or_default();
            let path = path.split(|b| *b == 0).next().unwrap_or_default();
            linking = Linking::Dynamic { interpreter: String::from_utf8_lossy(path).into_owned() };
        }
    }
    Some(linking)
}

/// Whether `bin` is a 64-bit little-endian ELF file without a program interpreter, that is,
/// one that runs without a dynamic loader and C library.
pub fn is_static_elf(bin: &[u8]) -> bool {
    elf_linking(bin) == Some(Linking::Static)
}

/// One entry of a tarball as read back.
#[derive(Debug, Clone)]
pub struct Item {
    /// As stored: dirs end in `/`.
    pub path: String,
    pub kind: tar::EntryType,
    pub mode: u32,
    pub mtime: u64,
    pub uid: u64,
    pub gid: u64,
    pub link: Option<String>,
    pub data: Vec<u8>,
}

/// The entries of a tarball, in archive order.
pub fn items(tarball: &[u8]) -> std::io::Result<Vec<Item>> {
    let mut archive = tar::Archive::new(tarball);
    let mut items = Vec::new();
    for entry in archive.entries()? {
        let mut entry = entry?;
        let header = entry.header().clone();
        let mut data = Vec::new();
        entry.read_to_end(&mut data)?;
        items.push(Item {
            path: entry.path()?.to_string_lossy().into_owned(),
            kind: header.entry_type(),
            mode: header.mode()?,
            mtime: header.mtime()?,
            uid: header.uid()?,
            gid: header.gid()?,
            link: entry.link_name()?.map(|l| l.to_string_lossy().into_owned()),
            data,
        });
    }
    Ok(items)
}

/// An image archive read back by [`open`].
#[derive(Debug)]
pub struct OpenedImage {
    /// The name `manifest.json` gives it.
    pub tag: String,
    /// `index.json` and the manifest it points at, where the archive is an OCI layout.
    pub oci: Option<(serde_json::Value, serde_json::Value)>,
    pub config: serde_json::Value,
    /// The layer's tarball, uncompressed.
    pub layer: Vec<u8>,
    /// The archive's own entries.
    pub entries: Vec<Item>,
}

/// Reads an archive written by [`image_archive`] back as the loaders do (the OCI layout where
/// there is one, `manifest.json` always) and checks it: each blob stored under its digest,
/// descriptors' sizes and media types true, both formats naming the same config and layer, the
/// layer's diff ID that of its uncompressed tarball. For the checks and tests of the archives.
pub fn open(archive: &[u8]) -> std::result::Result<OpenedImage, String> {
    let entries = items(archive).map_err(|e| format!("not a tarball: {e}"))?;
    let files: BTreeMap<&str, &[u8]> = entries
        .iter()
        .filter(|e| e.kind == tar::EntryType::Regular)
        .map(|e| (e.path.as_str(), e.data.as_slice()))
        .collect();
    let json = |path: &str| -> std::result::Result<serde_json::Value, String> {
        let bytes = files.get(path).ok_or_else(|| format!("no {path}"))?;
        serde_json::from_slice(bytes).map_err(|e| format!("{path}: {e}"))
    };
    let blob = |path: &str| -> std::result::Result<&[u8], String> {
        let bytes = *files.get(path).ok_or_else(|| format!("no blob {path}"))?;
        let hex = sha256_hex(bytes);
        if path != format!("blobs/sha256/{hex}") {
            return Err(format!("{path} holds a blob of digest sha256:{hex}"));
        }
        Ok(bytes)
    };
    let docker = json("manifest.json")?;
    let [image] = docker.as_array().map(Vec::as_slice).unwrap_or_default() else {
        return Err(format!("manifest.json names other than one image: {docker}"));
    };
    let (Some(tag), Some(config_path), Some(layer_path)) =
        (image["RepoTags"][0].as_str(), image["Config"].as_str(), image["Layers"][0].as_str())
    else {
        return Err(format!("manifest.json lacks RepoTags, Config or Layers: {docker}"));
    };
    let config_blob = blob(config_path)?;
    let config: serde_json::Value = serde_json::from_slice(config_blob).map_err(|e| format!("the config: {e}"))?;
    let layer_blob = blob(layer_path)?;
    let gzipped = layer_blob.starts_with(&[0x1f, 0x8b]);
    let layer = if gzipped {
        let mut tar = Vec::new();
        flate2::read::GzDecoder::new(layer_blob).read_to_end(&mut tar).map_err(|e| format!("the layer: {e}"))?;
        tar
    } else {
        layer_blob.to_vec()
    };
    let diff_id = format!("sha256:{}", sha256_hex(&layer));
    if config["rootfs"]["diff_ids"] != serde_json::json!([diff_id]) {
        return Err(format!("the config's diff_ids are not [{diff_id}]: {}", config["rootfs"]));
    }

    let oci = match files.get("oci-layout") {
        None => None,
        Some(layout) => {
            let layout: serde_json::Value = serde_json::from_slice(layout).map_err(|e| format!("oci-layout: {e}"))?;
            if layout["imageLayoutVersion"] != "1.0.0" {
                return Err(format!("oci-layout: {layout}"));
            }
            // A descriptor's blob, checked against its size and media type.
            let described = |d: &serde_json::Value, media_type: &str| -> std::result::Result<&[u8], String> {
                let digest = d["digest"].as_str().unwrap_or_default();
                let bytes = blob(&format!("blobs/{}", digest.replacen(':', "/", 1)))?;
                if d["size"] != bytes.len() || d["mediaType"] != media_type {
                    return Err(format!("{d} describes a {media_type} of {} bytes", bytes.len()));
                }
                Ok(bytes)
            };
            let index = json("index.json")?;
            if index["schemaVersion"] != 2 || index["mediaType"] != MEDIA_INDEX {
                return Err(format!("index.json is not an OCI index: {index}"));
            }
            let [entry] = index["manifests"].as_array().map(Vec::as_slice).unwrap_or_default() else {
                return Err(format!("index.json names other than one manifest: {index}"));
            };
            let manifest: serde_json::Value =
                serde_json::from_slice(described(entry, MEDIA_MANIFEST)?).map_err(|e| format!("the manifest: {e}"))?;
            if manifest["schemaVersion"] != 2 || manifest["mediaType"] != MEDIA_MANIFEST {
                return Err(format!("not an OCI manifest: {manifest}"));
            }
            if described(&manifest["config"], MEDIA_CONFIG)? != config_blob {
                return Err("the OCI manifest and manifest.json name different configs".into());
            }
            let media_type = if gzipped { MEDIA_LAYER_GZIP } else { MEDIA_LAYER };
            let [layer] = manifest["layers"].as_array().map(Vec::as_slice).unwrap_or_default() else {
                return Err(format!("the manifest has other than one layer: {manifest}"));
            };
            if described(layer, media_type)? != layer_blob {
                return Err("the OCI manifest and manifest.json name different layers".into());
            }
            Some((index, manifest))
        }
    };
    let tag = tag.to_string();
    Ok(OpenedImage { tag, oci, config, layer, entries })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    fn config() -> serde_json::Value {
        serde_json::json!({ "Env": [PATH_ENV], "Entrypoint": ["/usr/bin/hello"] })
    }

    fn layer() -> Vec<u8> {
        tarball(vec![
            ("usr/bin/hello".to_string(), Node::File { mode: 0o755, data: b"hello" }),
            ("tmp".to_string(), Node::Dir { mode: 0o1777 }),
            ("bin".to_string(), Node::Symlink { target: "usr/bin" }),
        ])
        .unwrap()
    }

    #[test]
    fn tarballs_are_sorted_owned_by_root_at_time_zero_with_every_parent() {
        let entries = items(&layer()).unwrap();
        let listed: Vec<(&str, u32)> = entries.iter().map(|e| (e.path.as_str(), e.mode)).collect();
        assert_eq!(
            listed,
            [("bin", 0o777), ("tmp/", 0o1777), ("usr/", 0o755), ("usr/bin/", 0o755), ("usr/bin/hello", 0o755)]
        );
        for e in &entries {
            assert_eq!((e.mtime, e.uid, e.gid), (0, 0, 0), "{}", e.path);
        }
        assert_eq!(layer(), layer());
    }

    #[test]
    fn an_oci_archive_names_the_image_for_containerd_and_docker_and_points_both_at_the_same_blobs() {
        let tag = "dracheck.io/hello:1.2.3";
        for layer in [Layer::uncompressed(layer()), Layer::gzip(&layer()).unwrap()] {
            let archive = image_archive(Format::Oci, tag, &layer, config()).unwrap();
            assert_eq!(archive, image_archive(Format::Oci, tag, &layer, config()).unwrap(), "the same bytes");
            let image = open(&archive).unwrap();
            assert_eq!(image.tag, tag);
            assert_eq!(image.layer, self::layer(), "the layer, uncompressed");
            let (index, manifest) = image.oci.expect("an OCI layout");
            let entry = &index["manifests"][0];
            assert_eq!(entry["annotations"][ANNOTATION_IMAGE_NAME], tag);
            assert_eq!(entry["annotations"][ANNOTATION_REF_NAME], "1.2.3");
            assert_eq!(entry["platform"], serde_json::json!({ "architecture": oci_architecture(), "os": "linux" }));
            assert_eq!(manifest["layers"][0]["mediaType"], layer.media_type);
            assert_eq!(manifest["config"]["mediaType"], MEDIA_CONFIG);
            assert_eq!(image.config["config"], config());
            assert_eq!(
                (&image.config["architecture"], &image.config["os"]),
                (&oci_architecture().into(), &"linux".into())
            );
            let paths: Vec<&str> = image.entries.iter().map(|e| e.path.as_str()).collect();
            assert_eq!(paths.len(), 8, "{paths:?}");
            assert_eq!(&paths[..2], ["blobs/", "blobs/sha256/"]);
            assert_eq!(&paths[5..], ["index.json", "manifest.json", "oci-layout"]);
            for e in &image.entries {
                assert_eq!((e.mtime, e.uid, e.gid), (0, 0, 0), "{}", e.path);
            }
        }
        assert_eq!(Layer::uncompressed(layer()).media_type, MEDIA_LAYER);
        assert_eq!(Layer::gzip(&layer()).unwrap().media_type, MEDIA_LAYER_GZIP);
        assert_eq!(Layer::gzip(&layer()).unwrap().diff_id, Layer::uncompressed(layer()).diff_id);
    }

    #[test]
    fn a_docker_archive_has_no_layout_and_open_finds_what_is_wrong() {
        let layer = Layer::uncompressed(layer());
        let archive = image_archive(Format::Docker, "dracheck.io/hello:1", &layer, config()).unwrap();
        let image = open(&archive).unwrap();
        assert!(image.oci.is_none());
        let paths: Vec<&str> = image.entries.iter().map(|e| e.path.as_str()).collect();
        assert_eq!(paths.len(), 5, "{paths:?}");

        // Another blob under the layer's name.
        let mut entries = items(&image_archive(Format::Oci, "x.io/y:1", &layer, config()).unwrap()).unwrap();
        let path = format!("blobs/sha256/{}", sha256_hex(&layer.blob));
        entries.iter_mut().find(|e| e.path == path).unwrap().data = b"other".to_vec();
        let nodes = entries
            .iter()
            .filter(|e| e.kind == tar::EntryType::Regular)
            .map(|e| (e.path.clone(), Node::File { mode: 0o644, data: &e.data }))
            .collect();
        let msg = open(&tarball(nodes).unwrap()).unwrap_err();
        assert!(msg.contains(&path), "{msg}");
        assert!(open(b"not a tarball").is_err());
    }

    #[test]
    fn references_are_told_their_tag() {
        assert_eq!(tag_of("dracheck.io/dracheck:0.1.0"), "0.1.0");
        assert_eq!(tag_of("localhost:5000/x"), "latest");
        assert_eq!(tag_of("x"), "latest");
    }

    /// A minimal ELF64 header with program headers of these types; a `PT_INTERP` names
    /// `/lib/ld.so`.
    pub(crate) fn elf(p_types: &[u32]) -> Vec<u8> {
        let mut bin = vec![0u8; 64];
        bin[..6].copy_from_slice(b"\x7fELF\x02\x01");
        bin[0x20..0x28].copy_from_slice(&64u64.to_le_bytes());
        bin[0x36..0x38].copy_from_slice(&56u16.to_le_bytes());
        bin[0x38..0x3a].copy_from_slice(&(p_types.len() as u16).to_le_bytes());
        let interp_at = 64 + 56 * p_types.len() as u64;
        for t in p_types {
            let mut ph = vec![0u8; 56];
            ph[..4].copy_from_slice(&t.to_le_bytes());
            ph[8..16].copy_from_slice(&interp_at.to_le_bytes());
            ph[32..40].copy_from_slice(&11u64.to_le_bytes());
            bin.extend(ph);
        }
        bin.extend(b"/lib/ld.so\0");
        bin
    }

    #[test]
    fn static_executables_are_told_from_dynamic_ones_and_the_loader_is_named() {
        assert!(is_static_elf(&elf(&[1, 1, 4])));
        assert!(!is_static_elf(&elf(&[1, 3])));
        assert_eq!(elf_linking(&elf(&[1, 3])), Some(Linking::Dynamic { interpreter: "/lib/ld.so".into() }));
        assert!(!is_static_elf(b"#!/bin/sh\n"));
        assert_eq!(elf_linking(b"#!/bin/sh\n"), None);
        let mut truncated = elf(&[1, 1]);
        truncated.truncate(100);
        assert!(!is_static_elf(&truncated));
        if let Ok(me) = std::env::current_exe().and_then(std::fs::read) {
            let Some(Linking::Dynamic { interpreter }) = elf_linking(&me) else { return };
            assert!(interpreter.starts_with('/') && interpreter.contains("ld"), "{interpreter}");
        }
    }
}
