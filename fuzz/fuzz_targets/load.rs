//! Feeds arbitrary bytes to the `.pbc` loader; whatever loads must write and load again
//! unchanged. The same bytes are also decoded directly as a program and framed with a valid
//! checksum, so that structurally varied programs reach the verifier, which must agree with
//! `load` and never accept something that fails to reload. Any panic, overflow or hang is a
//! bug.
#![no_main]

use bytecode_spec::artifact::{load, write, Header, LoadError};
use bytecode_spec::verify::verify;
use bytecode_spec::Artifact;
use libfuzzer_sys::fuzz_target;

/// Writes `artifact` and checks that it loads back unchanged (compared as bytes: a float
/// constant may be NaN).
fn reload(header: &Header, artifact: &Artifact) {
    let bytes = write(artifact, header).expect("a loaded artifact can be written");
    let (h2, a2) = load(&bytes).expect("a loaded artifact reloads after writing");
    assert_eq!(&h2, header);
    assert_eq!(write(&a2, &h2).ok(), Some(bytes));
}

fuzz_target!(|data: &[u8]| {
    if let Ok((header, artifact)) = load(data) {
        reload(&header, &artifact);
    }
    let config = bincode::config::standard().with_limit::<{ 1 << 20 }>();
    if let Ok((artifact, _)) = bincode::serde::decode_from_slice::<Artifact, _>(data, config) {
        let header = Header {
            compiler_version: "fuzz".into(),
            source_hash: [0; 32],
        };
        let verdict = verify(&artifact);
        let Ok(bytes) = write(&artifact, &header) else {
            return;
        };
        match load(&bytes) {
            Ok((h, a)) => {
                assert_eq!(verdict, Ok(()));
                reload(&h, &a);
            }
            Err(LoadError::Invalid(e)) => assert_eq!(verdict, Err(e)),
            Err(e) => panic!("a written artifact does not read back: {e}"),
        }
    }
});
