//! Unix-socket transport for tonic, on both ends, with the kubelet's `:authority` on both
//! (see [`crate::authority`]).

use std::future::Future;
use std::io;
use std::path::{Path, PathBuf};

use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{UnixListener, UnixStream};
use tokio_stream::StreamExt as _;
use tokio_stream::wrappers::UnixListenerStream;
use tonic::transport::server::{Connected, Router};
use tonic::transport::{Channel, Endpoint, Uri};

use crate::authority::AuthorityRewrite;

/// `sun_path` holds 108 bytes including the terminating NUL, so a socket path may use 107.
pub const SUN_PATH_MAX: usize = 107;

#[derive(Debug, thiserror::Error)]
pub enum SocketError {
    #[error(
        "the socket path {path} is {len} bytes long, but a Unix socket path may have at most \
         {SUN_PATH_MAX} bytes (sun_path is 108 bytes with its NUL). Choose a shorter directory."
    )]
    PathTooLong { path: PathBuf, len: usize },

    #[error("cannot create the socket directory {dir}: {source}")]
    CreateDir {
        dir: PathBuf,
        #[source]
        source: io::Error,
    },

    #[error("{path} exists and is not a socket; refusing to replace it")]
    NotASocket { path: PathBuf },

    #[error("cannot remove the stale socket {path}: {source}")]
    RemoveStale {
        path: PathBuf,
        #[source]
        source: io::Error,
    },

    #[error("cannot listen on {path}: {source}")]
    Bind {
        path: PathBuf,
        #[source]
        source: io::Error,
    },

    #[error("cannot connect to {path}: {source}")]
    Connect {
        path: PathBuf,
        #[source]
        source: tonic::transport::Error,
    },

    #[error("serving gRPC on {path} failed: {source}")]
    Serve {
        path: PathBuf,
        #[source]
        source: tonic::transport::Error,
    },
}

fn check_len(path: &Path) -> Result<(), SocketError> {
    let len = path.as_os_str().len();
    if len > SUN_PATH_MAX {
        return Err(SocketError::PathTooLong { path: path.to_path_buf(), len });
    }
    Ok(())
}

/// Connects a channel to a gRPC server on the Unix socket `path`, with `:authority`
/// `localhost`, as the kubelet dials a plugin's DRA service (`unix:` target).
///
/// The channel is one HTTP/2 connection that carries every call, as kubelet uses one per
/// plugin; if it breaks, the channel dials the same path again on the next call instead of
/// failing for good, so a restarted plugin is reached without a new channel.
pub async fn connect_unix(path: impl AsRef<Path>) -> Result<Channel, SocketError> {
    connect_with(path.as_ref(), |stream, _| stream).await
}

/// Connects a channel to a plugin's registration socket `path` as the kubelet's plugin watcher
/// does: every call carries the `:authority` grpc-go derives from the socket path
/// ([`grpc_go_authority`](crate::authority::grpc_go_authority)), which a plain h2 server
/// refuses (see [`crate::authority`]). Otherwise like [`connect_unix`].
pub async fn connect_unix_as_plugin_watcher(path: impl AsRef<Path>) -> Result<Channel, SocketError> {
    connect_with(path.as_ref(), AuthorityRewrite::plugin_watcher_client).await
}

async fn connect_with<IO>(path: &Path, wrap: fn(UnixStream, &Path) -> IO) -> Result<Channel, SocketError>
where
    IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let path = path.to_path_buf();
    check_len(&path)?;
    let dial = path.clone();
    // The URI is required by tonic but never resolved: the connector ignores it. It makes
    // tonic send `:authority: localhost`.
    Endpoint::from_static("http://localhost")
        .connect_with_connector(tower::service_fn(move |_: Uri| {
            let dial = dial.clone();
            async move { Ok::<_, io::Error>(TokioIo::new(wrap(UnixStream::connect(&dial).await?, &dial))) }
        }))
        .await
        .map_err(|source| SocketError::Connect { path, source })
}

/// A bound listening socket whose file is removed when it is dropped, so that neither a
/// failed start nor a shutdown leaves a socket that kubelet would try to dial.
#[derive(Debug)]
pub struct UnixSocket {
    listener: UnixListener,
    file: SocketFile,
}

#[derive(Debug)]
struct SocketFile(PathBuf);

impl Drop for SocketFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

impl UnixSocket {
    /// Binds `path`, creating its directory and replacing a socket file left by an earlier
    /// process (binding fails on an existing file otherwise). Must run inside a tokio runtime.
    pub fn bind(path: impl AsRef<Path>) -> Result<UnixSocket, SocketError> {
        use std::os::unix::fs::FileTypeExt as _;
        let path = path.as_ref().to_path_buf();
        check_len(&path)?;
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|source| SocketError::CreateDir { dir: dir.to_path_buf(), source })?;
        }
        match std::fs::symlink_metadata(&path) {
            Ok(meta) if meta.file_type().is_socket() => {
                std::fs::remove_file(&path).map_err(|source| SocketError::RemoveStale { path: path.clone(), source })?
            }
            Ok(_) => return Err(SocketError::NotASocket { path }),
            Err(_) => {}
        }
        let listener = UnixListener::bind(&path).map_err(|source| SocketError::Bind { path: path.clone(), source })?;
        Ok(UnixSocket { listener, file: SocketFile(path) })
    }

    pub fn path(&self) -> &Path {
        &self.file.0
    }

    /// Serves `router` until `shutdown` completes, then removes the socket file. Each
    /// connection goes through [`AuthorityRewrite::server`], so the kubelet's registration
    /// dial, whose `:authority` h2 refuses, reaches the services (see [`crate::authority`]).
    pub async fn serve(self, router: Router, shutdown: impl Future<Output = ()>) -> Result<(), SocketError> {
        self.serve_with(router, shutdown, AuthorityRewrite::server).await
    }

    /// Serves `router` as a plain tonic server does: h2 resets every call whose `:authority`
    /// is no valid URI authority, as the kubelet's registration calls are. Only for showing
    /// that bug (the mock driver's `strict-authority` fault, tests).
    pub async fn serve_strict_authority(
        self,
        router: Router,
        shutdown: impl Future<Output = ()>,
    ) -> Result<(), SocketError> {
        self.serve_with(router, shutdown, |stream| stream).await
    }

    async fn serve_with<IO>(
        self,
        router: Router,
        shutdown: impl Future<Output = ()>,
        wrap: fn(UnixStream) -> IO,
    ) -> Result<(), SocketError>
    where
        IO: AsyncRead + AsyncWrite + Connected + Unpin + Send + 'static,
    {
        let UnixSocket { listener, file } = self;
        let incoming = UnixListenerStream::new(listener).map(move |accepted| accepted.map(wrap));
        let result = router.serve_with_incoming_shutdown(incoming, shutdown).await;
        result.map_err(|source| SocketError::Serve { path: file.0.clone(), source })
    }
}
