//! The loader and verifier against valid, corrupt and hostile artifacts: round trips, every
//! single-byte corruption and truncation of a real artifact, random mutations (of the file, and
//! of a binary encoding of the program, then written with a valid checksum so they reach the
//! verifier), one hostile program per verifier rule, and bounds on the memory and time that
//! loading a small hostile file may cost.

mod support;

use bytecode_spec::artifact::{
    load, read, write, Header, LoadError, FORMAT_VERSION, HEADER_LEN, MAGIC,
};
use bytecode_spec::verify::{verify, VerifyError};
use bytecode_spec::*;
use proptest::prelude::{
    any, prop, prop_assert_eq, prop_oneof, proptest, ProptestConfig, TestCaseError,
};
use proptest::strategy::Strategy as _;
use support::{header, r, sample, single, ModuleBuilder};

/// Counts the heap allocations of each thread, so tests can bound what an operation costs.
mod alloc {
    use std::alloc::{GlobalAlloc, Layout, System};
    use std::cell::Cell;

    thread_local! {
        static LARGEST: Cell<usize> = const { Cell::new(0) };
        static TOTAL: Cell<usize> = const { Cell::new(0) };
    }

    fn note(size: usize) {
        let _ = LARGEST.try_with(|c| c.set(c.get().max(size)));
        let _ = TOTAL.try_with(|c| c.set(c.get() + size));
    }

    struct Counting;

    // SAFETY: defers every operation to the system allocator unchanged.
    unsafe impl GlobalAlloc for Counting {
        unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
            note(layout.size());
            System.alloc(layout)
        }
        unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
            note(layout.size());
            System.alloc_zeroed(layout)
        }
        unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
            note(new_size);
            System.realloc(ptr, layout, new_size)
        }
        unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
            System.dealloc(ptr, layout)
        }
    }

    #[global_allocator]
    static GLOBAL: Counting = Counting;

    /// What running `f` on this thread allocated.
    pub struct Cost {
        /// The largest single allocation, in bytes.
        pub largest: usize,
        /// All allocations added up, in bytes.
        pub total: usize,
    }

    /// Runs `f` and reports its result and what it allocated.
    pub fn measure<T>(f: impl FnOnce() -> T) -> (T, Cost) {
        LARGEST.with(|c| c.set(0));
        TOTAL.with(|c| c.set(0));
        let out = f();
        let cost = Cost {
            largest: LARGEST.with(Cell::get),
            total: TOTAL.with(Cell::get),
        };
        (out, cost)
    }
}

/// A `.pbc` file with [`header`] around `payload` (taken as is) and a valid checksum.
fn frame(payload: &[u8]) -> Vec<u8> {
    let mut out = write(&single(1, vec![Op::Return { src: r(0) }]), &header()).expect("writable");
    out.truncate(HEADER_LEN);
    out[56..60].copy_from_slice(&(payload.len() as u32).to_le_bytes());
    let mut crc = crc32fast::Hasher::new();
    crc.update(&out[..60]);
    crc.update(payload);
    out[60..64].copy_from_slice(&crc.finalize().to_le_bytes());
    out.extend_from_slice(payload);
    out
}

/// The payload of a `.pbc` file: the decoded size (u32 LE), then the compressed data.
fn payload(file: &[u8]) -> Vec<u8> {
    file[HEADER_LEN..].to_vec()
}

/// A test-side binary encoding, used only to generate structurally varied artifacts by
/// mutating bytes and decoding them again; whatever decodes is then framed by `write`, so
/// these tests do not depend on the payload's compression.
mod mutate {
    use bincode::config::{standard, Configuration, Limit, LittleEndian, Varint};
    use bytecode_spec::Artifact;

    /// Decoding may claim at most 4 MiB.
    fn config() -> Configuration<LittleEndian, Varint, Limit<{ 1 << 22 }>> {
        standard().with_limit::<{ 1 << 22 }>()
    }

    /// The test-side encoding of `a`.
    pub fn encode(a: &Artifact) -> Vec<u8> {
        bincode::serde::encode_to_vec(a, config()).expect("encodes")
    }

    /// The artifact `bytes` encode, if they do.
    pub fn decode(bytes: &[u8]) -> Option<Artifact> {
        bincode::serde::decode_from_slice(bytes, config())
            .ok()
            .map(|(a, _)| a)
    }
}

/// Whatever `a` is, writing it and loading it back neither panics nor accepts anything the
/// verifier rejects; what loads survives a second write and load unchanged.
fn check_any(a: &Artifact) {
    let verdict = verify(a);
    let bytes = write(a, &header()).expect("writable");
    match load(&bytes) {
        Ok((h, a2)) => {
            assert_eq!(verdict, Ok(()));
            assert_reloads(&h, &a2);
        }
        Err(LoadError::Invalid(e)) => assert_eq!(verdict, Err(e)),
        Err(e) => panic!("a written artifact does not read back: {e}"),
    }
}

/// Anything `load` accepts must survive being written and loaded again unchanged.
fn assert_reloads(header: &Header, artifact: &Artifact) {
    let bytes = write(artifact, header).expect("writable");
    let (h2, a2) = load(&bytes).expect("a loaded artifact reloads after writing");
    assert_eq!(&h2, header);
    // Compared as bytes: a decoded float constant may be NaN.
    assert_eq!(write(&a2, &h2).expect("writable"), bytes);
}

mod valid {
    use super::*;

    /// Every opcode's disassembler name; the sample must use them all.
    const ALL_OPS: [&str; 39] = [
        "load_const",
        "move",
        "get_up",
        "set_up",
        "format",
        "make_list",
        "make_record",
        "binary",
        "not",
        "neg",
        "get_field",
        "get_index",
        "convert",
        "jump",
        "jump_if",
        "jump_if_not",
        "switch",
        "for_next",
        "repeat_next",
        "loop_next",
        "try_enter",
        "try_exit",
        "end_finally",
        "throw",
        "rethrow",
        "assert",
        "call",
        "return",
        "set_block_output",
        "invoke",
        "load_input",
        "set_output",
        "session",
        "evaluate",
        "choose",
        "ask",
        "fork",
        "fork_each",
        "join",
    ];

    #[test]
    fn sample_verifies_and_uses_every_opcode() {
        let a = sample();
        verify(&a).expect("the sample is valid");
        let used: std::collections::HashSet<&str> = a
            .modules
            .iter()
            .flat_map(|m| m.funcs.values())
            .flat_map(|f| f.code.iter().map(Op::name))
            .collect();
        let missing: Vec<_> = ALL_OPS.iter().filter(|n| !used.contains(*n)).collect();
        assert!(missing.is_empty(), "the sample does not use {missing:?}");
        assert!(a.modules.iter().all(|m| m.funcs.values().all(|f| f
            .code
            .last()
            .unwrap()
            .is_terminator())));
    }

    #[test]
    fn write_then_read_and_load_round_trip() {
        let a = sample();
        let h = header();
        let bytes = write(&a, &h).expect("writable");
        assert_eq!(bytes[..4], MAGIC);
        assert_eq!(read(&bytes), Ok((h.clone(), a.clone())));
        let (lh, la) = load(&bytes).expect("loads");
        assert_eq!((lh, la.into_inner()), (h.clone(), a.clone()));
        assert_eq!(
            write(&a, &h).expect("writable"),
            bytes,
            "writing is deterministic"
        );
    }

