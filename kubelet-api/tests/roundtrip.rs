//! Acting as kubelet against a tiny plugin over real Unix sockets in a temp dir: registration,
//! both DRA service versions on one socket, one connection for all calls, and the socket
//! path rules.

use std::collections::HashMap;

use dracheck_kubelet_api::registration::registration_client::RegistrationClient;
use dracheck_kubelet_api::registration::registration_server::{Registration, RegistrationServer};
use dracheck_kubelet_api::registration::{InfoRequest, PluginInfo, RegistrationStatus, RegistrationStatusResponse};
use dracheck_kubelet_api::{
    DRA_PLUGIN_TYPE, DRA_V1_SERVICE, DRA_V1BETA1_SERVICE, SUN_PATH_MAX, SocketError, UnixSocket, connect_unix,
    connect_unix_as_plugin_watcher, dra_v1, dra_v1beta1, rewire,
};
use tokio::sync::{mpsc, oneshot};
use tonic::transport::Server;
use tonic::{Request, Response, Status};

struct Reg {
    endpoint: String,
    notified: mpsc::UnboundedSender<RegistrationStatus>,
}

#[tonic::async_trait]
impl Registration for Reg {
    async fn get_info(&self, _: Request<InfoRequest>) -> Result<Response<PluginInfo>, Status> {
        Ok(Response::new(PluginInfo {
            r#type: DRA_PLUGIN_TYPE.into(),
            name: "test.dracheck.io".into(),
            endpoint: self.endpoint.clone(),
            supported_versions: vec![DRA_V1_SERVICE.into(), DRA_V1BETA1_SERVICE.into()],
        }))
    }
    async fn notify_registration_status(
        &self,
        request: Request<RegistrationStatus>,
    ) -> Result<Response<RegistrationStatusResponse>, Status> {
        self.notified.send(request.into_inner()).unwrap();
        Ok(Response::new(RegistrationStatusResponse {}))
    }
}

/// Answers each claim with one device named after the claim, so the test can tell that the
/// request really crossed the wire.
struct Plugin;

fn answer(claims: &[dra_v1::Claim]) -> dra_v1::NodePrepareResourcesResponse {
    let claims = claims
        .iter()
        .map(|c| {
            let device = dra_v1::Device {
                request_names: vec!["req".into()],
                pool_name: "node-a".into(),
                device_name: format!("dev-{}", c.name),
                cdi_device_ids: vec![format!("test.dracheck.io/gpu={}", c.uid)],
                share_id: None,
            };
            (c.uid.clone(), dra_v1::NodePrepareResourceResponse { devices: vec![device], error: String::new() })
        })
        .collect();
    dra_v1::NodePrepareResourcesResponse { claims }
}

#[tonic::async_trait]
impl dra_v1::dra_plugin_server::DraPlugin for Plugin {
    async fn node_prepare_resources(
        &self,
        request: Request<dra_v1::NodePrepareResourcesRequest>,
    ) -> Result<Response<dra_v1::NodePrepareResourcesResponse>, Status> {
        Ok(Response::new(answer(&request.into_inner().claims)))
    }
    async fn node_unprepare_resources(
        &self,
        request: Request<dra_v1::NodeUnprepareResourcesRequest>,
    ) -> Result<Response<dra_v1::NodeUnprepareResourcesResponse>, Status> {
        let claims = request
            .into_inner()
            .claims
            .into_iter()
            .map(|c| (c.uid, dra_v1::NodeUnprepareResourceResponse { error: "refused".into() }))
            .collect();
        Ok(Response::new(dra_v1::NodeUnprepareResourcesResponse { claims }))
    }
}

#[tonic::async_trait]
impl dra_v1beta1::dra_plugin_server::DraPlugin for Plugin {
    async fn node_prepare_resources(
        &self,
        request: Request<dra_v1beta1::NodePrepareResourcesRequest>,
    ) -> Result<Response<dra_v1beta1::NodePrepareResourcesResponse>, Status> {
        let v1: dra_v1::NodePrepareResourcesRequest =
            rewire(&request.into_inner()).map_err(|e| Status::internal(e.to_string()))?;
        Ok(Response::new(rewire(&answer(&v1.claims)).map_err(|e| Status::internal(e.to_string()))?))
    }
    async fn node_unprepare_resources(
        &self,
        _: Request<dra_v1beta1::NodeUnprepareResourcesRequest>,
    ) -> Result<Response<dra_v1beta1::NodeUnprepareResourcesResponse>, Status> {
        Err(Status::unimplemented("not needed by this test"))
    }
}

fn claim(name: &str, uid: &str) -> dra_v1::Claim {
    dra_v1::Claim { namespace: "default".into(), uid: uid.into(), name: name.into() }
}

