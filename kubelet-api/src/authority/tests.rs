//! The rewrite on byte streams: what the server (or, on the client side, the socket) gets for
//! what the client sent.

use super::*;

/// The header blocks grpc-go 1.82.1 (kubelet 1.37.2's) sent for GetInfo and then
/// NotifyRegistrationStatus on one connection, dialled as the plugin watcher dials, with the
/// target `/tmp/dracheck-probe/plugins_registry/gpu.mock.dracheck.io-reg.sock`. Captured
/// from a raw Unix listener. Strings are Huffman-coded, and the second block refers to the
/// first one's fields through the dynamic table (`c3 c2 c1 c0`, `7f00`).
const GRPC_GO_GET_INFO: &str = "8386459c62ba2d98d558598c84d83498f52fb4b31909b06931ea63115392a94f41b55458534d6a8b0c960\
    c93949d56aec3c6554586ba2d98d5222b0b31909b3d2a2c33576af49c9d5792c1927293aae63ad61665d072755f8b1d75d0620d263d4c4d6\
    5647a8a9acac8b4c7602bbc25c340027465864d833505b11f40899acac8b24d494f6a7f8613efbeeb96ff";
const GRPC_GO_NOTIFY: &str =
    "838645a862ba2d98d558598c84d83498f52fb4b31909b06931ea6349d2697d6d2cc6426c1a4c7ab72469b51fc3c2c1c07f008513efbcf82d";
const GRPC_GO_SOCKET: &str = "/tmp/dracheck-probe/plugins_registry/gpu.mock.dracheck.io-reg.sock";

/// RFC 7541 Appendix C.4: three requests on one connection, Huffman-coded, the later ones
/// indexing fields of the earlier ones (`be`, `bf`: the dynamic table).
const RFC_C4: [&str; 3] = [
    "828684418cf1e3c2e5f23a6ba0ab90f4ff",
    "828684be5886a8eb10649cbf",
    "828785bf408825a849e95ba97d7f8925a849e95bb8e8b4bf",
];

fn hex(s: &str) -> Vec<u8> {
    let s: String = s.split_whitespace().collect();
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
}

fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    write_head(&mut out, payload.len(), kind, flags, stream);
    out.extend_from_slice(payload);
    out
}

fn connection(frames: &[Vec<u8>]) -> Vec<u8> {
    let mut out = PREFACE.to_vec();
    frames.iter().for_each(|f| out.extend_from_slice(f));
    out
}

/// Each header block alone as a HEADERS frame with END_HEADERS, streams 1, 3, 5, …
fn request_frames(blocks: &[Vec<u8>]) -> Vec<Vec<u8>> {
    blocks.iter().enumerate().map(|(i, b)| frame(HEADERS, END_HEADERS, 2 * i as u32 + 1, b)).collect()
}

fn feed(rewriter: &mut HeaderRewriter, input: &[u8]) -> Result<Vec<u8>, RewriteError> {
    let mut out = Vec::new();
    rewriter.feed(input, &mut out)?;
    Ok(out)
}

#[derive(Debug, PartialEq)]
struct Frame {
    kind: u8,
    flags: u8,
    stream: u32,
    payload: Vec<u8>,
}

fn frames(bytes: &[u8]) -> Vec<Frame> {
    assert_eq!(&bytes[..PREFACE.len()], PREFACE, "the preface comes first, unchanged");
    let mut rest = &bytes[PREFACE.len()..];
    let mut out = Vec::new();
    while !rest.is_empty() {
        let head = FrameHead::parse(rest[..FRAME_HEAD].try_into().unwrap());
        let payload = rest[FRAME_HEAD..FRAME_HEAD + head.len].to_vec();
        rest = &rest[FRAME_HEAD + head.len..];
        out.push(Frame { kind: head.kind, flags: head.flags, stream: head.stream, payload });
    }
    out
}

/// The header blocks of rewritten output, joined from their frames; padding must be gone.
fn blocks(bytes: &[u8]) -> Vec<Vec<u8>> {
    let mut out: Vec<Vec<u8>> = Vec::new();
    for f in frames(bytes) {
        match f.kind {
            HEADERS => {
                assert_eq!(f.flags & PADDED, 0, "padding is dropped");
                let skip = if f.flags & PRIORITY != 0 { 5 } else { 0 };
                out.push(f.payload[skip..].to_vec());
            }
            CONTINUATION => out.last_mut().unwrap().extend_from_slice(&f.payload),
            _ => {}
        }
    }
    out
}

