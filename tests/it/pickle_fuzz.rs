//! A seeded fuzz test of the `pytorch_model.bin` reader (`crates/torch/src/model/torch_file.rs`, issue #50):
//! 28,000 mutations (in about a quarter of a second) of real `torch.save` files (zip and legacy
//! layouts, made by torch) and of pickles (each put back into an archive with a correct CRC, so
//! that the mutation reaches the pickle machine), each of which must load or fail with a
//! one-line error — never panic, abort, overflow the stack or reach libtorch unchecked. The mutations: bit flips, bytes and 4- or 8-byte fields set to
//! edge values (0, 0xff, 0x7f, 2^31-1, 2^32-1, 2^40, 2^63-1, -1), truncation, chunks spliced
//! over, duplicated and deleted, random bytes inserted, and the zip directory's sizes and
//! offsets set to huge values. A failing case is named by its family, index and seed.
use crate::common::*;
use crate::pickles::{stored, zip_archive, Entry};
use std::io::Read;
use std::path::Path;

/// The fuzz's seed; case `i` of a family draws from `SEED ^ (family << 32) ^ i`.
const SEED: u64 = 0x1ad0_2026;

/// splitmix64: a tiny, seeded generator (no dependency).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

const EDGE_BYTES: [u8; 10] = [0, 0xff, 0x7f, 0x80, 1, b'(', b'.', b']', b'}', b'\x8a'];
const EDGE_INTS: [u64; 8] = [0, u64::MAX, 0x7fff_ffff, 0xffff_ffff, 1 << 40, i64::MAX as u64, 1 << 62, 0x8000_0000];

/// One to three mutations of `data`.
fn mutate(rng: &mut Rng, data: &mut Vec<u8>) {
    for _ in 0..1 + rng.below(3) {
        let len = data.len();
        let at = rng.below(len);
        match rng.below(9) {
            0 => {
                for _ in 0..1 + rng.below(4) {
                    let bit = rng.below(len * 8);
                    if let Some(b) = data.get_mut(bit / 8) {
                        *b ^= 1 << (bit % 8);
                    }
                }
            }
            1 => {
                if at < len {
                    data[at] = EDGE_BYTES[rng.below(EDGE_BYTES.len())];
                }
            }
            2 => {
                let v = EDGE_INTS[rng.below(EDGE_INTS.len())].to_le_bytes();
                let width = if rng.below(2) == 0 { 4 } else { 8 };
                let end = (at + width).min(len);
                data[at..end].copy_from_slice(&v[..end - at]);
            }
            3 => data.truncate(at),
            4 => {
                let n = rng.below(64).min(len - at);
                let to = rng.below(len - n + 1);
                let chunk = data[at..at + n].to_vec();
                data[to..to + n].copy_from_slice(&chunk);
            }
            5 => {
                let n = rng.below(256).min(len - at);
                let chunk = data[at..at + n].to_vec();
                let to = rng.below(len + 1);
                data.splice(to..to, chunk);
            }
            6 => {
                let n = rng.below(64).min(len - at);
                data.drain(at..at + n);
            }
            7 => {
                // A zip directory entry's compressed size, size or offset (or, in a pickle, a
                // field anywhere) set huge.
                let dirs: Vec<usize> =
                    data.windows(4).enumerate().filter(|(_, w)| *w == b"PK\x01\x02").map(|(i, _)| i).collect();
                let field = match dirs.is_empty() {
                    true => at,
                    false => dirs[rng.below(dirs.len())] + [20, 24, 42][rng.below(3)],
                };
                let v = EDGE_INTS[1 + rng.below(EDGE_INTS.len() - 1)].to_le_bytes();
                if field + 4 <= len {
                    data[field..field + 4].copy_from_slice(&v[..4]);
                }
            }
            _ => {
                let bytes: Vec<u8> = (0..1 + rng.below(8)).map(|_| rng.next() as u8).collect();
                data.splice(at..at, bytes);
            }
        }
    }
}

/// An archive's entries, by name (stored, as torch writes them).
fn entries(archive: &[u8]) -> Vec<(String, Vec<u8>)> {
    let mut zip = zip::ZipArchive::new(std::io::Cursor::new(archive)).unwrap();
    (0..zip.len())
        .map(|i| {
            let mut e = zip.by_index(i).unwrap();
            let mut bytes = Vec::new();
            e.read_to_end(&mut bytes).unwrap();
            (e.name().to_string(), bytes)
        })
        .collect()
}