#[tokio::test]
async fn kubelet_and_plugin_talk_over_unix_sockets() {
    let dir = tempfile::Builder::new().prefix("ka").tempdir().unwrap();
    let reg_path = dir.path().join("registry/test.dracheck.io-reg.sock");
    let dra_path = dir.path().join("plugins/test.dracheck.io/dra.sock");
    // A socket file left by a crashed earlier instance must not stop the new one.
    std::fs::create_dir_all(reg_path.parent().unwrap()).unwrap();
    drop(std::os::unix::net::UnixListener::bind(&reg_path).unwrap());
    assert!(reg_path.exists());

    let (notified_tx, mut notified) = mpsc::unbounded_channel();
    let (stop_tx, stop_rx) = oneshot::channel::<()>();
    let reg_socket = UnixSocket::bind(&reg_path).unwrap();
    let dra_socket = UnixSocket::bind(&dra_path).unwrap();
    assert_eq!(dra_socket.path(), dra_path);
    let reg = Reg { endpoint: dra_path.display().to_string(), notified: notified_tx };
    let stop = async {
        let _ = stop_rx.await;
    };
    let (stop_reg_tx, stop_reg_rx) = oneshot::channel::<()>();
    let reg_server =
        tokio::spawn(reg_socket.serve(Server::builder().add_service(RegistrationServer::new(reg)), async {
            let _ = stop_reg_rx.await;
        }));
    let dra_server = tokio::spawn(
        dra_socket.serve(
            Server::builder()
                .add_service(dra_v1::dra_plugin_server::DraPluginServer::new(Plugin))
                .add_service(dra_v1beta1::dra_plugin_server::DraPluginServer::new(Plugin)),
            stop,
        ),
    );

    let mut registration = RegistrationClient::new(connect_unix_as_plugin_watcher(&reg_path).await.unwrap());
    let info = registration.get_info(InfoRequest {}).await.unwrap().into_inner();
    assert_eq!(info.r#type, "DRAPlugin");
    assert_eq!(info.name, "test.dracheck.io");
    assert_eq!(info.supported_versions, ["v1.DRAPlugin", "v1beta1.DRAPlugin"]);
    registration
        .notify_registration_status(RegistrationStatus { plugin_registered: true, error: String::new() })
        .await
        .unwrap();
    assert!(notified.recv().await.unwrap().plugin_registered);

    // One channel for every call and both service versions, as kubelet does.
    let channel = connect_unix(&info.endpoint).await.unwrap();
    let mut v1 = dra_v1::dra_plugin_client::DraPluginClient::new(channel.clone());
    let mut v1beta1 = dra_v1beta1::dra_plugin_client::DraPluginClient::new(channel);
    let prepared = v1
        .node_prepare_resources(dra_v1::NodePrepareResourcesRequest {
            claims: vec![claim("c1", "uid-1"), claim("c2", "uid-2")],
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(prepared.claims.len(), 2);
    let c1 = &prepared.claims["uid-1"];
    assert_eq!(c1.error, "");
    assert_eq!(c1.devices[0].device_name, "dev-c1");
    assert_eq!(c1.devices[0].cdi_device_ids, ["test.dracheck.io/gpu=uid-1"]);

    let beta = v1beta1
        .node_prepare_resources(dra_v1beta1::NodePrepareResourcesRequest {
            claims: vec![dra_v1beta1::Claim { namespace: "default".into(), uid: "uid-3".into(), name: "c3".into() }],
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(beta.claims["uid-3"].devices[0].device_name, "dev-c3");

    let unprepared = v1
        .node_unprepare_resources(dra_v1::NodeUnprepareResourcesRequest { claims: vec![claim("c1", "uid-1")] })
        .await
        .unwrap()
        .into_inner();
    let expected: HashMap<String, dra_v1::NodeUnprepareResourceResponse> =
        [("uid-1".to_string(), dra_v1::NodeUnprepareResourceResponse { error: "refused".into() })].into();
    assert_eq!(unprepared.claims, expected);

    // Shutting a server down removes its socket file, so kubelet sees the plugin is gone.
    stop_tx.send(()).unwrap();
    dra_server.await.unwrap().unwrap();
    assert!(!dra_path.exists(), "the DRA socket is removed on shutdown");
    stop_reg_tx.send(()).unwrap();
    reg_server.await.unwrap().unwrap();
    assert!(!reg_path.exists(), "the registration socket is removed on shutdown");
}

#[tokio::test]
async fn socket_paths_longer_than_sun_path_are_refused_with_a_clear_error() {
    let long = format!("/tmp/{}/dra.sock", "d".repeat(SUN_PATH_MAX));
    match UnixSocket::bind(&long) {
        Err(e @ SocketError::PathTooLong { .. }) => {
            let message = e.to_string();
            assert!(message.contains("107 bytes"), "{message}");
            assert!(message.contains(&long), "{message}");
        }
        other => panic!("expected PathTooLong, got {other:?}"),
    }
    assert!(matches!(connect_unix(&long).await, Err(SocketError::PathTooLong { .. })));
    assert!(!std::path::Path::new(&long).parent().unwrap().exists(), "nothing was created for a refused path");
}

#[tokio::test]
async fn a_regular_file_in_the_way_is_not_replaced() {
    let dir = tempfile::Builder::new().prefix("ka").tempdir().unwrap();
    let path = dir.path().join("dra.sock");
    std::fs::write(&path, "not a socket").unwrap();
    assert!(matches!(UnixSocket::bind(&path), Err(SocketError::NotASocket { .. })));
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "not a socket");
}
