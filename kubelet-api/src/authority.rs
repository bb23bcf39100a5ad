//! The HTTP/2 `:authority` of the kubelet's registration dial: a Rust (tonic, hyper, h2)
//! plugin must accept it, and dracheck's emulated kubelet must send it.
//!
//! # The problem
//!
//! The kubelet's plugin watcher dials `plugins_registry/<driver>-reg.sock` with the socket path
//! as grpc-go's dial target (`grpc.DialContext(ctx, unixSocketPath, …)` with a custom
//! dialer, pkg/kubelet/pluginmanager/operationexecutor/operation_generator.go). grpc-go
//! takes the channel's authority from that target and percent-encodes it, so every call
//! carries `:authority: %2Fvar%2Flib%2Fkubelet%2Fplugins_registry%2F<driver>-reg.sock`
//! (grpc-go 1.82, as in kubelet 1.37; older releases sent the raw path). Neither is a valid
//! URI authority: h2's server, under tonic and hyper, parses it with
//! `http::uri::Authority`, fails (a `%` outside the user info, or a `/`), and resets the
//! stream with PROTOCOL_ERROR before any service sees the request. The kubelet logs
//! `failed to get plugin info using RPC GetInfo at socket …, err: rpc error: code = Internal
//! desc = stream terminated by RST_STREAM with error code: PROTOCOL_ERROR` and never
//! registers the plugin (hyperium/h2 pull request 487, open, would relax the check). The
//! DRA service socket is not affected: the kubelet dials it as a `unix:` target, whose
//! authority is `localhost`.
//!
//! # The fix
//!
//! [`AuthorityRewrite::server`] wraps each accepted connection, before h2 sees it, and
//! replaces an `:authority` that h2 would refuse with `localhost`, what a `unix:` dial
//! sends. It is a stream adapter, not a proxy: the client preface and every frame pass
//! through untouched, except the client's header blocks (HEADERS and its CONTINUATION
//! frames). Those are decoded with an HPACK decoder that follows the client's dynamic table
//! (Huffman strings, indexed fields, table size updates), and encoded again as literals
//! without indexing and without Huffman. That output never touches h2's dynamic table, so
//! h2's decoder stays in step with the client's encoder without the adapter re-encoding
//! anything against it. Padding is dropped, PRIORITY fields are kept, and blocks over 16384
//! bytes (the frame size every HTTP/2 peer accepts) go on in CONTINUATION frames. Bytes from
//! the server to the client are not touched.
//!
//! A Rust driver can copy this: wrap each accepted `UnixStream` of its registration socket
//! in [`AuthorityRewrite::server`] (it implements tonic's `Connected`) and hand the stream
//! to `Router::serve_with_incoming`, as [`crate::UnixSocket::serve`] does.
//!
//! [`AuthorityRewrite::plugin_watcher_client`] is the same rewrite in the other direction,
//! for dracheck's emulated kubelet: tonic sends `localhost`, and the adapter puts in what
//! grpc-go sends ([`grpc_go_authority`]), so a driver with the bug fails on emulated nodes
//! as it does on real ones.

use std::io;
use std::path::Path;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// What a client sends first on an HTTP/2 connection with prior knowledge (RFC 9113 §3.4).
const PREFACE: &[u8; 24] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
const FRAME_HEAD: usize = 9;
const HEADERS: u8 = 0x1;
const CONTINUATION: u8 = 0x9;
const END_STREAM: u8 = 0x1;
const END_HEADERS: u8 = 0x4;
const PADDED: u8 = 0x8;
const PRIORITY: u8 = 0x20;
/// The initial SETTINGS_MAX_FRAME_SIZE, which every peer accepts whatever it advertised.
const MAX_FRAME: usize = 16_384;
/// The most a header block may hold while it waits for its last CONTINUATION. It is far
/// above hyper's default header list limit (16 KiB), and it bounds what a client can make
/// the adapter buffer: h2's own CONTINUATION flood limit never sees these frames.
const MAX_BLOCK: usize = 1 << 20;
const LOCALHOST: &[u8] = b"localhost";

