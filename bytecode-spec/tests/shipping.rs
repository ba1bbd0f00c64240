//! What makes an artifact shippable: the skills it carries (well-formed bundles load and are
//! found by module and name; hostile ones are refused, one test per rule) and its signature
//! (each of unsigned, foreign, altered and trusted is told apart, and signing keeps the file
//! loadable).

// The loader tests use the rest of the support module.
#[allow(dead_code)]
mod support;

use bytecode_spec::artifact::{
    load, read, split_signature, with_signature, write, LoadError, HEADER_LEN, MAX_SIGNATURE,
};
use bytecode_spec::bundle::{
    BundledFile, BundledSkill, SkillImport, MAX_FILE, MAX_FILES, MAX_SKILL_BYTES, MAX_SKILL_FILE,
    SKILL_FILE,
};
use bytecode_spec::signature::{check, sign, signer, Trust, TrustKey};
use bytecode_spec::verify::verify;
use bytecode_spec::Artifact;
use support::{header, sample};

const INSTRUCTIONS: &str =
    "---\nname: web-search\ndescription: Search the web\n---\nSearch before you answer.\n";

fn skill(name: &str, files: Vec<BundledFile>) -> BundledSkill {
    BundledSkill {
        name: name.into(),
        source: "github:acme/skills".into(),
        origin: "https://github.com/acme/skills@0123456789abcdef skills/web-search".into(),
        files,
    }
}

/// The sample program with one skill, `web-search`, imported by its main module and carried
/// with a script beside its `SKILL.md`.
fn with_skill() -> Artifact {
    let mut a = sample();
    a.skills.push(skill(
        "web-search",
        vec![
            BundledFile::new(SKILL_FILE, INSTRUCTIONS.as_bytes().to_vec()),
            BundledFile::new("scripts/search.sh", b"#!/bin/sh\ncurl \"$1\"\n".to_vec()),
        ],
    ));
    let name = a.modules[0].strings.push("web-search".into());
    a.modules[0].skills.push(SkillImport { name, skill: 0 });
    a
}

/// Writes `a` (the writer does not verify) and expects the loader to refuse it with a message
/// containing `needle`.
fn refused(a: &Artifact, needle: &str) {
    let bytes = write(a, &header()).expect("writable");
    match load(&bytes) {
        Err(LoadError::Invalid(e)) => assert!(
            e.message.contains(needle),
            "expected {needle:?}, got: {}",
            e.message
        ),
        Err(e) => panic!("refused for another reason: {e}"),
        Ok(_) => panic!("a hostile bundle loaded (expected {needle:?})"),
    }
}

mod bundle {
    use super::*;

    #[test]
    fn a_bundled_skill_loads_and_is_found_by_module_and_name() {
        let bytes = write(&with_skill(), &header()).expect("writable");
        let (_, verified) = load(&bytes).expect("loads");
        assert_eq!(verified.skills().len(), 1);
        let s = verified
            .skill(0, "web-search")
            .expect("imported by module 0");
        assert_eq!(s.skill_md(), Some(INSTRUCTIONS));
        assert_eq!(
            s.file("scripts/search.sh").map(|f| f.bytes.as_slice()),
            Some(&b"#!/bin/sh\ncurl \"$1\"\n"[..])
        );
        assert_eq!(s.source, "github:acme/skills");
        // Another module, or another name, does not see it.
        assert!(verified.skill(1, "web-search").is_none());
        assert!(verified.skill(0, "summarizer").is_none());
        assert!(verified.skill(9, "web-search").is_none());
    }

    #[test]
    fn the_listing_shows_the_bundle() {
        let a = with_skill();
        let text = bytecode_spec::dis::disassemble(&header(), &a);
        assert!(text.contains("  skills    1\n"), "{text}");
        assert!(
            text.contains("    web-search -> skill 0 web-search\n"),
            "{text}"
        );
        assert!(
            text.contains("skill 0 web-search (from \"github:acme/skills\")\n"),
            "{text}"
        );
        let md = &a.skills[0].files[0];
        assert!(
            text.contains(&format!(
                "    SKILL.md {} bytes sha256 {}\n",
                md.bytes.len(),
                bytecode_spec::bundle::hex(&md.sha256)
            )),
            "{text}"
        );
    }

