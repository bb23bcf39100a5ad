//! Unix-socket transport for tonic, on both ends.

use std::future::Future;
use std::io;
use std::path::{Path, PathBuf};

use hyper_util::rt::TokioIo;
use tokio::net::{UnixListener, UnixStream};
use tokio_stream::wrappers::UnixListenerStream;
use tonic::transport::server::Router;
use tonic::transport::{Channel, Endpoint, Uri};

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

/// Connects a channel to a gRPC server on the Unix socket `path`.
///
/// The channel is one HTTP/2 connection that carries every call, as kubelet uses one per
/// plugin; if it breaks, the channel dials the same path again on the next call instead of
/// failing for good, so a restarted plugin is reached without a new channel.
pub async fn connect_unix(path: impl AsRef<Path>) -> Result<Channel, SocketError> {
    let path = path.as_ref().to_path_buf();
    check_len(&path)?;
    let dial = path.clone();
    // The URI is required by tonic but never resolved: the connector ignores it.
    Endpoint::from_static("http://localhost")
        .connect_with_connector(tower::service_fn(move |_: Uri| {
            let dial = dial.clone();
            async move { Ok::<_, io::Error>(TokioIo::new(UnixStream::connect(dial).await?)) }
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

    /// Serves `router` until `shutdown` completes, then removes the socket file.
    pub async fn serve(self, router: Router, shutdown: impl Future<Output = ()>) -> Result<(), SocketError> {
        let UnixSocket { listener, file } = self;
        let result = router.serve_with_incoming_shutdown(UnixListenerStream::new(listener), shutdown).await;
        result.map_err(|source| SocketError::Serve { path: file.0.clone(), source })
    }
}