    #[test]
    fn an_empty_compiler_version_round_trips() {
        let h = Header {
            compiler_version: String::new(),
            source_hash: [0xff; 32],
        };
        let bytes = write(&sample(), &h).expect("writable");
        assert_eq!(load(&bytes).unwrap().0, h);
    }

    #[test]
    fn nesting_thousands_of_try_regions_is_accepted() {
        let (a, _) = super::cost::nested_trys(2000);
        verify(&a).expect("deep but balanced nesting is valid");
    }

    /// The longest prefix of `s` that fits the header's 16-byte field without splitting a
    /// character.
    fn fitted(s: &str) -> &str {
        let mut end = s.len().min(16);
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        &s[..end]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(128))]

        /// The compiler version is kept whole when it fits and cut at a character boundary
        /// when it does not, so reading a written artifact never fails on it.
        #[test]
        fn header_round_trips(version in "\\PC{0,24}", hash in any::<[u8; 32]>()) {
            let h = Header { compiler_version: version.clone(), source_hash: hash };
            let (h2, _) = load(&write(&sample(), &h).expect("writable")).map_err(|e| TestCaseError::fail(e.to_string()))?;
            prop_assert_eq!(h2.compiler_version, fitted(&version));
            prop_assert_eq!(h2.source_hash, hash);
        }
    }
}

mod framing {
    use super::*;

    fn sample_bytes() -> Vec<u8> {
        write(&sample(), &header()).expect("writable")
    }

