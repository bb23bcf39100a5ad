//! The kubelet's side of the plugin API, as `pkg/kubelet/cm/dra` and the plugin manager do it,
//! for everything in dracheck that plays kubelet against a driver (the emulated node, the
//! plugin-tier harness, the mock's tests): registration dialled exactly as the plugin watcher
//! dials it, `v1.DRAPlugin` preferred over `v1beta1.DRAPlugin`, calls with a timeout, and each
//! claim's answer as a type — prepared, refused by the driver, or missing from the response —
//! so that callers decide on that, never on message text.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use tonic::transport::Channel;

use crate::dra_v1::dra_plugin_client::DraPluginClient as V1Client;
use crate::dra_v1beta1::dra_plugin_client::DraPluginClient as V1beta1Client;
use crate::registration::registration_client::RegistrationClient;
use crate::registration::{InfoRequest, PluginInfo, RegistrationStatus};
use crate::{DRA_PLUGIN_TYPE, DRA_V1_SERVICE, DRA_V1BETA1_SERVICE, SocketError, dra_v1, dra_v1beta1, rewire};
use crate::{connect_unix, connect_unix_as_plugin_watcher};

/// How long the kubelet's plugin watcher waits for `GetInfo`.
pub const GET_INFO_TIMEOUT: Duration = Duration::from_secs(10);
/// The kubelet's timeout for `NodePrepareResources` and `NodeUnprepareResources`.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(45);

/// The DRA service a registered plugin is called through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Service {
    V1,
    V1beta1,
}