/// The `:authority` grpc-go sends when dialled with `socket` as its target, as the kubelet's
/// plugin watcher dials registration sockets: the path, percent-encoded except for the
/// characters RFC 3986 allows in an authority (grpc-go's `encodeAuthority`). For the
/// absolute paths the kubelet uses; grpc-go would parse a `?` or `#` in a path as a URL's.
pub fn grpc_go_authority(socket: &Path) -> String {
    use std::os::unix::ffi::OsStrExt as _;
    let endpoint = socket.as_os_str().as_bytes();
    let keep = |c: u8| c.is_ascii_alphanumeric() || b"-_.~!$&'()*+,;=:[]@".contains(&c);
    let mut out = String::with_capacity(endpoint.len() * 3);
    // grpc-go's fallback for an endpoint that starts with a port.
    if endpoint.first() == Some(&b':') {
        out.push_str("localhost");
    }
    for &c in endpoint {
        if keep(c) {
            out.push(c as char);
        } else {
            out.push_str(&format!("%{c:02X}"));
        }
    }
    out
}

/// Why a client's byte stream cannot be rewritten: each is a connection error in HTTP/2,
/// so the connection is closed (the server would have closed it too).
#[derive(Debug, thiserror::Error)]
pub enum RewriteError {
    #[error("the header block of stream {stream} is not valid HPACK: {source}")]
    Hpack {
        stream: u32,
        #[source]
        source: loona_hpack::decoder::DecoderError,
    },
    #[error(
        "a frame of type {kind:#x} for stream {stream} came while the header block of stream {open} \
         waited for its CONTINUATION"
    )]
    Interleaved { kind: u8, stream: u32, open: u32 },
    #[error("the HEADERS frame of stream {stream} is shorter than its padding and priority fields")]
    Malformed { stream: u32 },
    #[error("the header block of stream {stream} is larger than {MAX_BLOCK} bytes")]
    TooLarge { stream: u32 },
}

/// What becomes of an `:authority`.
#[derive(Debug, Clone)]
enum Authority {
    /// Server side: one that h2 would refuse becomes `localhost`; a valid one stays.
    Repair,
    /// Client side: every one becomes this.
    Replace(Vec<u8>),
}

impl Authority {
    fn apply<'a>(&'a self, value: &'a [u8]) -> &'a [u8] {
        match self {
            // The parser h2 uses (`Authority::from_maybe_shared`), so exactly what h2 refuses
            // is replaced.
            Authority::Repair if http::uri::Authority::try_from(value).is_err() => LOCALHOST,
            Authority::Repair => value,
            Authority::Replace(with) => with,
        }
    }
}

#[derive(Debug, Clone, Copy)]
struct FrameHead {
    raw: [u8; FRAME_HEAD],
    len: usize,
    kind: u8,
    flags: u8,
    stream: u32,
}

impl FrameHead {
    fn parse(raw: [u8; FRAME_HEAD]) -> FrameHead {
        FrameHead {
            raw,
            len: u32::from_be_bytes([0, raw[0], raw[1], raw[2]]) as usize,
            kind: raw[3],
            flags: raw[4],
            // The reserved bit is ignored on receipt (RFC 9113 §4.1).
            stream: u32::from_be_bytes([raw[5], raw[6], raw[7], raw[8]]) & 0x7fff_ffff,
        }
    }
}

fn write_head(out: &mut Vec<u8>, len: usize, kind: u8, flags: u8, stream: u32) {
    out.extend_from_slice(&(len as u32).to_be_bytes()[1..]);
    out.extend_from_slice(&[kind, flags]);
    out.extend_from_slice(&stream.to_be_bytes());
}

/// A header block whose HEADERS frame has arrived, waiting for the rest.
struct Block {
    stream: u32,
    end_stream: bool,
    priority: Option<[u8; 5]>,
    fragment: Vec<u8>,
}

enum State {
    /// Matching the client preface; the count of bytes seen.
    Preface(usize),
    /// Reading a frame header.
    Head,
    /// Passing on the payload of a frame that carries no header block; the bytes left.
    Forward(usize),
    /// Collecting the payload of a HEADERS or CONTINUATION frame.
    Collect(FrameHead, Vec<u8>),
    /// Not HTTP/2 with prior knowledge: nothing to rewrite, and the server refuses it alone.
    Transparent,
}

/// The client-to-server byte stream of one connection, with every header block's
/// `:authority` rewritten. Fed in pieces of any size.
pub(crate) struct HeaderRewriter {
    authority: Authority,
    /// Follows the client's encoder: its dynamic table, and the size updates of it.
    hpack: loona_hpack::Decoder<'static>,
    state: State,
    head: [u8; FRAME_HEAD],
    head_len: usize,
    block: Option<Block>,
}