    #[test]
    fn path_traversal_names_are_refused() {
        for name in [
            "../escape.sh",
            "/etc/passwd",
            "a/../../b",
            "a\\..\\b",
            "./x",
            "a//b",
        ] {
            let mut a = with_skill();
            a.skills[0].files[1] = BundledFile::new(name, b"x".to_vec());
            a.skills[0].files.sort_by(|x, y| x.name.cmp(&y.name));
            refused(&a, "not a safe relative path");
        }
    }

    #[test]
    fn a_skill_name_that_is_a_path_is_refused() {
        let mut a = with_skill();
        a.skills[0].name = "../../outside".into();
        let m = &mut a.modules[0];
        let id = m.skills[0].name;
        m.strings[id] = "../../outside".into();
        refused(&a, "not one plain path component");
    }

    #[test]
    fn oversize_files_and_skills_are_refused() {
        let mut a = with_skill();
        a.skills[0].files[1] = BundledFile::new("scripts/search.sh", vec![0; MAX_FILE + 1]);
        refused(&a, "more than the");

        let mut a = with_skill();
        let md = format!("{INSTRUCTIONS}{}", "x".repeat(MAX_SKILL_FILE));
        a.skills[0].files[0] = BundledFile::new(SKILL_FILE, md.into_bytes());
        refused(&a, "more than the");

        // Each file under its cap, all of them over the skill's.
        let mut a = with_skill();
        let n = MAX_SKILL_BYTES / MAX_FILE + 1;
        for i in 0..n {
            a.skills[0]
                .files
                .push(BundledFile::new(format!("z/{i:03}"), vec![0; MAX_FILE]));
        }
        refused(&a, "add up to more than");

        let mut a = with_skill();
        for i in 0..MAX_FILES {
            a.skills[0]
                .files
                .push(BundledFile::new(format!("z/{i:04}"), Vec::new()));
        }
        refused(&a, "files, more than the");
    }

    #[test]
    fn a_hash_mismatch_is_refused() {
        let mut a = with_skill();
        a.skills[0].files[1].bytes = b"#!/bin/sh\nrm -rf ~\n".to_vec();
        refused(&a, "does not match its SHA-256");
    }

    #[test]
    fn duplicate_and_unsorted_names_are_refused() {
        let mut a = with_skill();
        let dup = a.skills[0].files[1].clone();
        a.skills[0].files.push(dup);
        refused(&a, "appears twice");

        let mut a = with_skill();
        a.skills[0].files.reverse();
        refused(&a, "not sorted");
    }

    #[test]
    fn a_skill_without_instructions_is_refused() {
        let mut a = with_skill();
        a.skills[0].files.remove(0);
        refused(&a, "no SKILL.md");

        let mut a = with_skill();
        a.skills[0].files[0] = BundledFile::new(SKILL_FILE, vec![0xc3, 0x28]);
        refused(&a, "not UTF-8");
    }

    #[test]
    fn imports_must_point_at_a_skill_of_their_name() {
        let mut a = with_skill();
        a.modules[0].skills[0].skill = 5;
        refused(&a, "the artifact carries 1");

        let mut a = with_skill();
        let other = a.modules[0].strings.push("summarizer".into());
        a.modules[0].skills[0].name = other;
        refused(&a, "points at a bundled skill named `web-search`");

        let mut a = with_skill();
        let again = a.modules[0].skills[0];
        a.modules[0].skills.push(again);
        refused(&a, "imported twice");

        let mut a = with_skill();
        a.modules[0].skills[0].name = bytecode_spec::StrId::from_u32(100_000);
        refused(&a, "out of range");
    }

    #[test]
    fn a_skill_no_module_imports_is_refused() {
        let mut a = with_skill();
        a.modules[0].skills.clear();
        refused(&a, "not imported by any module");
    }

    #[test]
    fn a_bundle_survives_a_write_and_load_unchanged() {
        let a = with_skill();
        assert_eq!(verify(&a), Ok(()));
        let bytes = write(&a, &header()).expect("writable");
        let (_, loaded) = read(&bytes).expect("reads");
        assert_eq!(loaded, a);
    }
}

mod signed {
    use super::*;
    use minisign::KeyPair;

