//! The mock DRA driver: a kubelet plugin that serves registration and DRAPlugin (v1 and
//! v1beta1) over Unix sockets, publishes its node's ResourceSlices from an inventory file,
//! writes CDI specs and keeps a checkpoint, with fault switches that each break one
//! guarantee. The library is the binary's body, exposed for tests and for the suite's
//! inventory oracle ([`inventory`], [`slices::published_devices`]).

pub mod adapter;
pub mod binding;
pub mod cdi;
pub mod checkpoint;
pub mod cli;
pub mod config;
pub mod error;
pub mod faults;
mod fsutil;
pub mod health;
pub mod installation;
pub mod inventory;
pub mod log;
pub mod plugin;
pub mod registration;
mod reload;
mod reset;
pub mod slices;
pub mod status;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use dracheck_kubelet_api::registration::registration_server::RegistrationServer;
use dracheck_kubelet_api::{UnixSocket, dra_v1, dra_v1beta1};
use k8s_openapi::api::resource::v1::ResourceSlice;
use kube::api::{Api, ListParams};
use kube::config::{Config, KubeConfigOptions, Kubeconfig};
use tokio::signal::unix::{SignalKind, signal};
use tokio::sync::watch;
use tonic::transport::Server;

use crate::checkpoint::CheckpointFile;
use crate::cli::Args;
use crate::error::DriverError;
use crate::faults::{Fault, Faults};
use crate::inventory::Inventory;
use crate::plugin::{Context, Plugin, V1, V1beta1};
use crate::registration::Registrar;
use crate::slices::Publisher;

const API_PROBE_TIMEOUT: Duration = Duration::from_secs(10);