impl HeaderRewriter {
    fn new(authority: Authority) -> HeaderRewriter {
        HeaderRewriter {
            authority,
            // Starts at the 4096-byte table HPACK begins with; size updates change it.
            hpack: loona_hpack::Decoder::new(),
            state: State::Preface(0),
            head: [0; FRAME_HEAD],
            head_len: 0,
            block: None,
        }
    }

    pub(crate) fn server() -> HeaderRewriter {
        HeaderRewriter::new(Authority::Repair)
    }

    pub(crate) fn replacing(authority: &str) -> HeaderRewriter {
        HeaderRewriter::new(Authority::Replace(authority.as_bytes().to_vec()))
    }

    /// Takes the next bytes the client sent and appends what the server must get instead.
    pub(crate) fn feed(&mut self, mut input: &[u8], out: &mut Vec<u8>) -> Result<(), RewriteError> {
        while !input.is_empty() {
            match &mut self.state {
                State::Transparent => {
                    out.extend_from_slice(input);
                    return Ok(());
                }
                State::Preface(seen) => {
                    let n = (PREFACE.len() - *seen).min(input.len());
                    if input[..n] != PREFACE[*seen..*seen + n] {
                        self.state = State::Transparent;
                        continue;
                    }
                    out.extend_from_slice(&input[..n]);
                    *seen += n;
                    input = &input[n..];
                    if *seen == PREFACE.len() {
                        self.state = State::Head;
                    }
                }
                State::Head => {
                    let n = (FRAME_HEAD - self.head_len).min(input.len());
                    self.head[self.head_len..self.head_len + n].copy_from_slice(&input[..n]);
                    self.head_len += n;
                    input = &input[n..];
                    if self.head_len == FRAME_HEAD {
                        self.head_len = 0;
                        self.frame_started(FrameHead::parse(self.head), out)?;
                    }
                }
                State::Forward(left) => {
                    let n = (*left).min(input.len());
                    out.extend_from_slice(&input[..n]);
                    input = &input[n..];
                    *left -= n;
                    if *left == 0 {
                        self.state = State::Head;
                    }
                }
                State::Collect(head, payload) => {
                    let n = (head.len - payload.len()).min(input.len());
                    payload.extend_from_slice(&input[..n]);
                    input = &input[n..];
                    if payload.len() == head.len {
                        let (head, payload) = (*head, std::mem::take(payload));
                        self.state = State::Head;
                        self.frame_complete(head, &payload, out)?;
                    }
                }
            }
        }
        Ok(())
    }

    fn frame_started(&mut self, head: FrameHead, out: &mut Vec<u8>) -> Result<(), RewriteError> {
        if head.kind == HEADERS || head.kind == CONTINUATION {
            if head.len > MAX_BLOCK {
                return Err(RewriteError::TooLarge { stream: head.stream });
            }
            if head.len == 0 {
                return self.frame_complete(head, &[], out);
            }
            self.state = State::Collect(head, Vec::with_capacity(head.len));
            return Ok(());
        }
        // Nothing but its CONTINUATION may come between a HEADERS frame and the end of its
        // block (RFC 9113 §6.10).
        if let Some(open) = &self.block {
            return Err(RewriteError::Interleaved { kind: head.kind, stream: head.stream, open: open.stream });
        }
        out.extend_from_slice(&head.raw);
        self.state = if head.len == 0 { State::Head } else { State::Forward(head.len) };
        Ok(())
    }

    fn frame_complete(&mut self, head: FrameHead, payload: &[u8], out: &mut Vec<u8>) -> Result<(), RewriteError> {
        let stream = head.stream;
        if let Some(open) = &self.block
            && (head.kind != CONTINUATION || open.stream != stream)
        {
            return Err(RewriteError::Interleaved { kind: head.kind, stream, open: open.stream });
        }
        if head.kind == HEADERS {
            let (priority, fragment) = headers_fields(&head, payload)?;
            self.block =
                Some(Block { stream, end_stream: head.flags & END_STREAM != 0, priority, fragment: fragment.to_vec() });
        } else if let Some(block) = &mut self.block {
            if block.fragment.len() + payload.len() > MAX_BLOCK {
                return Err(RewriteError::TooLarge { stream });
            }
            block.fragment.extend_from_slice(payload);
        } else {
            // A CONTINUATION that follows no HEADERS: the server's to refuse, unchanged.
            out.extend_from_slice(&head.raw);
            out.extend_from_slice(payload);
            return Ok(());
        }
        if head.flags & END_HEADERS != 0
            && let Some(block) = self.block.take()
        {
            self.emit(block, out)?;
        }
        Ok(())
    }