    fn keys() -> (minisign::SecretKey, TrustKey) {
        let KeyPair { pk, sk } = KeyPair::generate_unencrypted_keypair().expect("keys");
        let text = pk.to_box().expect("box").into_string();
        (sk, TrustKey::parse(&text).expect("parses"))
    }

    fn artifact() -> Vec<u8> {
        write(&with_skill(), &header()).expect("writable")
    }

    #[test]
    fn a_signed_artifact_is_trusted_by_its_key_and_still_loads() {
        let (sk, pk) = keys();
        let unsigned = artifact();
        let signed = sign(&unsigned, &sk, "timestamp:1\tfile:app.pbc").expect("signs");
        assert!(signed.len() > unsigned.len());
        assert_eq!(&signed[..unsigned.len()], &unsigned[..]);
        match check(&signed, std::slice::from_ref(&pk)).expect("framed") {
            Trust::Trusted { key, comment } => {
                assert_eq!(key, pk.id());
                assert_eq!(comment, "timestamp:1\tfile:app.pbc");
            }
            other => panic!("not trusted: {other}"),
        }
        assert_eq!(signer(&signed).expect("framed"), Some(pk.id()));
        let (_, a) = load(&signed).expect("a signed artifact loads");
        assert_eq!(a.skills().len(), 1);
    }

    #[test]
    fn an_unsigned_artifact_is_unsigned() {
        let (_, pk) = keys();
        let t = check(&artifact(), &[pk]).expect("framed");
        assert_eq!(t, Trust::Unsigned);
        assert!(!t.is_trusted());
        assert_eq!(signer(&artifact()).expect("framed"), None);
    }

    #[test]
    fn another_key_is_foreign() {
        let (sk, _) = keys();
        let (_, other) = keys();
        let signed = sign(&artifact(), &sk, "c").expect("signs");
        let id = signer(&signed).expect("framed").expect("signed");
        assert_eq!(check(&signed, &[other]), Ok(Trust::Foreign { key: id }));
        assert_eq!(check(&signed, &[]), Ok(Trust::Foreign { key: id }));
    }

    #[test]
    fn changing_any_signed_byte_is_altered() {
        let (sk, pk) = keys();
        let signed = sign(&artifact(), &sk, "c").expect("signs");
        let (body, _) = split_signature(&signed).expect("framed");
        let body_len = body.len();
        // The compiler version, the source hash, the checksum, the payload: each changed
        // byte, even with the checksum made valid again, breaks the signature.
        for at in [10, 30, 61, HEADER_LEN + 5, body_len - 1] {
            let mut bad = signed.clone();
            bad[at] ^= 0x20;
            match check(&bad, std::slice::from_ref(&pk)) {
                Ok(Trust::Altered { key, .. }) => assert_eq!(key, Some(pk.id())),
                other => panic!("byte {at}: {other:?}"),
            }
        }
        // A skill swapped for another and the whole file re-framed: still altered.
        let mut a = with_skill();
        a.skills[0].files[1] = BundledFile::new("scripts/search.sh", b"rm -rf ~\n".to_vec());
        let forged = write(&a, &header()).expect("writable");
        let (_, sig) = split_signature(&signed).expect("framed");
        let forged = with_signature(&forged, sig.expect("signed")).expect("framed");
        assert!(load(&forged).is_ok(), "the forgery is a valid artifact");
        assert!(matches!(check(&forged, &[pk]), Ok(Trust::Altered { .. })));
    }

    #[test]
    fn a_damaged_signature_is_altered_and_a_bad_block_is_refused() {
        let (_, pk) = keys();
        let damaged = with_signature(&artifact(), "not a signature").expect("framed");
        assert!(matches!(
            check(&damaged, &[pk]),
            Ok(Trust::Altered { key: None, .. })
        ));
        // The block's length must be exact, bounded, and the text UTF-8.
        let mut short = with_signature(&artifact(), "abc").expect("framed");
        short.pop();
        assert!(matches!(read(&short), Err(LoadError::Malformed(_))));
        let mut big = artifact();
        big.extend_from_slice(b"PSIG");
        big.extend_from_slice(&((MAX_SIGNATURE + 1) as u32).to_le_bytes());
        big.extend(std::iter::repeat_n(b'a', MAX_SIGNATURE + 1));
        assert!(matches!(read(&big), Err(LoadError::Malformed(_))));
        assert!(with_signature(&artifact(), &"a".repeat(MAX_SIGNATURE + 1)).is_err());
        let mut binary = artifact();
        binary.extend_from_slice(b"PSIG\x02\0\0\0\xff\xfe");
        assert!(matches!(read(&binary), Err(LoadError::Malformed(_))));
        // Other bytes after the payload are still just trailing bytes.
        let mut trailing = artifact();
        trailing.extend_from_slice(b"junk");
        assert_eq!(read(&trailing).err(), Some(LoadError::TrailingBytes(4)));
    }