#[test]
fn mutated_torch_files_and_pickles_load_or_fail_without_a_crash() {
    let dir = scratch("pickle-fuzz");
    reference(&["fuzz-seeds", dir.to_str().unwrap()]);
    let seed_file = |name: &str| std::fs::read(dir.join(name)).unwrap();
    let (zip_bin, legacy_bin) = (seed_file("zip.bin"), seed_file("legacy.bin"));
    let origin = Path::new("pytorch_model.bin");
    let read = |bytes: &[u8]| indolm_torch::model::torch_file::read_bytes(bytes, origin);

    // The seeds themselves: both layouts read, to the same tensors.
    let (from_zip, from_legacy) = (read(&zip_bin).unwrap(), read(&legacy_bin).unwrap());
    assert_eq!(from_zip.len(), 8);
    for (name, t) in &from_zip {
        assert!(t.equal(&from_legacy[name]) && t.kind() == from_legacy[name].kind(), "{name}");
    }
    assert!(from_zip["t"].equal(&from_zip["emb.weight"].tr()) && from_zip["ids"].size() == [1, 8]);

    // The pickles, each put back into the torch archive in place of its data.pkl.
    let torch_entries = entries(&zip_bin);
    let pickle_name = torch_entries.iter().find(|(n, _)| n.ends_with("/data.pkl")).unwrap().0.clone();
    let rewrap = |pickle: &[u8]| -> Vec<u8> {
        let all: Vec<Entry> = torch_entries
            .iter()
            .map(|(n, b)| if *n == pickle_name { stored(n, pickle) } else { stored(n, b) })
            .collect();
        zip_archive(&all)
    };
    let torch_pickle = torch_entries.iter().find(|(n, _)| *n == pickle_name).unwrap().1.clone();
    assert_eq!(read(&rewrap(&torch_pickle)).unwrap().len(), 8, "the rewrapped archive reads as torch's");
    for p in ["p0.pkl", "p2.pkl", "p4.pkl"] {
        // Plain data is read to its end, then refused as no state dict.
        let err = read(&rewrap(&seed_file(p))).unwrap_err().to_string();
        assert!(err.contains("not a tensor: not a state dict"), "{p}: {err}");
    }

    type Family<'a> = (&'a str, Vec<Vec<u8>>, usize, bool);
    let families: [Family; 3] = [
        ("zip", vec![zip_bin.clone()], 8000, false),
        ("legacy", vec![legacy_bin.clone()], 8000, false),
        ("pickle", [torch_pickle, seed_file("p0.pkl"), seed_file("p2.pkl"), seed_file("p4.pkl")].into(), 3000, true),
    ];
    let start = std::time::Instant::now();
    let (mut cases, mut loaded, mut failures, mut per_family) = (0, 0, Vec::new(), Vec::new());
    for (family_index, (family, seeds, per_seed, wrap)) in families.iter().enumerate() {
        let loaded_before = loaded;
        for (s, original) in seeds.iter().enumerate() {
            for i in 0..*per_seed {
                let index = s * per_seed + i;
                let case_seed = SEED ^ ((family_index as u64) << 32) ^ index as u64;
                let mut rng = Rng(case_seed);
                let mut bytes = original.clone();
                mutate(&mut rng, &mut bytes);
                if *wrap {
                    bytes = rewrap(&bytes);
                }
                cases += 1;
                match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| read(&bytes))) {
                    Ok(Ok(_)) => loaded += 1,
                    Ok(Err(e)) => {
                        let e = e.to_string();
                        if e.contains('\n') {
                            failures
                                .push(format!("{family} case {index} (seed {case_seed:#x}): a multi-line error: {e}"));
                        }
                    }
                    Err(_) => failures.push(format!("{family} case {index} (seed {case_seed:#x}) panicked")),
                }
            }
        }
        per_family.push(format!("{} {family}", loaded - loaded_before));
    }
    let took = start.elapsed();
    eprintln!(
        "pickle fuzz: {cases} cases ({loaded} loaded: {}; the rest refused) in {:.2} s",
        per_family.join(", "),
        took.as_secs_f64()
    );
    assert!(failures.is_empty(), "{} of {cases} cases failed:\n{}", failures.len(), failures.join("\n"));
    assert!(loaded > 0 && loaded < cases, "{loaded} of {cases} loaded: the mutations are too weak or too strong");
}