    /// Decodes a complete block against the client's table and writes it out again.
    fn emit(&mut self, block: Block, out: &mut Vec<u8>) -> Result<(), RewriteError> {
        let fields = self
            .hpack
            .decode(&block.fragment)
            .map_err(|source| RewriteError::Hpack { stream: block.stream, source })?;
        let mut encoded = Vec::with_capacity(block.fragment.len() + 64);
        // Table size updates are passed on as they came: they change the size of a table the
        // server's decoder keeps empty, and that decoder still checks them against the limit
        // it advertised, as it would without the adapter. (One later in the block breaks RFC
        // 7541 §4.2; the decoder here applies it, and it is not passed on.)
        encoded.extend_from_slice(&block.fragment[..leading_size_updates(&block.fragment)]);
        for (name, value) in &fields {
            let value = if name == b":authority" { self.authority.apply(value) } else { value };
            encode_literal(name, value, &mut encoded);
        }

        let priority = block.priority.as_ref().map_or(&[][..], |p| &p[..]);
        let (first, mut rest) = encoded.split_at(encoded.len().min(MAX_FRAME - priority.len()));
        let mut flags = if block.end_stream { END_STREAM } else { 0 };
        if !priority.is_empty() {
            flags |= PRIORITY;
        }
        if rest.is_empty() {
            flags |= END_HEADERS;
        }
        write_head(out, priority.len() + first.len(), HEADERS, flags, block.stream);
        out.extend_from_slice(priority);
        out.extend_from_slice(first);
        while !rest.is_empty() {
            let (chunk, tail) = rest.split_at(rest.len().min(MAX_FRAME));
            write_head(out, chunk.len(), CONTINUATION, if tail.is_empty() { END_HEADERS } else { 0 }, block.stream);
            out.extend_from_slice(chunk);
            rest = tail;
        }
        Ok(())
    }
}

/// The priority fields and the header block fragment of a HEADERS frame's payload, without
/// its padding (RFC 9113 §6.2).
fn headers_fields<'a>(head: &FrameHead, payload: &'a [u8]) -> Result<(Option<[u8; 5]>, &'a [u8]), RewriteError> {
    let malformed = || RewriteError::Malformed { stream: head.stream };
    let mut body = payload;
    let mut pad = 0;
    if head.flags & PADDED != 0 {
        let (&n, rest) = body.split_first().ok_or_else(malformed)?;
        pad = n as usize;
        body = rest;
    }
    let mut priority = None;
    if head.flags & PRIORITY != 0 {
        let (fields, rest) = body.split_first_chunk::<5>().ok_or_else(malformed)?;
        priority = Some(*fields);
        body = rest;
    }
    let len = body.len().checked_sub(pad).ok_or_else(malformed)?;
    Ok((priority, &body[..len]))
}

/// The length of the dynamic table size updates that start a block (RFC 7541 §4.2: only
/// there may they be). Called on blocks that decoded, so every integer is complete.
fn leading_size_updates(block: &[u8]) -> usize {
    let mut at = 0;
    while at < block.len() && block[at] & 0xe0 == 0x20 {
        let mut len = 1;
        if block[at] & 0x1f == 0x1f {
            while at + len < block.len() && block[at + len] & 0x80 != 0 {
                len += 1;
            }
            len += 1;
        }
        at += len;
    }
    at.min(block.len())
}

/// A literal header field without indexing, new name, no Huffman (RFC 7541 §6.2.2).
fn encode_literal(name: &[u8], value: &[u8], out: &mut Vec<u8>) {
    out.push(0x00);
    for s in [name, value] {
        encode_integer(s.len(), 7, 0x00, out);
        out.extend_from_slice(s);
    }
}

/// An HPACK integer with a `prefix`-bit prefix after the bits of `first` (RFC 7541 §5.1).
fn encode_integer(value: usize, prefix: u8, first: u8, out: &mut Vec<u8>) {
    let max = (1usize << prefix) - 1;
    if value < max {
        out.push(first | value as u8);
        return;
    }
    out.push(first | max as u8);
    let mut rest = value - max;
    while rest >= 0x80 {
        out.push(0x80 | (rest & 0x7f) as u8);
        rest >>= 7;
    }
    out.push(rest as u8);
}

/// A stream whose client-to-server header blocks get their `:authority` rewritten: on the
/// server side, as the server reads them ([`AuthorityRewrite::server`]); on the client side,
/// as the client writes them ([`AuthorityRewrite::plugin_watcher_client`]). The other
/// direction passes through untouched.
pub struct AuthorityRewrite<S> {
    inner: S,
    /// Whether the rewrite applies to what is read (server) or to what is written (client).
    reads: bool,
    rewriter: HeaderRewriter,
    /// Rewritten bytes not yet handed on, and how many of them have been.
    out: Vec<u8>,
    done: usize,
    eof: bool,
}