    #[test]
    fn signing_again_replaces_the_signature() {
        let (sk1, pk1) = keys();
        let (sk2, pk2) = keys();
        let once = sign(&artifact(), &sk1, "first").expect("signs");
        let twice = sign(&once, &sk2, "second").expect("signs");
        assert_eq!(
            split_signature(&once).unwrap().0,
            split_signature(&twice).unwrap().0
        );
        let both = [pk1.clone(), pk2.clone()];
        assert!(matches!(
            check(&twice, &both),
            Ok(Trust::Trusted { key, .. }) if key == pk2.id()
        ));
        assert!(matches!(check(&twice, &[pk1]), Ok(Trust::Foreign { .. })));
    }

    #[test]
    fn trust_keys_parse_as_minisign_writes_them() {
        let (_, pk) = keys();
        assert!(TrustKey::parse("").is_err());
        assert!(TrustKey::parse("untrusted comment: x\nnot base64!\n").is_err());
        // A key written by minisign itself (its documentation's example key).
        let k = TrustKey::parse(
            "untrusted comment: minisign public key E7620F1842B4E81F\n\
             RWQf6LRCGA9i53mlYecO4IzT51TGPpvWucNSCh1CBM0QTaLn73Y7GFO3\n",
        )
        .expect("minisign's own format");
        assert_eq!(k.id().to_string(), "E7620F1842B4E81F");
        assert_eq!(pk.id().to_string().len(), 16);
    }
}

/// A signed artifact carrying a skill, saved with the public key that signed it
/// (`tests/fixtures/`). It must still load, carry its skill and verify as trusted; after a
/// format change it must be refused for its version (then `PROSEC_BLESS=1` saves a new one).
mod saved {
    use super::*;
    use std::path::PathBuf;

    fn fixtures() -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
    }

    #[test]
    fn the_saved_signed_artifact_still_loads_and_verifies() {
        let (pbc, key) = (
            fixtures().join("signed-skill.pbc"),
            fixtures().join("signer.pub"),
        );
        if std::env::var_os("PROSEC_BLESS").is_some() {
            let minisign::KeyPair { pk, sk } =
                minisign::KeyPair::generate_unencrypted_keypair().expect("keys");
            let bytes = write(&with_skill(), &header()).expect("writable");
            let signed = sign(&bytes, &sk, "timestamp:0\tfile:signed-skill.pbc").expect("signs");
            std::fs::create_dir_all(fixtures()).expect("mkdir");
            std::fs::write(&pbc, signed).expect("bless");
            std::fs::write(&key, pk.to_box().expect("box").into_string()).expect("bless");
            return;
        }
        let bytes = std::fs::read(&pbc).expect("saved artifact; run with PROSEC_BLESS=1");
        let key = TrustKey::read(&key).expect("saved key");
        match load(&bytes) {
            Ok((_, v)) => {
                assert_eq!(
                    v.skill(0, "web-search").and_then(|s| s.skill_md()),
                    Some(INSTRUCTIONS)
                );
                assert!(matches!(
                    check(&bytes, std::slice::from_ref(&key)),
                    Ok(Trust::Trusted { key: k, .. }) if k == key.id()
                ));
                assert_eq!(
                    v.into_inner(),
                    with_skill(),
                    "the encoding changed without FORMAT_VERSION"
                );
            }
            // A format bump refuses the saved artifact, as it should; the fixture is then
            // blessed again, so that this test goes on checking the encoding and signature.
            Err(LoadError::UnsupportedVersion(v)) => panic!(
                "the saved artifact is format {v}, this build writes {}: \
                 bless it again with PROSEC_BLESS=1",
                bytecode_spec::artifact::FORMAT_VERSION
            ),
            Err(e) => panic!("the saved artifact is refused: {e}"),
        }
    }
}