/// Runs the plugin until SIGTERM or SIGINT. Everything that can be wrong with the input is
/// checked before the first socket appears, so a failed start leaves nothing behind.
pub async fn run(args: Args) -> Result<(), DriverError> {
    // Installed first: from here on a signal means a clean shutdown, not sudden death.
    let mut terminate = signal(SignalKind::terminate()).expect("installing a SIGTERM handler");
    let mut interrupt = signal(SignalKind::interrupt()).expect("installing a SIGINT handler");

    crate::cdi::configure(&args.driver_name, &args.env_prefix);
    let inventory = Inventory::load(&args.inventory)?;
    let pool = inventory.pool_for(&args.node_name)?;
    let faults: Arc<Faults> = Arc::new(args.faults.iter().chain(inventory.faults()).cloned().collect());
    log!(
        "starting: driver {}, node {}, {} device(s) from {}{}",
        args.driver_name,
        args.node_name,
        pool.devices.len(),
        args.inventory.display(),
        if faults.is_empty() { String::new() } else { format!(", faults: {faults}") }
    );
    if faults.has(&Fault::ResetDevicesOnStart) {
        // First thing, as a driver that resets its devices while it initialises.
        let prepared = CheckpointFile::new(&args.state_dir()).load()?;
        let killed = reset::kill_users(&prepared);
        log!(
            "fault reset-devices-on-start: reset {} prepared claim(s), {killed} user(s) killed",
            prepared.claims.len()
        );
    }
    let client = connect(args.kubeconfig.as_deref()).await?;

    let state_dir = args.state_dir();
    for (what, flag, dir) in [("state", "state-dir", &state_dir), ("CDI", "cdi-dir", &args.cdi_dir)] {
        std::fs::create_dir_all(dir).map_err(|source| DriverError::Dir { what, flag, path: dir.clone(), source })?;
    }
    let checkpoint_file = CheckpointFile::new(&state_dir);
    let new_instance = args.instance.is_some();
    let forget = if faults.has(&Fault::LoseCheckpoint) {
        Some("lose-checkpoint")
    } else if new_instance && faults.has(&Fault::UpgradeForgetsClaims) {
        Some("upgrade-forgets-claims")
    } else {
        None
    };
    if let Some(fault) = forget {
        checkpoint_file.delete().map_err(|e| DriverError::Checkpoint {
            path: checkpoint_file.path().to_path_buf(),
            detail: e.to_string(),
        })?;
        log!("fault {fault}: deleted {}", checkpoint_file.path().display());
    }
    if new_instance && faults.has(&Fault::UpgradeRemovesSockets) {
        remove_other_sockets(&args);
    }
    let checkpoint = checkpoint_file.load()?;
    // Decided before anything is written, so that the marker says whether an earlier run was here.
    let restarted = !first_start(&state_dir)?;
    let skip_registration = faults.has(&Fault::RegisterFirstStartOnly) && restarted;

    // The service socket first: kubelet dials the endpoint as soon as registration appears.
    let dra_socket = UnixSocket::bind(args.dra_socket()).map_err(|source| DriverError::Socket {
        what: "DRA service",
        flag: "plugin-dir",
        source,
    })?;
    let reg_socket = if skip_registration {
        None
    } else {
        Some(UnixSocket::bind(args.registration_socket()).map_err(|source| DriverError::Socket {
            what: "registration",
            flag: "registrar-dir",
            source,
        })?)
    };

    let health_file = state_dir.join(health::HEALTH_FILE);
    let pool = health::apply(pool, &health::read(&health_file));
    let (devices_tx, devices_rx) = watch::channel(Arc::new(pool));
    let (stop_tx, stop_rx) = watch::channel(false);
    let stopped = |mut rx: watch::Receiver<bool>| async move {
        let _ = rx.wait_for(|s| *s).await;
    };
    let plugin = Plugin::new(
        Context {
            driver: args.driver_name.clone(),
            node: args.node_name.clone(),
            cdi_dir: args.cdi_dir.clone(),
            checkpoint: checkpoint_file,
            client: client.clone(),
            devices: devices_rx.clone(),
            faults: faults.clone(),
        },
        checkpoint,
    );
    let serve_health = !faults.has(&Fault::NoHealth);
    let health = serve_health.then(|| health::Health {
        node: args.node_name.clone(),
        devices: devices_rx.clone(),
        faults: faults.clone(),
    });
    let dra_router = Server::builder()
        .add_service(dra_v1::dra_plugin_server::DraPluginServer::from_arc(Arc::new(V1(plugin.clone()))))
        .add_service(dra_v1beta1::dra_plugin_server::DraPluginServer::from_arc(Arc::new(V1beta1(plugin))))
        .add_optional_service(health.clone().map(health::Health::v1))
        .add_optional_service(health.map(health::Health::v1alpha1));
    let reg_router = Server::builder().add_service(RegistrationServer::new(Registrar {
        driver: args.driver_name.clone(),
        endpoint: args.dra_socket().display().to_string(),
        v1beta1_only: faults.has(&Fault::RegisterV1beta1Only),
        health: serve_health,
        exit_on_refusal: faults.has(&Fault::ExitOnRefusedRegistration),
    }));
    let dra_path = dra_socket.path().display().to_string();
    let mut dra = tokio::spawn(dra_socket.serve(dra_router, stopped(stop_rx.clone())));
    let mut reg = match reg_socket {
        Some(reg_socket) if faults.has(&Fault::StrictAuthority) => {
            log!(
                "serving {dra_path} and {}; fault strict-authority: registration refuses the kubelet's :authority",
                reg_socket.path().display()
            );
            tokio::spawn(reg_socket.serve_strict_authority(reg_router, stopped(stop_rx.clone())))
        }
        Some(reg_socket) => {
            log!("serving {dra_path} and {}", reg_socket.path().display());
            tokio::spawn(reg_socket.serve(reg_router, stopped(stop_rx.clone())))
        }
        None => {
            log!("serving {dra_path}; fault register-first-start-only: this is a restart, so no registration socket");
            let stop = stopped(stop_rx.clone());
            tokio::spawn(async move {
                stop.await;
                Ok(())
            })
        }
    };
    let follow = tokio::spawn(reload::follow(
        args.inventory.clone(),
        health_file,
        args.node_name.clone(),
        devices_tx,
        stop_rx.clone(),
    ));
    let mut publisher = Publisher::new(
        client.clone(),
        args.driver_name.clone(),
        args.node_name.clone(),
        faults.clone(),
        devices_rx.clone(),
    );
    if let Some(id) = args.instance.as_deref().filter(|_| faults.has(&Fault::UpgradeRenamesDevices)) {
        log!("fault upgrade-renames-devices: publishing every device as <name>-{id}");
        publisher.rename_devices(id);
    }
    if faults.has(&Fault::TrustPublished) && restarted {
        log!("fault trust-published: a restart; the slices published before are taken to be in place");
        publisher.trust_published();
    }
    let binder = binding::Binder {
        client: client.clone(),
        driver: args.driver_name.clone(),
        node: args.node_name.clone(),
        faults: faults.clone(),
        devices: devices_rx.clone(),
    };
    let binder = tokio::spawn(binder.run(stop_rx.clone()));
    let publisher = tokio::spawn(publisher.run(stop_rx));

    let failure = tokio::select! {
        _ = terminate.recv() => { log!("SIGTERM: shutting down"); None }
        _ = interrupt.recv() => { log!("SIGINT: shutting down"); None }
        done = &mut dra => Some(done),
        done = &mut reg => Some(done),
    };
    let _ = stop_tx.send(true);
    let mut result = Ok(());
    for done in failure.into_iter().chain([dra.await, reg.await]) {
        if let Ok(Err(e)) = done {
            result = Err(DriverError::Serve(e));
        }
    }
    let _ = follow.await;
    let _ = binder.await;
    if let Ok(publisher) = publisher.await
        && args.remove_slices_on_exit
    {
        if faults.has(&Fault::StaleSlicesOnExit) {
            log!("fault stale-slices-on-exit: keeping the slices despite --remove-slices-on-exit");
        } else {
            publisher.remove_all().await;
        }
    }
    log!("stopped");
    result
}