    #[test]
    fn the_largest_artifact_a_writer_makes_is_read_and_nothing_longer() {
        use bytecode_spec::artifact::{read_file, MAX_FILE, MAX_PAYLOAD, MAX_SIGNATURE};
        // The most the writer's zstd frame of the largest payload can take, signed.
        let largest =
            HEADER_LEN + 4 + zstd::zstd_safe::compress_bound(MAX_PAYLOAD) + 8 + MAX_SIGNATURE;
        assert!(largest <= MAX_FILE, "{largest} > {MAX_FILE}");
        let dir = std::env::temp_dir().join(format!("loader-max-file-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let path = dir.join("big.pbc");
        let file = std::fs::File::create(&path).expect("create");
        file.set_len(MAX_FILE as u64).expect("sparse");
        assert_eq!(read_file(&path).expect("read").len(), MAX_FILE);
        file.set_len(MAX_FILE as u64 + 1).expect("sparse");
        let e = read_file(&path).expect_err("longer than any artifact");
        assert!(e.to_string().contains(&format!("{MAX_FILE} bytes")), "{e}");
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn every_single_byte_corruption_is_rejected() {
        let good = sample_bytes();
        for mask in [0xff, 0x01, 0x80] {
            for i in 0..good.len() {
                let mut bad = good.clone();
                bad[i] ^= mask;
                let err = load(&bad).expect_err(&format!("byte {i} ^ {mask:#x} was accepted"));
                let expected = match i {
                    0..4 => matches!(err, LoadError::BadMagic),
                    4..6 => matches!(err, LoadError::UnsupportedVersion(_)),
                    56..60 => matches!(
                        err,
                        LoadError::Truncated { .. } | LoadError::TrailingBytes(_)
                    ),
                    _ => matches!(err, LoadError::Checksum { .. }),
                };
                assert!(expected, "byte {i} ^ {mask:#x}: unexpected {err:?}");
            }
        }
    }

    #[test]
    fn every_truncation_is_rejected() {
        let good = sample_bytes();
        for len in 0..good.len() {
            let err = load(&good[..len]).expect_err(&format!("a {len}-byte prefix was accepted"));
            assert!(
                matches!(err, LoadError::Truncated { got, .. } if got == len),
                "prefix {len}: {err:?}"
            );
        }
    }

    #[test]
    fn appended_bytes_are_rejected() {
        let good = sample_bytes();
        for extra in [&[0u8][..], b"x", &[0; 64]] {
            let mut bad = good.clone();
            bad.extend_from_slice(extra);
            assert_eq!(load(&bad), Err(LoadError::TrailingBytes(extra.len())));
        }
    }

    #[test]
    fn wrong_magic_is_rejected() {
        let mut bad = sample_bytes();
        bad[..4].copy_from_slice(b"\x7fELF");
        assert_eq!(load(&bad), Err(LoadError::BadMagic));
        assert_eq!(load(b"PBX"), Err(LoadError::BadMagic));
        assert_eq!(
            load(b"hello world, not an artifact"),
            Err(LoadError::BadMagic)
        );
    }

    #[test]
    fn wrong_version_is_rejected() {
        for v in [0, FORMAT_VERSION + 1, u16::MAX] {
            let mut bad = sample_bytes();
            bad[4..6].copy_from_slice(&v.to_le_bytes());
            assert_eq!(load(&bad), Err(LoadError::UnsupportedVersion(v)));
            assert!(load(&bad)
                .unwrap_err()
                .to_string()
                .contains("unsupported artifact format version"));
        }
    }

    #[test]
    fn nonzero_reserved_bytes_are_rejected_even_with_a_valid_checksum() {
        let good = sample_bytes();
        let mut bad = frame(&payload(&good));
        assert_eq!(bad, good, "frame() rebuilds a written file exactly");
        bad[6] = 1;
        let crc = {
            let mut h = crc32fast::Hasher::new();
            h.update(&bad[..60]);
            h.update(&bad[HEADER_LEN..]);
            h.finalize()
        };
        bad[60..64].copy_from_slice(&crc.to_le_bytes());
        assert!(matches!(load(&bad), Err(LoadError::Malformed(m)) if m.contains("reserved")));
    }

    #[test]
    fn a_compiler_version_that_is_not_utf8_is_rejected() {
        let mut bad = sample_bytes();
        bad[8] = 0xff;
        let mut h = crc32fast::Hasher::new();
        h.update(&bad[..60]);
        h.update(&bad[HEADER_LEN..]);
        bad[60..64].copy_from_slice(&h.finalize().to_le_bytes());
        assert!(matches!(load(&bad), Err(LoadError::Malformed(m)) if m.contains("UTF-8")));
    }

    #[test]
    fn undecodable_payloads_are_malformed() {
        let real = payload(&sample_bytes());
        let mut garbage = real[..4].to_vec();
        garbage.extend((0..real.len() as u32 - 4).map(|i| (i * 37 % 251) as u8));
        let cases: [(&str, Vec<u8>); 6] = [
            ("empty payload", Vec::new()),
            ("shorter than the size field", vec![1, 0]),
            ("only the size field", real[..4].to_vec()),
            ("not compressed data", garbage),
            ("compressed data cut short", real[..real.len() - 1].to_vec()),
            (
                "bytes after the compressed data",
                [&real[..], &[0]].concat(),
            ),
        ];
        for (what, payload) in cases {
            assert!(
                matches!(load(&frame(&payload)), Err(LoadError::Malformed(_))),
                "{what}"
            );
        }
    }

    #[test]
    fn a_claimed_size_different_from_the_real_one_is_rejected() {
        let real = payload(&sample_bytes());
        let size = u32::from_le_bytes(real[..4].try_into().unwrap());
        for claimed in [size + 1, size - 1, size / 2, 0] {
            let mut bad = real.clone();
            bad[..4].copy_from_slice(&claimed.to_le_bytes());
            assert!(
                matches!(load(&frame(&bad)), Err(LoadError::Malformed(_))),
                "claimed {claimed}"
            );
        }
    }

    #[test]
    fn decompression_bombs_are_rejected_without_allocating() {
        // A small payload claiming an enormous decoded size: the largest the field allows,
        // the cap itself, and a thousand times its own size.
        let real = payload(&sample_bytes());
        let thousandfold = 1000 * real.len() as u32;
        for claimed in [u32::MAX, artifact::MAX_PAYLOAD as u32, thousandfold] {
            let mut bomb = real.clone();
            bomb[..4].copy_from_slice(&claimed.to_le_bytes());
            let bytes = frame(&bomb);
            let (result, cost) = alloc::measure(|| load(&bytes));
            assert!(
                matches!(result, Err(LoadError::Malformed(_))),
                "claimed {claimed}: {result:?}"
            );
            assert!(
                cost.largest < 1 << 16,
                "claimed {claimed}: allocated {} bytes at once",
                cost.largest
            );
        }
    }

    #[test]
    fn every_single_byte_corruption_of_the_encoding_is_handled() {
        // Each corruption that still decodes reaches the verifier through a well-framed file.
        let e = mutate::encode(&sample());
        let mut decoded = 0;
        for mask in [0xff, 0x01] {
            for i in 0..e.len() {
                let mut bad = e.clone();
                bad[i] ^= mask;
                if let Some(a) = mutate::decode(&bad) {
                    check_any(&a);
                    decoded += 1;
                }
            }
        }
        assert!(decoded > e.len() / 2, "only {decoded} corruptions decoded");
    }

    /// One random edit of a byte string; positions wrap around its length.
    #[derive(Clone, Debug)]
    enum Edit {
        Set(usize, u8),
        Xor(usize, u8),
        Insert(usize, u8),
        Delete(usize),
    }

    fn edit() -> impl proptest::strategy::Strategy<Value = Edit> {
        prop_oneof![
            (any::<usize>(), any::<u8>()).prop_map(|(i, b)| Edit::Set(i, b)),
            (any::<usize>(), 1..=255u8).prop_map(|(i, b)| Edit::Xor(i, b)),
            (any::<usize>(), any::<u8>()).prop_map(|(i, b)| Edit::Insert(i, b)),
            any::<usize>().prop_map(Edit::Delete),
        ]
    }

    fn apply(bytes: &mut Vec<u8>, edits: &[Edit]) {
        for e in edits {
            let at = |i: usize, len: usize| if len == 0 { 0 } else { i % len };
            match *e {
                Edit::Set(i, b) if !bytes.is_empty() => {
                    let i = at(i, bytes.len());
                    bytes[i] = b;
                }
                Edit::Xor(i, b) if !bytes.is_empty() => {
                    let i = at(i, bytes.len());
                    bytes[i] ^= b;
                }
                Edit::Insert(i, b) => {
                    let i = at(i, bytes.len() + 1);
                    bytes.insert(i, b);
                }
                Edit::Delete(i) if !bytes.is_empty() => {
                    let i = at(i, bytes.len());
                    bytes.remove(i);
                }
                _ => {}
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn random_file_mutations_never_panic(edits in prop::collection::vec(edit(), 1..8)) {
            let mut bytes = sample_bytes();
            apply(&mut bytes, &edits);
            if let Ok((h, a)) = load(&bytes) {
                assert_reloads(&h, &a);
            }
        }

        #[test]
        fn random_encoding_mutations_never_panic(edits in prop::collection::vec(edit(), 1..8)) {
            let mut e = mutate::encode(&sample());
            apply(&mut e, &edits);
            if let Some(a) = mutate::decode(&e) {
                check_any(&a);
            }
        }
    }
}

/// Programs that decode fine but break one verifier rule each.
mod hostile {
    use super::*;

    /// `a` is rejected by the verifier with a message containing `needle`, and a well-framed
    /// file holding it reads fine but does not load.
    #[track_caller]
    fn rejected(a: &Artifact, needle: &str) -> VerifyError {
        let err = verify(a).expect_err("the verifier accepted a hostile artifact");
        assert!(err.message.contains(needle), "expected {needle:?} in {err}");
        let bytes = write(a, &header()).expect("writable");
        assert_eq!(read(&bytes).map(|(_, a)| a).as_ref(), Ok(a));
        assert_eq!(load(&bytes), Err(LoadError::Invalid(err.clone())));
        assert!(load(&bytes).unwrap_err().to_string().contains(needle));
        err
    }

    /// The sample with one edit.
    fn sample_with(edit: impl FnOnce(&mut Artifact)) -> Artifact {
        let mut a = sample();
        edit(&mut a);
        a
    }

    /// A module builder with one branch function (no parameters, one register) and a fork
    /// descriptor starting it.
    fn with_fork() -> (ModuleBuilder, FuncId, ForkId) {
        let mut b = ModuleBuilder::new("main", "");
        let f = b.func(
            "branch",
            FuncKind::Branch,
            0,
            1,
            vec![Op::Return { src: r(0) }],
        );
        let fork = b.fork(vec![f]);
        (b, f, fork)
    }

    fn one(b: ModuleBuilder) -> Artifact {
        Artifact {
            modules: vec![b.finish()],
            skills: Vec::new(),
        }
    }

    fn ret() -> Op {
        Op::Return { src: r(0) }
    }

    #[test]
    fn no_module() {
        rejected(
            &Artifact {
                modules: Vec::new(),
                skills: Vec::new(),
            },
            "no module",
        );
    }

    #[test]
    fn register_out_of_range() {
        let e = rejected(
            &single(
                2,
                vec![
                    Op::Move {
                        dst: r(0),
                        src: r(5),
                    },
                    ret(),
                ],
            ),
            "register r5 out of range",
        );
        assert_eq!((e.module, e.func, e.pc), (0, Some(0), Some(0)));
        rejected(
            &single(
                2,
                vec![
                    Op::Move {
                        dst: r(2),
                        src: r(0),
                    },
                    ret(),
                ],
            ),
            "register r2 out of range",
        );
        rejected(
            &single(2, vec![Op::Return { src: r(2) }]),
            "register r2 out of range",
        );
    }

    #[test]
    fn register_span_out_of_range() {
        let make_list = Op::MakeList {
            dst: r(0),
            first: r(1),
            len: 3,
        };
        rejected(&single(3, vec![make_list, ret()]), "out of range");
        let huge = Op::MakeList {
            dst: r(0),
            first: r(u32::MAX - 1),
            len: u32::MAX,
        };
        rejected(&single(3, vec![huge, ret()]), "out of range");
    }

    #[test]
    fn too_many_registers_or_parameters() {
        rejected(&single(verify::MAX_REGS + 1, vec![ret()]), "too large");
        let mut b = ModuleBuilder::new("main", "");
        b.func("block", FuncKind::Block, 3, 2, vec![ret()]);
        b.main(1, vec![ret()]);
        rejected(&one(b), "more parameters than registers");
    }

    #[test]
    fn jump_target_out_of_range() {
        rejected(
            &single(1, vec![Op::Jump { target: 7 }]),
            "jump target 7 out of range",
        );
        let cond = Op::JumpIfNot {
            cond: r(0),
            target: 2,
        };
        rejected(&single(1, vec![cond, ret()]), "jump target 2 out of range");
        let exit = Op::ForNext {
            list: r(0),
            counter: r(0),
            item: r(0),
            index: None,
            exit: 9,
        };
        rejected(&single(1, vec![exit, ret()]), "jump target 9 out of range");
        let catch = Op::TryEnter {
            catch: Some(5),
            finally: None,
            err: r(0),
            pending: r(0),
        };
        rejected(&single(1, vec![catch, ret()]), "jump target 5 out of range");
    }

    #[test]
    fn jump_table_target_out_of_range() {
        let mut b = ModuleBuilder::new("main", "");
        let table = b.table(vec![1, 2]);
        b.main(1, vec![Op::Switch { index: r(0), table }, ret()]);
        rejected(&one(b), "jump target 2 out of range");
    }

    #[test]
    fn one_jump_table_reached_with_different_open_regions() {
        // The second switch uses the same table inside a try region: its targets would be
        // reached both with and without the region open.
        let mut b = ModuleBuilder::new("main", "");
        let table = b.table(vec![5]);
        let code = vec![
            /* 0 */
            Op::JumpIf {
                cond: r(0),
                target: 2,
            },
            /* 1 */ Op::Switch { index: r(0), table },
            /* 2 */
            Op::TryEnter {
                catch: Some(5),
                finally: None,
                err: r(0),
                pending: r(0),
            },
            /* 3 */ Op::Switch { index: r(0), table },
            /* 4 */ ret(),
            /* 5 */ ret(),
        ];
        b.main(1, code);
        rejected(&one(b), "different open regions");
    }

    #[test]
    fn empty_jump_table() {
        let mut b = ModuleBuilder::new("main", "");
        let table = b.table(Vec::new());
        b.main(1, vec![Op::Switch { index: r(0), table }, ret()]);
        rejected(&one(b), "empty jump table");
    }

    #[test]
    fn string_id_out_of_range() {
        let op = Op::GetField {
            dst: r(0),
            src: r(0),
            name: StrId::from_u32(99),
        };
        rejected(&single(1, vec![op, ret()]), "string index 99 out of range");
        // In a table rather than an instruction.
        rejected(
            &sample_with(|a| {
                a.modules[0].consts.push(Const::Str(StrId::from_u32(1000)));
            }),
            "string index 1000 out of range",
        );
        rejected(
            &sample_with(|a| a.modules[1].funcs[FuncId::from_u32(0)].name = StrId::from_u32(77)),
            "string index 77 out of range",
        );
    }

    #[test]
    fn template_id_out_of_range() {
        let op = Op::Format {
            dst: r(0),
            tpl: TplId::from_u32(5),
        };
        rejected(&single(1, vec![op, ret()]), "template index 5 out of range");
        rejected(
            &sample_with(|a| {
                a.modules[0].sessions[SessionId::from_u32(0)].prompt = Some(TplId::from_u32(40))
            }),
            "template index 40 out of range",
        );
    }

    #[test]
    fn constant_id_out_of_range() {
        let op = Op::LoadConst {
            dst: r(0),
            c: ConstId::from_u32(3),
        };
        rejected(&single(1, vec![op, ret()]), "constant index 3 out of range");
    }

    #[test]
    fn function_id_out_of_range() {
        let op = Op::Call {
            func: FuncId::from_u32(9),
            args: r(0),
            argc: 0,
            dst: r(0),
        };
        rejected(&single(2, vec![op, ret()]), "function index 9 out of range");
        let (mut b, _, fork) = with_fork();
        b.m.forks[fork].branches[0] = FuncId::from_u32(12);
        b.main(
            1,
            vec![
                Op::Fork { fork, handle: r(0) },
                Op::Join {
                    handle: r(0),
                    dst: r(0),
                },
                ret(),
            ],
        );
        rejected(&one(b), "function index 12 out of range");
        let mut b = ModuleBuilder::new("main", "");
        b.main(1, vec![ret()]);
        b.m.entry = FuncId::from_u32(1);
        rejected(&one(b), "entry function index 1 out of range");
    }

    #[test]
    fn fork_id_out_of_range() {
        let op = Op::Fork {
            fork: ForkId::from_u32(2),
            handle: r(0),
        };
        rejected(&single(1, vec![op, ret()]), "fork index 2 out of range");
    }

    #[test]
    fn table_id_out_of_range() {
        let op = Op::Switch {
            index: r(0),
            table: TableId::from_u32(1),
        };
        rejected(&single(1, vec![op]), "jump table index 1 out of range");
    }

    #[test]
    fn other_ids_out_of_range() {
        let cases = [
            (
                Op::MakeRecord {
                    dst: r(0),
                    first: r(0),
                    keys: KeysId::from_u32(0),
                },
                "key list index 0",
            ),
            (
                Op::Session {
                    dst: r(0),
                    desc: SessionId::from_u32(0),
                    ctx: r(0),
                },
                "session index 0",
            ),
            (
                Op::Choose {
                    dst: r(0),
                    choice: ChoiceId::from_u32(0),
                },
                "choice index 0",
            ),
            (
                Op::Ask {
                    dst: r(0),
                    input: InputId::from_u32(0),
                },
                "input index 0",
            ),
            (
                Op::LoadInput {
                    dst: r(0),
                    input: InputId::from_u32(0),
                },
                "input index 0",
            ),
            (
                Op::SetOutput {
                    output: OutputId::from_u32(0),
                    src: r(0),
                },
                "output index 0",
            ),
            (
                Op::Invoke {
                    prog: ProgId::from_u32(0),
                    args: r(0),
                    dst: r(0),
                },
                "program index 0",
            ),
        ];
        for (op, needle) in cases {
            rejected(&single(1, vec![op, ret()]), needle);
        }
        rejected(
            &sample_with(|a| {
                a.modules[0].sessions[SessionId::from_u32(0)].agent = Some(AgentId::from_u32(3))
            }),
            "agent index 3",
        );
    }

    #[test]
    fn imported_module_out_of_range() {
        rejected(
            &sample_with(|a| a.modules[0].programs[ProgId::from_u32(0)].module = 2),
            "module 2, which does not exist",
        );
    }

    #[test]
    fn last_instruction_not_a_terminator() {
        let load = Op::LoadConst {
            dst: r(0),
            c: ConstId::from_u32(0),
        };
        let mut a = single(1, vec![load]);
        a.modules[0].consts.push(Const::Null);
        rejected(&a, "falls off the end");
        // A conditional jump or a loop head may continue to the next instruction too.
        rejected(
            &single(
                1,
                vec![Op::JumpIf {
                    cond: r(0),
                    target: 0,
                }],
            ),
            "falls off the end",
        );
        rejected(
            &sample_with(|a| {
                let f = &mut a.modules[1].funcs[FuncId::from_u32(0)];
                f.code.pop();
                f.locs.pop();
            }),
            "falls off the end",
        );
    }

    #[test]
    fn empty_code() {
        rejected(&single(1, Vec::new()), "no code");
    }

    #[test]
    fn locs_length_mismatch() {
        rejected(
            &sample_with(|a| {
                a.modules[0].funcs[FuncId::from_u32(4)].locs.pop();
            }),
            "debug table length",
        );
        rejected(
            &sample_with(|a| {
                a.modules[1].funcs[FuncId::from_u32(0)].code.pop();
            }),
            "debug table length",
        );
        rejected(
            &sample_with(|a| {
                a.modules[0].funcs[FuncId::from_u32(0)]
                    .locs
                    .push(Loc::default())
            }),
            "debug table length",
        );
    }

    #[test]
    fn try_exit_without_try_enter() {
        rejected(
            &single(1, vec![Op::TryExit, ret()]),
            "try_exit without an open try region",
        );
    }

    #[test]
    fn try_enter_without_targets() {
        let op = Op::TryEnter {
            catch: None,
            finally: None,
            err: r(0),
            pending: r(0),
        };
        rejected(
            &single(1, vec![op, Op::TryExit, ret()]),
            "without a catch or finally",
        );
    }

    #[test]
    fn different_open_regions_at_a_merge_point() {
        // pc 3 is reached from the jump with no region open and from pc 2 inside one.
        let code = vec![
            /* 0 */
            Op::JumpIf {
                cond: r(0),
                target: 3,
            },
            /* 1 */ Op::Jump { target: 2 },
            /* 2 */
            Op::TryEnter {
                catch: None,
                finally: Some(4),
                err: r(1),
                pending: r(2),
            },
            /* 3 */ ret(),
            /* 4 */ Op::EndFinally { pending: r(2) },
            /* 5 */ ret(),
        ];
        rejected(&single(3, code), "different open regions");
        // A loop whose body opens a region and jumps back without leaving it.
        let code = vec![
            /* 0 */
            Op::TryEnter {
                catch: Some(2),
                finally: None,
                err: r(0),
                pending: r(0),
            },
            /* 1 */ Op::Jump { target: 0 },
            /* 2 */ ret(),
        ];
        rejected(&single(1, code), "different open regions");
    }

    #[test]
    fn join_not_matching_its_fork() {
        let (mut b, _, fork) = with_fork();
        b.main(
            2,
            vec![
                Op::Fork { fork, handle: r(0) },
                Op::Join {
                    handle: r(1),
                    dst: r(1),
                },
                ret(),
            ],
        );
        rejected(&one(b), "join does not match");
        // Joined in the wrong order.
        let (mut b, _, fork) = with_fork();
        b.main(
            2,
            vec![
                Op::Fork { fork, handle: r(0) },
                Op::Fork { fork, handle: r(1) },
                Op::Join {
                    handle: r(0),
                    dst: r(0),
                },
                Op::Join {
                    handle: r(1),
                    dst: r(1),
                },
                ret(),
            ],
        );
        rejected(&one(b), "join does not match");
        rejected(
            &single(
                1,
                vec![
                    Op::Join {
                        handle: r(0),
                        dst: r(0),
                    },
                    ret(),
                ],
            ),
            "join does not match",
        );
        // A fork opened inside a try region cannot be joined after leaving it.
        let (mut b, _, fork) = with_fork();
        b.main(
            2,
            vec![
                Op::TryEnter {
                    catch: Some(5),
                    finally: None,
                    err: r(1),
                    pending: r(1),
                },
                Op::Fork { fork, handle: r(0) },
                Op::TryExit,
                Op::Join {
                    handle: r(0),
                    dst: r(0),
                },
                ret(),
                /* 5 */ Op::TryExit,
                ret(),
            ],
        );
        rejected(&one(b), "try_exit without an open try region");
    }

    #[test]
    fn leaving_with_an_open_fork() {
        let (mut b, _, fork) = with_fork();
        b.main(1, vec![Op::Fork { fork, handle: r(0) }, ret()]);
        rejected(&one(b), "fork not joined");
        let (mut b, _, fork) = with_fork();
        b.main(
            1,
            vec![Op::Fork { fork, handle: r(0) }, Op::Throw { msg: r(0) }],
        );
        rejected(&one(b), "fork not joined");
    }

    #[test]
    fn call_arity_mismatch() {
        let mut b = ModuleBuilder::new("main", "");
        let block = b.func("block", FuncKind::Block, 1, 1, vec![ret()]);
        b.main(
            4,
            vec![
                Op::Call {
                    func: block,
                    args: r(0),
                    argc: 2,
                    dst: r(2),
                },
                ret(),
            ],
        );
        rejected(&one(b), "passes 2 argument(s) to f0 which takes 1");
    }

    #[test]
    fn call_result_needs_two_registers() {
        // Call writes dst and dst+1: dst may not be the last register.
        let mut b = ModuleBuilder::new("main", "");
        let block = b.func("block", FuncKind::Block, 0, 1, vec![ret()]);
        let call = |dst| Op::Call {
            func: block,
            args: r(0),
            argc: 0,
            dst: r(dst),
        };
        b.main(3, vec![call(1), ret()]);
        verify(&one(b)).expect("dst = r1 of 3 registers is fine");
        let mut b = ModuleBuilder::new("main", "");
        b.func("block", FuncKind::Block, 0, 1, vec![ret()]);
        b.main(3, vec![call(2), ret()]);
        rejected(&one(b), "registers r2..+2 out of range");
    }

    #[test]
    fn call_into_a_non_block() {
        let (mut b, branch, _) = with_fork();
        let call = |func| Op::Call {
            func,
            args: r(0),
            argc: 0,
            dst: r(0),
        };
        b.main(2, vec![call(branch), ret()]);
        rejected(&one(b), "not a block");
        let mut b = ModuleBuilder::new("main", "");
        let main = FuncId::from_u32(0);
        b.main(2, vec![call(main), ret()]);
        rejected(&one(b), "not a block");
    }

    #[test]
    fn fork_of_a_non_branch() {
        let mut b = ModuleBuilder::new("main", "");
        let block = b.func("block", FuncKind::Block, 0, 1, vec![ret()]);
        let fork = b.fork(vec![block]);
        b.main(
            1,
            vec![
                Op::Fork { fork, handle: r(0) },
                Op::Join {
                    handle: r(0),
                    dst: r(0),
                },
                ret(),
            ],
        );
        rejected(&one(b), "not a branch function");
    }

    #[test]
    fn fork_branch_taking_parameters() {
        let (mut b, branch, fork) = with_fork();
        b.m.funcs[branch].params = 1;
        b.main(
            1,
            vec![
                Op::Fork { fork, handle: r(0) },
                Op::Join {
                    handle: r(0),
                    dst: r(0),
                },
                ret(),
            ],
        );
        rejected(&one(b), "takes parameters");
    }

    #[test]
    fn fork_each_body_with_the_wrong_parameter_count() {
        for params in [0, 1, 3] {
            let mut b = ModuleBuilder::new("main", "");
            let body = b.func("body", FuncKind::Branch, params, 3, vec![ret()]);
            let fork = b.fork(vec![body]);
            b.main(
                2,
                vec![
                    Op::ForkEach {
                        fork,
                        list: r(0),
                        handle: r(1),
                    },
                    Op::Join {
                        handle: r(1),
                        dst: r(0),
                    },
                    ret(),
                ],
            );
            rejected(&one(b), "exactly one body function taking (item, index)");
        }
        // Two bodies.
        let a = sample_with(|a| {
            let fork = ForkId::from_u32(1);
            let m = &mut a.modules[0];
            let body = m.forks[fork].branches[0];
            m.forks[fork].branches.push(body);
            m.forks[fork].names.push(None);
        });
        rejected(&a, "exactly one body function");
    }

    #[test]
    fn branch_forked_from_two_functions() {
        let (mut b, _, fork) = with_fork();
        let code = vec![
            Op::Fork { fork, handle: r(0) },
            Op::Join {
                handle: r(0),
                dst: r(0),
            },
            ret(),
        ];
        b.func("block", FuncKind::Block, 0, 1, code.clone());
        b.main(1, code);
        rejected(&one(b), "forked from two functions");
    }

    #[test]
    fn branches_nested_in_a_cycle() {
        // Two branch functions forking each other: neither ever reaches the program body.
        let mut b = ModuleBuilder::new("main", "");
        let f0 = FuncId::from_u32(0);
        let f1 = FuncId::from_u32(1);
        let fork0 = b.fork(vec![f0]);
        let fork1 = b.fork(vec![f1]);
        let body = |fork| {
            vec![
                Op::Fork { fork, handle: r(0) },
                Op::Join {
                    handle: r(0),
                    dst: r(0),
                },
                ret(),
            ]
        };
        b.func("a", FuncKind::Branch, 0, 1, body(fork1));
        b.func("b", FuncKind::Branch, 0, 1, body(fork0));
        b.main(1, vec![ret()]);
        rejected(&one(b), "nested in a cycle");
    }

    #[test]
    fn unused_fork_descriptor_with_a_dangling_branch() {
        rejected(
            &sample_with(|a| {
                a.modules[0].forks.push(ForkDesc {
                    strategy: Strategy::All,
                    count: 1,
                    on_fail: OnFail::Continue,
                    branches: vec![FuncId::from_u32(500)],
                    names: vec![None],
                });
            }),
            "function index 500 out of range",
        );
    }

    #[test]
    fn fork_descriptor_inconsistent() {
        rejected(
            &sample_with(|a| {
                a.modules[0].forks[ForkId::from_u32(0)].names.pop();
            }),
            "branch names",
        );
        rejected(
            &sample_with(|a| a.modules[0].forks[ForkId::from_u32(1)].count = 0),
            "count is zero",
        );
    }

    /// Sets string `from` of module 0 to `to` wherever the tables use it.
    fn renamed(from: &str, to: &str) -> Artifact {
        sample_with(|a| {
            for s in a.modules[0].strings.values_mut() {
                if s == from {
                    *s = to.into();
                }
            }
        })
    }

    #[test]
    fn names_that_would_become_paths() {
        for bad in ["../x", "/etc/passwd", "a/b", "..", "x\\y", "", "a\0b"] {
            rejected(&renamed("writer", bad), "agent name");
            rejected(&renamed("topic", bad), "input name");
            rejected(&renamed("result", bad), "output name");
            rejected(&renamed("pair_up", bad), "block name");
            rejected(&renamed("summarize", bad), "imported program name");
        }
        // A variable's debug name becomes a binding file's name.
        rejected(
            &sample_with(|a| {
                let m = &mut a.modules[0];
                let s = m.strings.push("../../escape".into());
                let entry = m.entry;
                m.funcs[entry]
                    .vars
                    .push((r(0), s, bytecode_spec::BindingKind::Let));
            }),
            "variable name",
        );
        rejected(
            &sample_with(|a| a.modules[0].name = "../up".into()),
            "the program name",
        );
        rejected(
            &sample_with(|a| a.modules[1].import_path = "@../..".into()),
            "is not @handle/slug",
        );
        for path in ["/tmp/elsewhere", "../outside", "a/../../b"] {
            rejected(
                &sample_with(|a| {
                    let m = &mut a.modules[0];
                    let p = m.strings.push(path.into());
                    m.agents[AgentId::from_u32(0)].persist = Persist::Path(p);
                }),
                "persist path",
            );
        }
        // Relative persist paths, hyphenated names and the compiler's `$index` are fine.
        verify(&sample_with(|a| {
            let m = &mut a.modules[0];
            let p = m.strings.push(".prose/custom/shared-agent/".into());
            m.agents[AgentId::from_u32(0)].persist = Persist::Path(p);
        }))
        .expect("relative persist path");
        verify(&renamed("writer", "security-reviewer")).expect("hyphenated agent");
    }

    #[test]
    fn choice_without_options() {
        rejected(
            &sample_with(|a| a.modules[0].choices[ChoiceId::from_u32(0)].options.clear()),
            "no options",
        );
    }

    #[test]
    fn get_up_deeper_than_the_static_nesting() {
        // A block's static link is the program body, which has none.
        let mut b = ModuleBuilder::new("main", "");
        let get = Op::GetUp {
            dst: r(0),
            depth: 2,
            reg: r(0),
        };
        b.func("block", FuncKind::Block, 0, 1, vec![get, ret()]);
        b.main(1, vec![ret()]);
        rejected(&one(b), "no frame 2 static link(s) out");
        // The program body has no static link at all.
        let set = Op::SetUp {
            depth: 1,
            reg: r(0),
            src: r(0),
        };
        rejected(
            &single(1, vec![set, ret()]),
            "no frame 1 static link(s) out",
        );
        // A branch nobody forks has no frame to reach either.
        let mut b = ModuleBuilder::new("main", "");
        let get = Op::GetUp {
            dst: r(0),
            depth: 1,
            reg: r(0),
        };
        b.func("orphan", FuncKind::Branch, 0, 1, vec![get, ret()]);
        b.main(1, vec![ret()]);
        rejected(&one(b), "no frame 1 static link(s) out");
    }

    #[test]
    fn get_up_register_out_of_range_in_the_outer_frame() {
        let (mut b, branch, fork) = with_fork();
        b.m.funcs[branch].code.insert(
            0,
            Op::GetUp {
                dst: r(0),
                depth: 1,
                reg: r(4),
            },
        );
        b.m.funcs[branch].locs.push(Loc::default());
        b.main(
            4,
            vec![
                Op::Fork { fork, handle: r(0) },
                Op::Join {
                    handle: r(0),
                    dst: r(0),
                },
                ret(),
            ],
        );
        rejected(
            &one(b),
            "register r4 out of range in the frame 1 link(s) out",
        );
    }

    #[test]
    fn get_up_with_depth_zero() {
        let get = Op::GetUp {
            dst: r(0),
            depth: 0,
            reg: r(0),
        };
        rejected(&single(1, vec![get, ret()]), "depth of at least 1");
    }

    #[test]
    fn template_variable_register_out_of_range_at_its_use_site() {
        let mut b = ModuleBuilder::new("main", "");
        let parts = vec![b.lit("x = "), b.var(0, 5, "x")];
        let tpl = b.tpl(parts);
        b.main(2, vec![Op::Format { dst: r(0), tpl }, ret()]);
        rejected(&one(b), "register r5");
        // The same template is fine where the frame is large enough.
        let mut b = ModuleBuilder::new("main", "");
        let parts = vec![b.lit("x = "), b.var(0, 5, "x")];
        let tpl = b.tpl(parts);
        b.main(6, vec![Op::Format { dst: r(0), tpl }, ret()]);
        verify(&one(b)).expect("r5 exists in a 6-register frame");
        // Reached through a session, from a branch, one static link out (main has 19).
        let a = sample_with(|a| {
            let m = &mut a.modules[0];
            let name = m.funcs[m.entry].name;
            let prompt = m.templates.push(Template {
                parts: vec![TplPart::Var {
                    depth: 1,
                    reg: r(19),
                    path: Vec::new(),
                    name,
                }],
            });
            let mut sd = m.sessions[SessionId::from_u32(0)].clone();
            (sd.prompt, sd.system) = (Some(prompt), None);
            let desc = m.sessions.push(sd);
            let branch = m.forks[ForkId::from_u32(0)].branches[1];
            let f = &mut m.funcs[branch];
            f.code.insert(
                f.code.len() - 1,
                Op::Session {
                    dst: r(0),
                    desc,
                    ctx: r(0),
                },
            );
            f.locs.push(Loc::default());
        });
        rejected(&a, "register r19");
    }

    #[test]
    fn descriptor_templates_checked_at_their_use_sites() {
        // A session, a choice and an input description, each reading r3 of a 3-register main.
        /// Adds a descriptor using the template and returns the instruction using it.
        type Use = fn(&mut ModuleBuilder, TplId) -> Op;
        let cases: [(&str, Use); 3] = [
            ("session sess0 reads register r3", |b, t| {
                let desc = b.m.sessions.push(SessionDesc {
                    kind: SessionKind::Fresh,
                    agent: None,
                    label: None,
                    prompt: None,
                    system: None,
                    model: None,
                    context_labels: Vec::new(),
                    permissions: vec![Permission {
                        kind: StrId::from_u32(0),
                        value: PermissionValue::Patterns(vec![t]),
                    }],
                    skills: Vec::new(),
                    retry: 0,
                    backoff: Backoff::Linear,
                    line: 1,
                });
                Op::Session {
                    dst: r(0),
                    desc,
                    ctx: r(0),
                }
            }),
            ("choice choice0 reads register r3", |b, t| {
                let criteria = b.tpl(Vec::new());
                let choice = b.m.choices.push(ChoiceDesc {
                    criteria,
                    options: vec![criteria, t],
                });
                Op::Choose { dst: r(0), choice }
            }),
            ("input in0 reads register r3", |b, t| {
                let input = b.input("q", Some(t), false);
                Op::Ask { dst: r(0), input }
            }),
        ];
        for (needle, make) in cases {
            let mut b = ModuleBuilder::new("main", "");
            let parts = vec![b.var(0, 1, "a"), b.var(0, 3, "b")];
            let t = b.tpl(parts);
            let op = make(&mut b, t);
            b.main(3, vec![op, ret()]);
            rejected(&one(b), needle);
        }
    }

    #[test]
    fn template_variable_deeper_than_the_static_nesting() {
        let mut b = ModuleBuilder::new("main", "");
        let parts = vec![b.var(1, 0, "x")];
        let cond = b.tpl(parts);
        b.main(1, vec![Op::Evaluate { dst: r(0), cond }, ret()]);
        rejected(&one(b), "no frame 1 static link(s) out");
    }

    #[test]
    fn invoke_with_too_few_argument_registers() {
        // The imported program takes one parameter, so `args` must leave room for it.
        rejected(
            &sample_with(|a| {
                let main = a.modules[0].entry;
                let f = &mut a.modules[0].funcs[main];
                let nregs = f.nregs;
                for op in &mut f.code {
                    if let Op::Invoke { args, .. } = op {
                        *args = r(nregs);
                    }
                }
            }),
            "out of range",
        );
    }

    #[test]
    fn import_cycle() {
        let e = rejected(
            &sample_with(|a| {
                let alias = a.modules[1].strings.push("again".into());
                a.modules[1].programs.push(ProgramRef { alias, module: 0 });
            }),
            "imported programs form a cycle",
        );
        assert!(e.module <= 1);
        // A program importing itself.
        rejected(
            &sample_with(|a| {
                let alias = a.modules[1].strings.push("me".into());
                a.modules[1].programs.push(ProgramRef { alias, module: 1 });
            }),
            "cycle",
        );
    }

    #[test]
    fn entry_function_not_main() {
        let mut b = ModuleBuilder::new("main", "");
        b.func("block", FuncKind::Block, 0, 1, vec![ret()]);
        rejected(&one(b), "the entry function must be a main function");
        let (mut b, branch, _) = with_fork();
        b.main(1, vec![ret()]);
        b.m.entry = branch;
        rejected(&one(b), "the entry function must be a main function");
        // Nor may it take parameters.
        rejected(
            &sample_with(|a| a.modules[1].funcs[FuncId::from_u32(0)].params = 1),
            "without parameters",
        );
    }

    #[test]
    fn a_second_main_function() {
        rejected(
            &sample_with(|a| {
                let extra = a.modules[0].funcs[a.modules[0].entry].clone();
                a.modules[0].funcs.push(extra);
            }),
            "only the entry function may be a main function",
        );
    }

    #[test]
    fn a_resume_session_without_an_agent() {
        rejected(
            &sample_with(|a| {
                for sd in a.modules[0].sessions.values_mut() {
                    sd.kind = SessionKind::Resume;
                    sd.agent = None;
                }
            }),
            "resume session names no agent",
        );
    }

    #[test]
    fn a_parameter_description_that_reads_a_variable() {
        rejected(
            &sample_with(|a| {
                let m = &mut a.modules[0];
                let name = m.strings.push("x".into());
                let t = m.templates.push(Template {
                    parts: vec![TplPart::Var {
                        depth: 0,
                        reg: r(0),
                        path: vec![],
                        name,
                    }],
                });
                let input = m.inputs.push(InputDesc {
                    name,
                    description: Some(t),
                    parameter: true,
                });
                let _ = input;
            }),
            "rendered outside a frame but reads a variable",
        );
    }
}

/// Loading a small hostile file must cost memory and time in proportion to its size. Each
/// test builds a program a few hundred kilobytes long whose naive verification would take
/// quadratic time or memory.
mod cost {
    use super::*;
    use std::sync::mpsc;
    use std::time::Duration;

    /// Verifies `a` on another thread, failing the test if it takes longer than `secs`
    /// (the linear verifier needs a small fraction of that even in a debug build).
    fn verify_within(secs: u64, a: Artifact) -> Result<(), VerifyError> {
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(verify(&a));
        });
        rx.recv_timeout(Duration::from_secs(secs))
            .expect("verification took too long or panicked")
    }

    /// `n` nested try regions, each with its own finally clause, as one function of
    /// `2n + 1` instructions; also returns the instruction count.
    pub fn nested_trys(n: u32) -> (Artifact, usize) {
        let mut code: Vec<Op> = (0..n)
            .map(|i| Op::TryEnter {
                catch: None,
                finally: Some(n + 1 + i),
                err: r(0),
                pending: r(0),
            })
            .collect();
        code.extend((0..=n).map(|_| Op::Return { src: r(0) }));
        let len = code.len();
        (single(1, code), len)
    }

    #[test]
    fn deeply_nested_regions_take_linear_memory() {
        // Keeping a copy of the open-region stack at every instruction would need about
        // n^2 / 2 stack entries (200 MB here).
        let (a, len) = nested_trys(5000);
        let (result, cost) = alloc::measure(|| verify(&a));
        result.expect("balanced nesting is valid");
        assert!(
            cost.total < 200 * len,
            "verifying {len} instructions allocated {} bytes",
            cost.total
        );
    }

    #[test]
    fn a_long_import_chain_does_not_exhaust_the_stack() {
        // Module i imports module i + 1. A recursive cycle search would need one stack frame
        // per module; the verifier runs here on a thread with a small stack.
        const N: u32 = 20_000;
        let modules = (0..N)
            .map(|i| {
                let mut b = ModuleBuilder::new("m", "./m.prose");
                if i + 1 < N {
                    b.import("next", i + 1);
                }
                b.main(1, vec![Op::Return { src: r(0) }]);
                b.finish()
            })
            .collect();
        let a = Artifact {
            modules,
            skills: Vec::new(),
        };
        let verified = std::thread::Builder::new()
            .stack_size(256 << 10)
            .spawn(move || verify(&a).map(|_| a))
            .unwrap()
            .join()
            .expect("the verifier did not crash");
        let mut a = verified.expect("a long chain is valid");
        // Closing the chain into a cycle is found, however long it is.
        let last = a.modules.len() - 1;
        let alias = a.modules[last].strings.push("back".into());
        a.modules[last]
            .programs
            .push(ProgramRef { alias, module: 0 });
        let err = std::thread::Builder::new()
            .stack_size(256 << 10)
            .spawn(move || verify(&a))
            .unwrap()
            .join()
            .expect("the verifier did not crash")
            .expect_err("the cycle is found");
        assert!(err.message.contains("cycle"), "{err}");
    }

    #[test]
    fn one_jump_table_used_by_many_switches() {
        // Each of n switches jumps through the same table of n + 1 targets.
        const N: u32 = 100_000;
        let mut b = ModuleBuilder::new("main", "");
        let table = b.table((0..=N).collect());
        let mut code: Vec<Op> = (0..N).map(|_| Op::Switch { index: r(0), table }).collect();
        code.push(Op::Return { src: r(0) });
        b.main(1, code);
        verify_within(
            20,
            Artifact {
                modules: vec![b.finish()],
                skills: Vec::new(),
            },
        )
        .expect("valid");
    }

    #[test]
    fn one_large_template_used_many_times() {
        // n instructions format, evaluate or ask about templates of n variables each, directly
        // and through a session, a choice and an input description.
        const N: u32 = 50_000;
        let mut b = ModuleBuilder::new("main", "");
        let parts = (0..N).map(|i| b.var(0, i % 3, "x")).collect();
        let tpl = b.tpl(parts);
        let desc = b.m.sessions.push(SessionDesc {
            kind: SessionKind::Fresh,
            agent: None,
            label: None,
            prompt: Some(tpl),
            system: Some(tpl),
            model: None,
            context_labels: Vec::new(),
            permissions: Vec::new(),
            skills: Vec::new(),
            retry: 0,
            backoff: Backoff::None,
            line: 1,
        });
        let choice = b.m.choices.push(ChoiceDesc {
            criteria: tpl,
            options: vec![tpl, tpl],
        });
        let input = b.input("q", Some(tpl), false);
        let mut code = Vec::new();
        for i in 0..N {
            code.push(match i % 5 {
                0 => Op::Format { dst: r(0), tpl },
                1 => Op::Evaluate {
                    dst: r(0),
                    cond: tpl,
                },
                2 => Op::Session {
                    dst: r(0),
                    desc,
                    ctx: r(1),
                },
                3 => Op::Choose { dst: r(0), choice },
                _ => Op::Ask { dst: r(0), input },
            });
        }
        code.push(Op::Return { src: r(0) });
        b.main(3, code);
        // Many sessions and choices sharing the template, too.
        for _ in 0..N {
            let sd = b.m.sessions[desc].clone();
            b.m.sessions.push(sd);
            b.m.choices.push(b.m.choices[choice].clone());
        }
        verify_within(
            20,
            Artifact {
                modules: vec![b.finish()],
                skills: Vec::new(),
            },
        )
        .expect("valid");
    }

    #[test]
    fn one_large_fork_started_many_times() {
        // n fork/join pairs in one function, all starting the same n branches.
        const N: u32 = 50_000;
        let mut b = ModuleBuilder::new("main", "");
        let branches = (0..N)
            .map(|_| {
                b.func(
                    "branch",
                    FuncKind::Branch,
                    0,
                    1,
                    vec![Op::Return { src: r(0) }],
                )
            })
            .collect();
        let fork = b.fork(branches);
        let mut code = Vec::new();
        for _ in 0..N {
            code.push(Op::Fork { fork, handle: r(0) });
            code.push(Op::Join {
                handle: r(0),
                dst: r(0),
            });
        }
        code.push(Op::Return { src: r(0) });
        b.main(1, code);
        verify_within(
            20,
            Artifact {
                modules: vec![b.finish()],
                skills: Vec::new(),
            },
        )
        .expect("valid");
    }

    #[test]
    fn a_long_chain_of_nested_branches() {
        // Branch i forks branch i + 1: n functions nested n deep.
        const N: u32 = 50_000;
        let mut b = ModuleBuilder::new("main", "");
        let forks: Vec<ForkId> = (0..N).map(|i| b.fork(vec![FuncId::from_u32(i)])).collect();
        for i in 0..N {
            let code = if i + 1 < N {
                let fork = forks[i as usize + 1];
                vec![
                    Op::GetUp {
                        dst: r(0),
                        depth: (i + 1).min(255) as u8,
                        reg: r(0),
                    },
                    Op::Fork { fork, handle: r(0) },
                    Op::Join {
                        handle: r(0),
                        dst: r(0),
                    },
                    Op::Return { src: r(0) },
                ]
            } else {
                vec![Op::Return { src: r(0) }]
            };
            b.func("branch", FuncKind::Branch, 0, 1, code);
        }
        let fork = forks[0];
        b.main(
            1,
            vec![
                Op::Fork { fork, handle: r(0) },
                Op::Join {
                    handle: r(0),
                    dst: r(0),
                },
                Op::Return { src: r(0) },
            ],
        );
        verify_within(
            20,
            Artifact {
                modules: vec![b.finish()],
                skills: Vec::new(),
            },
        )
        .expect("valid");
    }

    #[test]
    fn many_invokes_of_a_program_with_many_inputs() {
        const N: u32 = 50_000;
        let mut lib = ModuleBuilder::new("lib", "./lib.prose");
        for _ in 0..N {
            lib.input("q", None, false);
        }
        lib.input("p", None, true);
        lib.main(1, vec![Op::Return { src: r(0) }]);
        let mut b = ModuleBuilder::new("main", "");
        let prog = b.import("lib", 1);
        let mut code: Vec<Op> = (0..N)
            .map(|_| Op::Invoke {
                prog,
                args: r(0),
                dst: r(0),
            })
            .collect();
        code.push(Op::Return { src: r(0) });
        b.main(1, code);
        verify_within(
            20,
            Artifact {
                modules: vec![b.finish(), lib.finish()],
                skills: Vec::new(),
            },
        )
        .expect("valid");
    }
}
