//! Stream captures under tests/fixtures/streams and the decode path the executor uses: frame
//! decoder, then the protocol's pure parser.

use llmprobe::protocol::framing::FrameDecoder;
use llmprobe::protocol::{ProtocolError, ProtocolKind, StreamEvent, StreamState};

pub fn fixture(name: &str) -> Vec<u8> {
    std::fs::read(format!("{}/tests/fixtures/streams/{name}", env!("CARGO_MANIFEST_DIR"))).unwrap()
}

/// The events of a body delivered in `pieces`.
pub fn events(kind: ProtocolKind, pieces: &[&[u8]]) -> Vec<Result<StreamEvent, ProtocolError>> {
    let protocol = kind.protocol();
    let mut decoder = FrameDecoder::new(kind.family().framing);
    let mut frames = Vec::new();
    for piece in pieces {
        decoder.feed(piece, &mut frames);
    }
    decoder.finish(&mut frames);
    let mut state = StreamState::default();
    frames.iter().map(|f| protocol.parse(f, &mut state)).collect()
}