type Fields = Vec<(String, String)>;

fn text(fields: Vec<(Vec<u8>, Vec<u8>)>) -> Fields {
    fields.into_iter().map(|(n, v)| (String::from_utf8(n).unwrap(), String::from_utf8(v).unwrap())).collect()
}

/// Decodes each block with a decoder of its own, which has no dynamic table entries: it
/// fails on any reference to one, so success shows that the output never uses the table.
fn decode_alone(blocks: &[Vec<u8>]) -> Vec<Fields> {
    blocks.iter().map(|b| text(loona_hpack::Decoder::new().decode(b).expect("decodes without a table"))).collect()
}

/// Decodes the blocks in turn with one decoder, as the client's peer would.
fn decode_in_turn(blocks: &[Vec<u8>]) -> Vec<Fields> {
    let mut decoder = loona_hpack::Decoder::new();
    blocks.iter().map(|b| text(decoder.decode(b).unwrap())).collect()
}

fn with_authority(mut fields: Fields, authority: &str) -> Fields {
    for (name, value) in &mut fields {
        if name == ":authority" {
            *value = authority.into();
        }
    }
    fields
}

fn authority_of(fields: &Fields) -> &str {
    &fields.iter().find(|(n, _)| n == ":authority").expect("an :authority").1
}

#[test]
fn grpc_go_sends_the_socket_path_percent_encoded() {
    let sent = decode_in_turn(&[hex(GRPC_GO_GET_INFO), hex(GRPC_GO_NOTIFY)]);
    assert_eq!(authority_of(&sent[0]), grpc_go_authority(Path::new(GRPC_GO_SOCKET)));
    assert_eq!(authority_of(&sent[1]), grpc_go_authority(Path::new(GRPC_GO_SOCKET)));
    assert_eq!(
        grpc_go_authority(Path::new("/var/lib/kubelet/plugins_registry/gpu.mock.dracheck.io-reg.sock")),
        "%2Fvar%2Flib%2Fkubelet%2Fplugins_registry%2Fgpu.mock.dracheck.io-reg.sock"
    );
}

#[test]
fn the_server_gets_localhost_for_the_kubelets_registration_calls() {
    let sent = [hex(GRPC_GO_GET_INFO), hex(GRPC_GO_NOTIFY)];
    let out = feed(&mut HeaderRewriter::server(), &connection(&request_frames(&sent))).unwrap();
    let expected: Vec<Fields> = decode_in_turn(&sent).into_iter().map(|f| with_authority(f, "localhost")).collect();
    assert_eq!(decode_alone(&blocks(&out)), expected);
}

#[test]
fn the_server_keeps_an_authority_h2_accepts_and_repairs_one_it_refuses() {
    for valid in ["localhost", "localhost:8080", "www.example.com", "[::1]:80", "user@host"] {
        assert_eq!(Authority::Repair.apply(valid.as_bytes()), valid.as_bytes(), "{valid}");
    }
    // The raw path older grpc-go releases and other clients send, today's encoded one, none.
    for refused in ["/var/lib/kubelet/plugins_registry/x-reg.sock", "%2Fvar%2Flib%2Fx-reg.sock", ""] {
        assert_eq!(Authority::Repair.apply(refused.as_bytes()), LOCALHOST, "{refused}");
    }
    let sent: Vec<Vec<u8>> = RFC_C4.iter().map(|b| hex(b)).collect();
    let out = feed(&mut HeaderRewriter::server(), &connection(&request_frames(&sent))).unwrap();
    let decoded = decode_alone(&blocks(&out));
    assert_eq!(decoded, decode_in_turn(&sent));
    assert_eq!(authority_of(&decoded[2]), "www.example.com");
    assert_eq!(decoded[2][4], ("custom-key".into(), "custom-value".into()));
}

