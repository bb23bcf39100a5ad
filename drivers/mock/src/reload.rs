//! Follows the inventory file and the node's health file (see `health`), so that editing either
//! re-publishes the slices (with a new pool generation) and re-reports health without a
//! restart. A broken edit of the inventory is logged and ignored: the driver keeps publishing
//! the last good inventory rather than dropping its devices.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use crate::inventory::{Inventory, Pool};
use crate::{health, log};

/// Polling, not inotify: it also sees files replaced through symlinks (ConfigMap mounts).
const POLL: Duration = Duration::from_secs(1);

pub async fn follow(
    path: PathBuf,
    health_file: PathBuf,
    node: String,
    devices: watch::Sender<Arc<Pool>>,
    mut stop: watch::Receiver<bool>,
) {
    let mut last = std::fs::read(&path).ok();
    let mut last_health = health::read(&health_file);
    let mut tick = tokio::time::interval(POLL);
    loop {
        tokio::select! {
            _ = stop.wait_for(|s| *s) => return,
            _ = tick.tick() => {}
        }
        let Ok(bytes) = std::fs::read(&path) else { continue };
        let unhealthy = health::read(&health_file);
        if last.as_ref() == Some(&bytes) && last_health == unhealthy {
            continue;
        }
        let parsed =
            Inventory::parse(&path, &String::from_utf8_lossy(&bytes)).and_then(|inventory| inventory.pool_for(&node));
        last = Some(bytes);
        match parsed {
            Ok(now) => {
                if last_health != unhealthy {
                    log!("health file {}: unhealthy: {:?}", health_file.display(), unhealthy);
                } else {
                    log!("inventory {} changed: {} device(s) for node {node}", path.display(), now.devices.len());
                }
                last_health = unhealthy;
                devices.send_replace(Arc::new(health::apply(now, &last_health)));
            }
            Err(e) => log!("error: the changed inventory is not used, the previous one stays: {e}"),
        }
    }
}