/// Why a plugin did not get registered. `Refused` is what the kubelet itself refuses (and
/// tells the plugin through `NotifyRegistrationStatus`); the others are failed calls.
#[derive(Debug, thiserror::Error)]
pub enum RegisterError {
    #[error("cannot dial the registration socket: {0}")]
    Dial(#[source] SocketError),
    #[error("GetInfo timed out after {0:?}")]
    InfoTimeout(Duration),
    #[error("GetInfo failed: {0}")]
    Info(#[source] tonic::Status),
    #[error("{0}")]
    Refused(String),
    #[error("cannot connect to the plugin endpoint {endpoint}: {source}")]
    Endpoint {
        endpoint: PathBuf,
        #[source]
        source: SocketError,
    },
    #[error("NotifyRegistrationStatus failed: {0}")]
    Notify(#[source] tonic::Status),
}

/// A registered plugin: what it said of itself, and the client of its DRA service.
pub struct Registered {
    pub info: PluginInfo,
    pub client: DraClient,
}

/// Registers the plugin behind the registration socket `socket` as the kubelet does: the
/// socket dialled with the `:authority` the plugin watcher sends, `GetInfo` (at most
/// [`GET_INFO_TIMEOUT`]), the type and services checked, the endpoint dialled as `unix:`,
/// and the verdict sent back with `NotifyRegistrationStatus`.
pub async fn register(socket: &Path, call_timeout: Duration) -> Result<Registered, RegisterError> {
    let channel = connect_unix_as_plugin_watcher(socket).await.map_err(RegisterError::Dial)?;
    let mut registration = RegistrationClient::new(channel);
    let info = tokio::time::timeout(GET_INFO_TIMEOUT, registration.get_info(InfoRequest {}))
        .await
        .map_err(|_| RegisterError::InfoTimeout(GET_INFO_TIMEOUT))?
        .map_err(RegisterError::Info)?
        .into_inner();
    let notify = |registered: bool, error: String| RegistrationStatus { plugin_registered: registered, error };
    let service = match choose(&info.r#type, &info.supported_versions) {
        Ok(s) => s,
        Err(why) => {
            let _ = registration.notify_registration_status(notify(false, why.clone())).await;
            return Err(RegisterError::Refused(why));
        }
    };
    let endpoint = PathBuf::from(&info.endpoint);
    let dra = match connect_unix(&endpoint).await {
        Ok(c) => c,
        Err(source) => {
            let why = format!("cannot connect to the plugin endpoint {}: {source}", endpoint.display());
            let _ = registration.notify_registration_status(notify(false, why)).await;
            return Err(RegisterError::Endpoint { endpoint, source });
        }
    };
    registration.notify_registration_status(notify(true, String::new())).await.map_err(RegisterError::Notify)?;
    Ok(Registered { info, client: DraClient::new(dra, service, call_timeout) })
}

/// The kubelet takes `DRAPlugin` plugins and prefers the v1 service over v1beta1.
pub fn choose(plugin_type: &str, versions: &[String]) -> Result<Service, String> {
    if plugin_type != DRA_PLUGIN_TYPE {
        return Err(format!("plugin type {plugin_type:?} is not {DRA_PLUGIN_TYPE:?}"));
    }
    if versions.iter().any(|v| v == DRA_V1_SERVICE) {
        Ok(Service::V1)
    } else if versions.iter().any(|v| v == DRA_V1BETA1_SERVICE) {
        Ok(Service::V1beta1)
    } else {
        Err(format!("none of the supported versions {versions:?} is {DRA_V1_SERVICE} or {DRA_V1BETA1_SERVICE}"))
    }
}

/// A call that failed as a whole, as grpc-go words it in the kubelet's messages.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CallError {
    #[error("rpc error: code = {code:?} desc = {message}")]
    Status { code: tonic::Code, message: String },
    #[error("rpc error: code = DeadlineExceeded desc = context deadline exceeded after {0:?}")]
    Timeout(Duration),
}

impl From<tonic::Status> for CallError {
    fn from(s: tonic::Status) -> CallError {
        CallError::Status { code: s.code(), message: s.message().to_string() }
    }
}

/// One claim's answer within a call that succeeded.
#[derive(Debug, Clone, PartialEq)]
pub enum ClaimOutcome<T> {
    /// Prepared with these devices (for unprepare: `()`).
    Done(T),
    /// The driver answered with an error for this claim.
    Refused(String),
    /// The response has no entry for this claim.
    Missing,
}

/// The client of a plugin's DRA service; v1 messages either way (v1beta1 is wire-identical).
#[derive(Debug, Clone)]
pub struct DraClient {
    channel: Channel,
    service: Service,
    timeout: Duration,
}

impl DraClient {
    pub fn new(channel: Channel, service: Service, timeout: Duration) -> DraClient {
        DraClient { channel, service, timeout }
    }

    pub fn service(&self) -> Service {
        self.service
    }

    /// `NodePrepareResources` for `claims`: each claim's outcome by UID.
    pub async fn prepare(
        &self,
        claims: Vec<dra_v1::Claim>,
    ) -> Result<BTreeMap<String, ClaimOutcome<Vec<dra_v1::Device>>>, CallError> {
        let uids: Vec<String> = claims.iter().map(|c| c.uid.clone()).collect();
        let resp = self.prepare_raw(dra_v1::NodePrepareResourcesRequest { claims }).await?;
        Ok(uids
            .into_iter()
            .map(|uid| {
                let outcome = match resp.claims.get(&uid) {
                    Some(r) if r.error.is_empty() => ClaimOutcome::Done(r.devices.clone()),
                    Some(r) => ClaimOutcome::Refused(r.error.clone()),
                    None => ClaimOutcome::Missing,
                };
                (uid, outcome)
            })
            .collect())
    }

    /// `NodeUnprepareResources` for `claims`: each claim's outcome by UID.
    pub async fn unprepare(&self, claims: Vec<dra_v1::Claim>) -> Result<BTreeMap<String, ClaimOutcome<()>>, CallError> {
        let uids: Vec<String> = claims.iter().map(|c| c.uid.clone()).collect();
        let resp = self.unprepare_raw(dra_v1::NodeUnprepareResourcesRequest { claims }).await?;
        Ok(uids
            .into_iter()
            .map(|uid| {
                let outcome = match resp.claims.get(&uid) {
                    Some(r) if r.error.is_empty() => ClaimOutcome::Done(()),
                    Some(r) => ClaimOutcome::Refused(r.error.clone()),
                    None => ClaimOutcome::Missing,
                };
                (uid, outcome)
            })
            .collect())
    }

    /// The call as it went, for callers that judge the whole response.
    pub async fn prepare_raw(
        &self,
        req: dra_v1::NodePrepareResourcesRequest,
    ) -> Result<dra_v1::NodePrepareResourcesResponse, CallError> {
        let call = async {
            match self.service {
                Service::V1 => {
                    V1Client::new(self.channel.clone()).node_prepare_resources(req).await.map(|r| r.into_inner())
                }
                Service::V1beta1 => {
                    let req: dra_v1beta1::NodePrepareResourcesRequest = rewire(&req).expect("wire-identical");
                    let resp = V1beta1Client::new(self.channel.clone()).node_prepare_resources(req).await?.into_inner();
                    Ok(rewire(&resp).expect("wire-identical"))
                }
            }
        };
        self.timed(call).await
    }

    /// The call as it went, for callers that judge the whole response.
    pub async fn unprepare_raw(
        &self,
        req: dra_v1::NodeUnprepareResourcesRequest,
    ) -> Result<dra_v1::NodeUnprepareResourcesResponse, CallError> {
        let call = async {
            match self.service {
                Service::V1 => {
                    V1Client::new(self.channel.clone()).node_unprepare_resources(req).await.map(|r| r.into_inner())
                }
                Service::V1beta1 => {
                    let req: dra_v1beta1::NodeUnprepareResourcesRequest = rewire(&req).expect("wire-identical");
                    let resp =
                        V1beta1Client::new(self.channel.clone()).node_unprepare_resources(req).await?.into_inner();
                    Ok(rewire(&resp).expect("wire-identical"))
                }
            }
        };
        self.timed(call).await
    }

    async fn timed<T>(&self, call: impl Future<Output = Result<T, tonic::Status>>) -> Result<T, CallError> {
        match tokio::time::timeout(self.timeout, call).await {
            Ok(result) => result.map_err(CallError::from),
            Err(_) => Err(CallError::Timeout(self.timeout)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kubelet_takes_dra_plugins_and_prefers_v1() {
        let v = |s: &[&str]| s.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(choose("DRAPlugin", &v(&["v1beta1.DRAPlugin", "v1.DRAPlugin"])), Ok(Service::V1));
        assert_eq!(choose("DRAPlugin", &v(&["v1beta1.DRAPlugin"])), Ok(Service::V1beta1));
        assert!(choose("CSIPlugin", &v(&["v1.DRAPlugin"])).unwrap_err().contains("is not \"DRAPlugin\""));
        assert!(choose("DRAPlugin", &v(&["v2.DRAPlugin"])).unwrap_err().contains("none of the supported versions"));
    }

    #[test]
    fn call_errors_read_as_grpc_go_words_them() {
        let e = CallError::from(tonic::Status::unavailable("down"));
        assert_eq!(e.to_string(), "rpc error: code = Unavailable desc = down");
        assert!(CallError::Timeout(CALL_TIMEOUT).to_string().contains("DeadlineExceeded"));
    }
}