#[test]
fn the_plugin_watcher_client_replaces_huffman_coded_and_indexed_authorities() {
    let sent: Vec<Vec<u8>> = RFC_C4.iter().map(|b| hex(b)).collect();
    let socket = Path::new("/var/lib/kubelet/plugins_registry/x-reg.sock");
    let mut rewriter = HeaderRewriter::replacing(&grpc_go_authority(socket));
    let out = feed(&mut rewriter, &connection(&request_frames(&sent))).unwrap();
    let expected: Vec<Fields> = decode_in_turn(&sent)
        .into_iter()
        .map(|f| with_authority(f, "%2Fvar%2Flib%2Fkubelet%2Fplugins_registry%2Fx-reg.sock"))
        .collect();
    assert_eq!(decode_alone(&blocks(&out)), expected);
}

#[test]
fn padding_is_dropped_and_priority_and_end_stream_are_kept() {
    let block = hex(RFC_C4[0]);
    let mut payload = vec![3]; // pad length
    payload.extend_from_slice(&[0x80, 0, 0, 7, 200]); // exclusive dependency on stream 7, weight 200
    payload.extend_from_slice(&block);
    payload.extend_from_slice(&[0, 0, 0]);
    let sent = frame(HEADERS, END_STREAM | END_HEADERS | PADDED | PRIORITY, 9, &payload);
    let out = frames(&feed(&mut HeaderRewriter::server(), &connection(&[sent])).unwrap());
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].flags, END_STREAM | END_HEADERS | PRIORITY);
    assert_eq!(out[0].stream, 9);
    assert_eq!(&out[0].payload[..5], &[0x80, 0, 0, 7, 200]);
    assert_eq!(decode_alone(&[out[0].payload[5..].to_vec()]), decode_in_turn(&[block]));
}

#[test]
fn padding_longer_than_the_frame_is_refused() {
    let sent = frame(HEADERS, END_HEADERS | PADDED, 1, &[9, 0x82]);
    let e = feed(&mut HeaderRewriter::server(), &connection(&[sent])).unwrap_err();
    assert!(matches!(e, RewriteError::Malformed { stream: 1 }), "{e}");
}

#[test]
fn a_block_split_over_continuations_is_joined_however_the_bytes_arrive() {
    let block = hex(GRPC_GO_GET_INFO);
    let (a, rest) = block.split_at(10);
    let (b, c) = rest.split_at(50);
    let input = connection(&[
        frame(0x4, 0, 0, &[]), // SETTINGS
        frame(HEADERS, 0, 1, a),
        frame(CONTINUATION, 0, 1, b),
        frame(CONTINUATION, END_HEADERS, 1, c),
        frame(0x0, END_STREAM, 1, &[0, 0, 0, 0, 0]), // DATA
    ]);
    let whole = feed(&mut HeaderRewriter::server(), &input).unwrap();
    let mut rewriter = HeaderRewriter::server();
    let bytewise: Vec<u8> = input.iter().flat_map(|b| feed(&mut rewriter, std::slice::from_ref(b)).unwrap()).collect();
    assert_eq!(bytewise, whole);

    let out = frames(&whole);
    assert_eq!(
        out.iter().map(|f| (f.kind, f.flags)).collect::<Vec<_>>(),
        [(0x4, 0), (HEADERS, END_HEADERS), (0x0, END_STREAM)]
    );
    assert_eq!(decode_alone(&blocks(&whole)), [with_authority(decode_in_turn(&[block])[0].clone(), "localhost")]);
}

#[test]
fn blocks_over_16384_bytes_go_on_in_continuation_frames() {
    let mut block = hex(RFC_C4[0]);
    let big = "x".repeat(40_000);
    encode_literal(b"x-big", big.as_bytes(), &mut block);
    let sent = frame(HEADERS, END_HEADERS | PRIORITY, 1, &[[0, 0, 0, 0, 15].as_slice(), &block].concat());
    let out = feed(&mut HeaderRewriter::replacing("elsewhere"), &connection(&[sent])).unwrap();
    let shape: Vec<(u8, u8, usize)> = frames(&out).iter().map(|f| (f.kind, f.flags, f.payload.len())).collect();
    assert_eq!(shape.len(), 3, "{shape:?}");
    assert_eq!((shape[0].0, shape[0].1, shape[0].2), (HEADERS, PRIORITY, MAX_FRAME));
    assert_eq!((shape[1].0, shape[1].1, shape[1].2), (CONTINUATION, 0, MAX_FRAME));
    assert_eq!((shape[2].0, shape[2].1), (CONTINUATION, END_HEADERS));
    let decoded = decode_alone(&blocks(&out));
    assert_eq!(authority_of(&decoded[0]), "elsewhere");
    assert_eq!(decoded[0][4], ("x-big".into(), big));
}