impl<S> AuthorityRewrite<S> {
    /// An accepted connection whose `:authority`, where h2 would refuse it, reaches the server
    /// as `localhost`.
    pub fn server(stream: S) -> AuthorityRewrite<S> {
        AuthorityRewrite::new(stream, true, HeaderRewriter::server())
    }

    /// A connection to `socket` that sends the `:authority` the kubelet's plugin watcher sends
    /// there ([`grpc_go_authority`]), whatever the client asks for.
    pub fn plugin_watcher_client(stream: S, socket: &Path) -> AuthorityRewrite<S> {
        AuthorityRewrite::new(stream, false, HeaderRewriter::replacing(&grpc_go_authority(socket)))
    }

    fn new(inner: S, reads: bool, rewriter: HeaderRewriter) -> AuthorityRewrite<S> {
        AuthorityRewrite { inner, reads, rewriter, out: Vec::new(), done: 0, eof: false }
    }

    pub fn get_ref(&self) -> &S {
        &self.inner
    }
}

fn invalid(e: RewriteError) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, e)
}

impl<S: AsyncWrite + Unpin> AuthorityRewrite<S> {
    /// Writes out the rewritten bytes still held.
    fn poll_drain(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while self.done < self.out.len() {
            let n = ready!(Pin::new(&mut self.inner).poll_write(cx, &self.out[self.done..]))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            self.done += n;
        }
        self.out.clear();
        self.done = 0;
        Poll::Ready(Ok(()))
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for AuthorityRewrite<S> {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if !this.reads {
            return Pin::new(&mut this.inner).poll_read(cx, buf);
        }
        if buf.remaining() == 0 {
            return Poll::Ready(Ok(()));
        }
        loop {
            if this.done < this.out.len() {
                let n = (this.out.len() - this.done).min(buf.remaining());
                buf.put_slice(&this.out[this.done..this.done + n]);
                this.done += n;
                if this.done == this.out.len() {
                    this.out.clear();
                    this.done = 0;
                }
                return Poll::Ready(Ok(()));
            }
            if this.eof {
                // An unfinished frame held back is dropped: the server sees the connection end
                // at a frame boundary instead of inside a frame, and closes it either way.
                return Poll::Ready(Ok(()));
            }
            let mut raw = [0u8; 8192];
            let mut raw = ReadBuf::new(&mut raw);
            ready!(Pin::new(&mut this.inner).poll_read(cx, &mut raw))?;
            if raw.filled().is_empty() {
                this.eof = true;
                continue;
            }
            this.rewriter.feed(raw.filled(), &mut this.out).map_err(invalid)?;
        }
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for AuthorityRewrite<S> {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        if this.reads {
            return Pin::new(&mut this.inner).poll_write(cx, buf);
        }
        ready!(this.poll_drain(cx))?;
        this.rewriter.feed(buf, &mut this.out).map_err(invalid)?;
        // All of `buf` is taken (an unfinished frame is held back until the rest comes). What
        // cannot be written now is written by the next write or flush, which the caller owes.
        if let Poll::Ready(Err(e)) = this.poll_drain(cx) {
            return Poll::Ready(Err(e));
        }
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        if this.reads {
            return Pin::new(&mut this.inner).poll_write_vectored(cx, bufs);
        }
        let buf = bufs.iter().find(|b| !b.is_empty()).map_or(&[][..], |b| &b[..]);
        Pin::new(this).poll_write(cx, buf)
    }

    fn is_write_vectored(&self) -> bool {
        self.reads && self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        // On the server side `out` holds what was read, which is not to be written.
        if !this.reads {
            ready!(this.poll_drain(cx))?;
        }
        Pin::new(&mut this.inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if !this.reads {
            ready!(this.poll_drain(cx))?;
        }
        Pin::new(&mut this.inner).poll_shutdown(cx)
    }
}

/// tonic's server asks each connection who is on the other end; the wrapped stream answers.
impl<S: tonic::transport::server::Connected> tonic::transport::server::Connected for AuthorityRewrite<S> {
    type ConnectInfo = S::ConnectInfo;

    fn connect_info(&self) -> Self::ConnectInfo {
        self.inner.connect_info()
    }
}

#[cfg(test)]
mod tests;
