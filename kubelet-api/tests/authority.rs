//! The kubelet's registration dial against tonic servers on Unix sockets: a plain one refuses
//! it, as it refuses the real kubelet's; one served by `UnixSocket::serve` answers it, call
//! after call on one connection and with header blocks too large for one frame.

use std::path::Path;
use std::time::Duration;

use dracheck_kubelet_api::authority::grpc_go_authority;
use dracheck_kubelet_api::registration::registration_client::RegistrationClient;
use dracheck_kubelet_api::registration::registration_server::{Registration, RegistrationServer};
use dracheck_kubelet_api::registration::{InfoRequest, PluginInfo, RegistrationStatus, RegistrationStatusResponse};
use dracheck_kubelet_api::{UnixSocket, connect_unix, connect_unix_as_plugin_watcher};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::UnixListener;
use tonic::transport::Server;
use tonic::{Code, Request, Response, Status};

/// Names itself after the size of the request's `x-big` metadata, so that a test can tell a
/// large header crossed whole.
struct Reg;

#[tonic::async_trait]
impl Registration for Reg {
    async fn get_info(&self, request: Request<InfoRequest>) -> Result<Response<PluginInfo>, Status> {
        let big = request.metadata().get("x-big").map_or(0, |v| v.len());
        Ok(Response::new(PluginInfo { name: format!("big={big}"), ..PluginInfo::default() }))
    }
    async fn notify_registration_status(
        &self,
        _: Request<RegistrationStatus>,
    ) -> Result<Response<RegistrationStatusResponse>, Status> {
        Ok(Response::new(RegistrationStatusResponse {}))
    }
}

fn socket_in(dir: &tempfile::TempDir) -> std::path::PathBuf {
    dir.path().join("plugins_registry/test.dracheck.io-reg.sock")
}

fn temp_dir() -> tempfile::TempDir {
    tempfile::Builder::new().prefix("ka").tempdir().unwrap()
}

/// A tonic server as a driver without the fix writes it: tonic's own Unix listener stream.
fn plain_tonic_server(path: &Path) -> tokio::task::JoinHandle<()> {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let incoming = tokio_stream::wrappers::UnixListenerStream::new(UnixListener::bind(path).unwrap());
    let server = Server::builder().add_service(RegistrationServer::new(Reg)).serve_with_incoming(incoming);
    tokio::spawn(async move { server.await.unwrap() })
}

#[tokio::test]
async fn a_plain_tonic_server_resets_the_plugin_watchers_calls_as_it_does_the_kubelets() {
    let dir = temp_dir();
    let path = socket_in(&dir);
    let server = plain_tonic_server(&path);

    let mut kubelet = RegistrationClient::new(connect_unix_as_plugin_watcher(&path).await.unwrap());
    let e = kubelet.get_info(InfoRequest {}).await.expect_err("h2 refuses the authority");
    assert_eq!(e.code(), Code::Internal, "{e:?}");
    // The kubelet's grpc-go says `stream terminated by RST_STREAM with error code:
    // PROTOCOL_ERROR`; tonic keeps the reset in the error's source.
    let detail = format!("{e:?}");
    assert!(detail.contains("Reset(") && detail.contains("PROTOCOL_ERROR, Remote"), "{detail}");

    // Only the authority differs: a `unix:`-style dial (`localhost`) gets an answer.
    let mut local = RegistrationClient::new(connect_unix(&path).await.unwrap());
    local.get_info(InfoRequest {}).await.expect("GetInfo with authority localhost");
    server.abort();
}

#[tokio::test]
async fn unix_socket_serve_answers_the_plugin_watcher_call_after_call_on_one_connection() {
    let dir = temp_dir();
    let path = socket_in(&dir);
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    // A header list limit above the large header below (hyper's default is 16 KiB).
    let router = Server::builder().http2_max_header_list_size(256 * 1024).add_service(RegistrationServer::new(Reg));
    let server = tokio::spawn(UnixSocket::bind(&path).unwrap().serve(router, async {
        let _ = stop_rx.await;
    }));

    // One channel, so the later calls' header blocks refer to the first one's fields through
    // the dynamic table, as grpc-go's and h2's encoders do.
    let mut kubelet = RegistrationClient::new(connect_unix_as_plugin_watcher(&path).await.unwrap());
    for call in 0..3 {
        let info = kubelet.get_info(InfoRequest {}).await.unwrap_or_else(|e| panic!("GetInfo {call}: {e:?}"));
        assert_eq!(info.into_inner().name, "big=0");
        let notify = RegistrationStatus { plugin_registered: true, error: String::new() };
        kubelet.notify_registration_status(notify).await.unwrap_or_else(|e| panic!("Notify {call}: {e:?}"));
    }

    // A header block of about 40 kB: HEADERS and CONTINUATION frames on both sides.
    let mut request = Request::new(InfoRequest {});
    request.metadata_mut().insert("x-big", "b".repeat(40_000).parse().unwrap());
    let info = kubelet.get_info(request).await.expect("GetInfo with a 40 kB header").into_inner();
    assert_eq!(info.name, "big=40000");
    let info = kubelet.get_info(InfoRequest {}).await.expect("GetInfo after the large block").into_inner();
    assert_eq!(info.name, "big=0");

    stop_tx.send(()).unwrap();
    server.await.unwrap().unwrap();
}

/// What the server gets: the preface, then frames; returns the `:authority` of the first
/// request.
async fn first_authority(listener: UnixListener) -> String {
    let (mut stream, _) = listener.accept().await.unwrap();
    // An empty SETTINGS frame, so that the client need not wait for one.
    stream.write_all(&[0, 0, 0, 4, 0, 0, 0, 0, 0]).await.unwrap();
    let mut preface = [0u8; 24];
    stream.read_exact(&mut preface).await.unwrap();
    assert_eq!(&preface, b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n");
    loop {
        let mut head = [0u8; 9];
        stream.read_exact(&mut head).await.unwrap();
        let mut payload = vec![0u8; u32::from_be_bytes([0, head[0], head[1], head[2]]) as usize];
        stream.read_exact(&mut payload).await.unwrap();
        if head[3] == 0x1 {
            assert_eq!(head[4] & 0x4, 0x4, "a small request's block fits one frame");
            let fields = loona_hpack::Decoder::new().decode(&payload).unwrap();
            let (_, value) = fields.into_iter().find(|(n, _)| n == b":authority").expect("an :authority");
            return String::from_utf8(value).unwrap();
        }
    }
}

#[tokio::test]
async fn the_plugin_watcher_client_sends_the_authority_grpc_go_sends() {
    let dir = temp_dir();
    let path = socket_in(&dir);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    for (kubelet_style, expected) in [(true, grpc_go_authority(&path)), (false, "localhost".to_string())] {
        let _ = std::fs::remove_file(&path);
        let seen = tokio::spawn(first_authority(UnixListener::bind(&path).unwrap()));
        let channel = if kubelet_style {
            connect_unix_as_plugin_watcher(&path).await.unwrap()
        } else {
            connect_unix(&path).await.unwrap()
        };
        let call = tokio::spawn(async move { RegistrationClient::new(channel).get_info(InfoRequest {}).await });
        let authority = tokio::time::timeout(Duration::from_secs(10), seen).await.unwrap().unwrap();
        call.abort();
        assert_eq!(authority, expected);
    }
    assert!(grpc_go_authority(&path).starts_with("%2F"), "the path, percent-encoded");
}