#[test]
fn frames_without_header_blocks_and_other_protocols_pass_untouched() {
    let input = connection(&[
        frame(0x4, 0, 0, &[0, 3, 0, 0, 0, 100]),      // SETTINGS
        frame(0x8, 0, 0, &[0, 0, 0x10, 0]),           // WINDOW_UPDATE
        frame(0x0, 0, 3, &[1; 20_000]),               // DATA, larger than a read
        frame(0x6, 0, 0, &[1, 2, 3, 4, 5, 6, 7, 8]),  // PING
        frame(CONTINUATION, END_HEADERS, 5, &[0x82]), // no HEADERS before it: the server's to refuse
    ]);
    assert_eq!(feed(&mut HeaderRewriter::server(), &input).unwrap(), input);
    let http1 = b"GET / HTTP/1.1\r\nHost: /var/lib/x.sock\r\n\r\n";
    assert_eq!(feed(&mut HeaderRewriter::server(), http1).unwrap(), http1);
}

#[test]
fn frames_between_a_headers_frame_and_its_continuation_are_refused() {
    let block = hex(RFC_C4[0]);
    let input = connection(&[frame(HEADERS, 0, 1, &block[..4]), frame(0x6, 0, 0, &[0; 8])]);
    let e = feed(&mut HeaderRewriter::server(), &input).unwrap_err();
    assert!(matches!(e, RewriteError::Interleaved { kind: 0x6, stream: 0, open: 1 }), "{e}");
    let input = connection(&[frame(HEADERS, 0, 1, &block[..4]), frame(CONTINUATION, END_HEADERS, 3, &block[4..])]);
    assert!(matches!(feed(&mut HeaderRewriter::server(), &input), Err(RewriteError::Interleaved { .. })));
}

#[test]
fn table_size_updates_are_followed_and_passed_on() {
    // A size update to 0 first, then a field with incremental indexing, which a table of
    // size 0 cannot hold.
    let mut first = vec![0x20, 0x82];
    first.extend_from_slice(&hex("418cf1e3c2e5f23a6ba0ab90f4ff"));
    let mut rewriter = HeaderRewriter::replacing("elsewhere");
    let out = feed(&mut rewriter, &connection(&[frame(HEADERS, END_HEADERS, 1, &first)])).unwrap();
    let block = &blocks(&out)[0];
    assert_eq!(block[0], 0x20, "the update starts the block the server gets");
    assert_eq!(decode_alone(std::slice::from_ref(block))[0][1], (":authority".into(), "elsewhere".into()));
    // So the next block's reference to the first dynamic entry is out of range.
    let mut next = Vec::new();
    rewriter.feed(&frame(HEADERS, END_HEADERS, 3, &[0x82, 0xbe]), &mut next).map(|_| ()).unwrap_err();
}

#[test]
fn invalid_hpack_is_refused() {
    // Index 62 is the first dynamic entry, and the table is empty.
    let e = feed(&mut HeaderRewriter::server(), &connection(&[frame(HEADERS, END_HEADERS, 1, &[0xbe])])).unwrap_err();
    assert!(matches!(e, RewriteError::Hpack { stream: 1, .. }), "{e}");
}

#[test]
fn integers_encode_as_in_rfc_7541_c1() {
    let encode = |value, prefix, first| {
        let mut out = Vec::new();
        encode_integer(value, prefix, first, &mut out);
        out
    };
    assert_eq!(encode(10, 5, 0), [0x0a]);
    assert_eq!(encode(1337, 5, 0), [0x1f, 0x9a, 0x0a]);
    assert_eq!(encode(42, 8, 0), [0x2a]);
    assert_eq!(encode(127, 7, 0x80), [0xff, 0x00]);
}