/// The `upgrade-removes-sockets` fault: every socket of this driver but this instance's own,
/// in the plugin dir and the registry, is taken for a leftover and deleted.
fn remove_other_sockets(args: &Args) {
    use std::os::unix::fs::FileTypeExt as _;
    let own = [args.dra_socket(), args.registration_socket()];
    let prefix = format!("{}-", args.driver_name);
    let ours = |dir: &Path, name: &str| dir == args.plugin_dir() || name.starts_with(&prefix);
    for dir in [args.plugin_dir(), args.registrar_dir.clone()] {
        let Ok(entries) = std::fs::read_dir(&dir) else { continue };
        for entry in entries.flatten() {
            let (path, name) = (entry.path(), entry.file_name().to_string_lossy().into_owned());
            let socket = entry.file_type().is_ok_and(|t| t.is_socket());
            if socket && ours(&dir, &name) && !own.contains(&path) && std::fs::remove_file(&path).is_ok() {
                log!("fault upgrade-removes-sockets: deleted {}", path.display());
            }
        }
    }
}

/// Whether this is the first start on `state_dir`, by a marker the first start leaves there
/// (the `register-first-start-only` fault).
fn first_start(state_dir: &Path) -> Result<bool, DriverError> {
    let marker = state_dir.join("dracheck-mock-started");
    if marker.exists() {
        return Ok(false);
    }
    std::fs::write(&marker, b"").map_err(|source| DriverError::Dir {
        what: "state",
        flag: "state-dir",
        path: state_dir.to_path_buf(),
        source,
    })?;
    Ok(true)
}

/// A client for the cluster, proven to reach an apiserver that serves ResourceSlices.
async fn connect(kubeconfig: Option<&Path>) -> Result<kube::Client, DriverError> {
    let bad = |detail: String| DriverError::Kubeconfig { detail };
    let config = match kubeconfig {
        Some(path) => {
            let kc = Kubeconfig::read_from(path).map_err(|e| bad(format!("reading {}: {e}", path.display())))?;
            Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
                .await
                .map_err(|e| bad(format!("{}: {e}", path.display())))?
        }
        None => Config::infer().await.map_err(|e| bad(e.to_string()))?,
    };
    let server = config.cluster_url.to_string();
    let client = kube::Client::try_from(config).map_err(|e| bad(e.to_string()))?;
    let slices = Api::<ResourceSlice>::all(client.clone());
    let params = ListParams::default().limit(1);
    match tokio::time::timeout(API_PROBE_TIMEOUT, slices.list_metadata(&params)).await {
        Ok(Ok(_)) => Ok(client),
        Ok(Err(kube::Error::Api(s))) if s.code == 404 => {
            Err(DriverError::NoDraApi { server, detail: s.message.clone() })
        }
        Ok(Err(kube::Error::Api(s))) if s.code == 401 || s.code == 403 => {
            Err(bad(format!("the apiserver at {server} refused the credentials: {}", s.message)))
        }
        Ok(Err(e)) => Err(DriverError::Unreachable { server, detail: error_chain(&e) }),
        Err(_) => Err(DriverError::Unreachable {
            server,
            detail: format!("no answer within {} s", API_PROBE_TIMEOUT.as_secs()),
        }),
    }
}

/// kube's errors hide the cause (connection refused, DNS) in their sources.
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let s_text = s.to_string();
        if !text.contains(&s_text) {
            text = format!("{text}: {s_text}");
        }
        source = s.source();
    }
    text
}
