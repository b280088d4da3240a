//! PyTorch's pickled weight files (`pytorch_model.bin`) as published checkpoints ship them, read
//! without executing anything (`crates/torch/src/model/torch_file.rs`): a tiny BERT and a tiny Llama saved by
//! torch in its zip layout (what transformers 4's `save_pretrained(safe_serialization=False)`
//! wrote) and in its legacy layout score exactly as their safetensors twins; `indolm convert`
//! writes the same tensors as safetensors; a pickle that would run a shell command is refused by
//! the name of its global and runs nothing.
use crate::common::*;
use std::path::Path;

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// `indolm eval pll --json` of `model` on two sentences.
fn pll(model: &Path, text: &Path) -> String {
    indolm_ok(&["--device", "cpu", "eval", "pll", "--model", s(model), "--text", s(text), "--json"]).0
}

#[test]
fn pytorch_bins_score_as_their_safetensors_twins_and_a_pickled_command_is_refused() {
    let work = scratch("pickles");
    let text = work.join("sentences.txt");
    std::fs::write(&text, "Saya makan nasi goreng di pasar.\nIbu pergi ke kantor pagi ini.\n").unwrap();

    let llama = work.join("llama");
    reference(&["make-decoder", "llama", s(&llama)]);
    for (name, model) in [("bert", reference_model()), ("llama", llama.as_path())] {
        let expected = pll(model, &text);
        for layout in ["zip", "legacy"] {
            let bin = work.join(format!("{name}-{layout}"));
            let saved: serde_json::Value =
                serde_json::from_str(reference(&["save-bin", s(model), s(&bin), layout]).trim()).unwrap();
            assert_eq!(saved["zip"], layout == "zip", "{name} {layout}: {saved}");
            assert!(!bin.join("model.safetensors").exists());
            assert_eq!(pll(&bin, &text), expected, "{name} saved by torch ({layout}) scores otherwise");
        }
        // `convert`: one model.safetensors with the same tensors, beside the same side files.
        let converted = work.join(format!("{name}-converted"));
        let (stdout, _) = indolm_ok(&["convert", s(&work.join(format!("{name}-legacy"))), s(&converted)]);
        assert!(stdout.contains("from pytorch_model.bin") && stdout.contains("config.json"), "{stdout}");
        assert!(converted.join("config.json").exists() && !converted.join("pytorch_model.bin").exists());
        assert_eq!(pll(&converted, &text), expected, "{name} converted scores otherwise");
        // The pickled file's tensors are the safetensors twin's, bit for bit (plus the tied copies
        // a state dict holds), and the converted file's are the pickled file's.
        let read = |dir: &Path| indolm_torch::model::weights::read_model_weights(dir).unwrap().1;
        let (original, pickled) = (read(model), read(&work.join(format!("{name}-legacy"))));
        let written = indolm_torch::model::weights::read_file(&converted.join("model.safetensors")).unwrap();
        for (tensor, t) in &original {
            assert!(t.equal(&pickled[tensor]) && t.kind() == pickled[tensor].kind(), "{name} {tensor}");
        }
        assert_eq!(pickled.keys().collect::<Vec<_>>(), written.keys().collect::<Vec<_>>(), "{name}");
        for (tensor, t) in &pickled {
            assert!(t.equal(&written[tensor]) && t.kind() == written[tensor].kind(), "{name} {tensor}");
        }
    }

    // A pickle whose unpickling would run `touch MARKER`: refused by name, nothing run.
    let evil = work.join("evil");
    let marker = work.join("MARKER");
    reference(&["evil-bin", s(reference_model()), s(&evil), s(&marker)]);
    let err = indolm_fails(&["--device", "cpu", "eval", "pll", "--model", s(&evil), "--text", s(&text)]);
    assert!(err.contains("pytorch_model.bin") && err.contains("`posix.system`") && err.lines().count() == 1, "{err}");
    let err = indolm_fails(&["convert", s(&evil), s(&work.join("evil-converted"))]);
    assert!(err.contains("`posix.system`"), "{err}");
    assert!(!marker.exists(), "the pickle's command ran");
}

// ---- Hostile files: every bound of the reader, each a one-line error (issue #50) ----------

/// CRC-32 (IEEE), as zip stores it.
pub(crate) fn crc32(data: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in data {
        crc ^= b as u32;
        for _ in 0..8 {
            crc = if crc & 1 != 0 { (crc >> 1) ^ 0xEDB8_8320 } else { crc >> 1 };
        }
    }
    !crc
}

/// One entry of a zip archive as [`zip_archive`] writes it: its name, its bytes as held (stored,
/// or a deflate stream), its method (0 stored, 8 deflated), its content's CRC and size, and the
/// size its central directory declares (in a zip64 field past 32 bits); `same_as`: no bytes of
/// its own, its directory entry pointing at an earlier entry's (by index).
pub(crate) struct Entry {
    pub name: String,
    pub held: Vec<u8>,
    pub method: u16,
    pub crc: u32,
    pub size: u64,
    pub declared: u64,
    pub same_as: Option<usize>,
}

/// A stored entry.
pub(crate) fn stored(name: &str, data: &[u8]) -> Entry {
    let size = data.len() as u64;
    Entry { name: name.into(), held: data.to_vec(), method: 0, crc: crc32(data), size, declared: size, same_as: None }
}

/// A deflated entry: its content as one stored deflate block (valid deflate; a zip reader with
/// deflate inflates it).
fn deflated(name: &str, data: &[u8]) -> Entry {
    let n = data.len() as u16;
    let held = [&[1u8][..], &n.to_le_bytes(), &(!n).to_le_bytes(), data].concat();
    Entry { method: 8, held, ..stored(name, data) }
}

/// A zip archive of `entries`: local headers and data, the central directory, its end record.
pub(crate) fn zip_archive(entries: &[Entry]) -> Vec<u8> {
    let (mut out, mut central, mut offsets) = (Vec::new(), Vec::new(), Vec::new());
    for e in entries {
        let offset = e.same_as.map_or(out.len() as u32, |i| offsets[i]);
        offsets.push(offset);
        let held = e.held.len() as u32;
        if e.same_as.is_none() {
            out.extend_from_slice(b"PK\x03\x04\x14\x00\x00\x00");
            out.extend_from_slice(&e.method.to_le_bytes());
            out.extend_from_slice(&[0, 0, 0x21, 0]); // time, date (1980-01-01)
            out.extend_from_slice(&e.crc.to_le_bytes());
            out.extend_from_slice(&held.to_le_bytes());
            out.extend_from_slice(&(e.size as u32).to_le_bytes());
            out.extend_from_slice(&(e.name.len() as u16).to_le_bytes());
            out.extend_from_slice(&[0, 0]);
            out.extend_from_slice(e.name.as_bytes());
            out.extend_from_slice(&e.held);
        }
        let zip64 = e.declared >= u32::MAX as u64;
        let (csize, usize_) = match zip64 {
            true => (u32::MAX, u32::MAX),
            false => (if e.declared == e.size { held } else { e.declared as u32 }, e.declared as u32),
        };
        central.extend_from_slice(b"PK\x01\x02\x14\x00\x14\x00\x00\x00");
        central.extend_from_slice(&e.method.to_le_bytes());
        central.extend_from_slice(&[0, 0, 0x21, 0]);
        central.extend_from_slice(&e.crc.to_le_bytes());
        central.extend_from_slice(&csize.to_le_bytes());
        central.extend_from_slice(&usize_.to_le_bytes());
        central.extend_from_slice(&(e.name.len() as u16).to_le_bytes());
        central.extend_from_slice(&(if zip64 { 20u16 } else { 0 }).to_le_bytes());
        central.extend_from_slice(&[0; 10]); // comment length, disk, attributes
        central.extend_from_slice(&offset.to_le_bytes());
        central.extend_from_slice(e.name.as_bytes());
        if zip64 {
            central.extend_from_slice(&[1, 0, 16, 0]);
            central.extend_from_slice(&e.declared.to_le_bytes());
            central.extend_from_slice(&e.declared.to_le_bytes());
        }
    }
    let (start, n) = (out.len() as u32, entries.len() as u16);
    out.extend_from_slice(&central);
    out.extend_from_slice(b"PK\x05\x06\x00\x00\x00\x00");
    out.extend_from_slice(&n.to_le_bytes());
    out.extend_from_slice(&n.to_le_bytes());
    out.extend_from_slice(&(central.len() as u32).to_le_bytes());
    out.extend_from_slice(&start.to_le_bytes());
    out.extend_from_slice(&[0, 0]);
    out
}

/// One float tensor of a hand-written state dict: its name, its storage's key and element
/// count, its offset, sizes and strides.
pub(crate) struct Described<'a>(pub &'a str, pub &'a str, pub i64, pub i64, pub &'a [i64], pub &'a [i64]);

/// The pickle of a state dict of float tensors as torch.save writes it (protocol 2: an
/// OrderedDict, each tensor `_rebuild_tensor_v2` of a persistent storage id).
pub(crate) fn state_dict_pickle(tensors: &[Described]) -> Vec<u8> {
    fn text(p: &mut Vec<u8>, s: &str) {
        p.push(b'X');
        p.extend_from_slice(&(s.len() as u32).to_le_bytes());
        p.extend_from_slice(s.as_bytes());
    }
    fn int(p: &mut Vec<u8>, n: i64) {
        p.extend_from_slice(b"\x8a\x08");
        p.extend_from_slice(&n.to_le_bytes());
    }
    fn ints(p: &mut Vec<u8>, ns: &[i64]) {
        p.push(b'(');
        ns.iter().for_each(|&n| int(p, n));
        p.push(b't');
    }
    let mut p = b"\x80\x02ccollections\nOrderedDict\n)R(".to_vec();
    for Described(name, key, numel, offset, size, stride) in tensors {
        text(&mut p, name);
        p.extend_from_slice(b"ctorch._utils\n_rebuild_tensor_v2\n((");
        text(&mut p, "storage");
        p.extend_from_slice(b"ctorch\nFloatStorage\n");
        text(&mut p, key);
        text(&mut p, "cpu");
        int(&mut p, *numel);
        p.extend_from_slice(b"tQ");
        int(&mut p, *offset);
        ints(&mut p, size);
        ints(&mut p, stride);
        p.extend_from_slice(b"\x89ccollections\nOrderedDict\n)RtR");
    }
    p.extend_from_slice(b"u.");
    p
}

/// Little-endian floats 0, 1, 2...
fn floats(n: usize) -> Vec<u8> {
    (0..n).flat_map(|i| (i as f32).to_le_bytes()).collect()
}

/// The legacy layout of `tensors`, with `storages` (key, element count written, bytes).
fn legacy_file(tensors: &[Described], storages: &[(&str, i64, Vec<u8>)]) -> Vec<u8> {
    let mut out = b"\x80\x02\x8a\x0a\x6c\xfc\x9c\x46\xf9\x20\x6a\xa8\x50\x19.\x80\x02M\xe9\x03.\x80\x02}.".to_vec();
    out.extend_from_slice(&state_dict_pickle(tensors));
    out.extend_from_slice(b"\x80\x02]q\x00(");
    for (key, _, _) in storages {
        out.push(b'X');
        out.extend_from_slice(&(key.len() as u32).to_le_bytes());
        out.extend_from_slice(key.as_bytes());
    }
    out.extend_from_slice(b"e.");
    for (_, numel, bytes) in storages {
        out.extend_from_slice(&numel.to_le_bytes());
        out.extend_from_slice(bytes);
    }
    out
}

/// A 2×2 float tensor `w` over storage `0` of 4 elements, as torch's zip layout holds it.
fn zip_of(tensors: &[Described], storages: Vec<Entry>, pickle: impl FnOnce(Vec<u8>) -> Entry) -> Vec<u8> {
    let mut entries = vec![pickle(state_dict_pickle(tensors)), stored("archive/byteorder", b"little")];
    entries.extend(storages);
    zip_archive(&entries)
}

const W: Described = Described("w", "0", 4, 0, &[2, 2], &[2, 1]);

fn read(bytes: &[u8]) -> Result<Vec<(String, Vec<f32>)>, String> {
    let tensors = indolm_torch::model::torch_file::read_bytes(bytes, Path::new("pytorch_model.bin"));
    let tensors = tensors.map_err(|e| e.to_string())?;
    Ok(tensors.into_iter().map(|(n, t)| (n, Vec::<f32>::try_from(t.flatten(0, -1)).unwrap())).collect())
}

/// `read` fails with one line holding each of `says`.
fn refused(bytes: &[u8], says: &[&str]) -> String {
    let err = read(bytes).expect_err("read though hostile");
    assert!(!err.contains('\n') && says.iter().all(|s| err.contains(s)), "expected {says:?}, got: {err}");
    err
}

#[test]
fn hand_written_archives_and_streams_load_and_their_bounds_hold() {
    let data = floats(4);
    let good = zip_of(&[W], vec![stored("archive/data/0", &data)], |p| stored("archive/data.pkl", &p));
    assert_eq!(read(&good).unwrap(), vec![("w".to_string(), vec![0., 1., 2., 3.])]);
    let legacy = legacy_file(&[W], &[("0", 4, data.clone())]);
    assert_eq!(read(&legacy).unwrap(), vec![("w".to_string(), vec![0., 1., 2., 3.])]);

    // A storage's byte changed: its CRC no longer matches.
    let mut corrupt = good.clone();
    let at = corrupt.windows(16).position(|w| w == &data[..]).unwrap();
    corrupt[at + 5] ^= 1;
    refused(&corrupt, &["zip entry `archive/data/0`: reading it: Invalid checksum"]);

    // 2^40 bytes declared for data.pkl in a file of some 600 bytes: refused before allocating
    // (it aborted in Vec::with_capacity).
    let huge = zip_of(&[W], vec![stored("archive/data/0", &data)], |p| Entry {
        declared: 1 << 40,
        ..stored("archive/data.pkl", &p)
    });
    assert!(huge.len() < 700, "{}", huge.len());
    refused(&huge, &["zip entry `archive/data.pkl`", "declares 1099511627776 bytes", "more than the file's"]);
    // A storage declared larger than the file, or than its tensor's storage.
    let big = zip_of(&[W], vec![Entry { declared: 5000, ..stored("archive/data/0", &data) }], |p| {
        stored("archive/data.pkl", &p)
    });
    refused(&big, &["`archive/data/0`", "declares 5000 bytes"]);
    let short = zip_of(&[W], vec![Entry { declared: 12, ..stored("archive/data/0", &data) }], |p| {
        stored("archive/data.pkl", &p)
    });
    refused(&short, &["`archive/data/0`", "declares 12 bytes, expected 16"]);
    // Two entries over the same bytes (a directory that points both at one place) cannot read
    // the file twice over: a 4000-float storage and a tied copy declared at the same offset.
    let two = [Described("a", "0", 4000, 0, &[4000], &[1]), Described("b", "1", 4000, 0, &[4000], &[1])];
    let tied = Entry { same_as: Some(2), ..stored("archive/data/1", &floats(4000)) };
    let overlapping =
        zip_of(&two, vec![stored("archive/data/0", &floats(4000)), tied], |p| stored("archive/data.pkl", &p));
    assert!(overlapping.len() < 2 * 16000);
    refused(&overlapping, &["`archive/data/1`", "declares 16000 bytes, more than the file's"]);

    // Compressed entries (a deflated data.pkl, a deflated storage): refused by name and method
    // (they were inflated without limit).
    let deflated_pickle = zip_of(&[W], vec![stored("archive/data/0", &data)], |p| deflated("archive/data.pkl", &p));
    refused(
        &deflated_pickle,
        &["zip entry `archive/data.pkl`: compressed (Deflated)", "stores its entries uncompressed"],
    );
    let deflated_storage = zip_of(&[W], vec![deflated("archive/data/0", &data)], |p| stored("archive/data.pkl", &p));
    refused(&deflated_storage, &["`archive/data/0`: compressed (Deflated)"]);

    // Sizes whose products overflow 64 bits: a storage of 2^62 floats held in 0 bytes (the
    // count times 4 wrapped to 0 and libtorch was asked for 2^62 elements), and a view of 2^62×4
    // (its last element's index wrapped below the storage's end).
    let storage_2_62 = Described("w", "0", 1 << 62, 0, &[1 << 62], &[1]);
    let wrapped = zip_of(&[storage_2_62], vec![stored("archive/data/0", b"")], |p| stored("archive/data.pkl", &p));
    refused(&wrapped, &["tensor `w`", "storage `0` of 4611686018427387904 elements"]);
    let view_2_62 = Described("w", "0", 4, 0, &[1 << 62], &[4]);
    let wrapped = zip_of(&[view_2_62], vec![stored("archive/data/0", &data)], |p| stored("archive/data.pkl", &p));
    refused(&wrapped, &["tensor `w`", "reach past any 64-bit element index"]);
    let count_2_64 = Described("w", "0", 4, 0, &[1 << 62, 4], &[4, 1]);
    let wrapped = zip_of(&[count_2_64], vec![stored("archive/data/0", &data)], |p| stored("archive/data.pkl", &p));
    refused(&wrapped, &["tensor `w`", "more elements than a 64-bit count holds"]);
    let negative = Described("w", "0", 4, 0, &[-2, -2], &[-2, 1]);
    let wrapped = zip_of(&[negative], vec![stored("archive/data/0", &data)], |p| stored("archive/data.pkl", &p));
    refused(&wrapped, &["tensor `w`", "do not describe a tensor"]);
    // A view repeating one element 2^40 times (stride 0): within the storage, but 4 TB once
    // copied.
    let repeated = Described("w", "0", 4, 0, &[1 << 40], &[0]);
    let bytes = zip_of(&[repeated], vec![stored("archive/data/0", &data)], |p| stored("archive/data.pkl", &p));
    refused(&bytes, &["tensor `w`", "a view that repeats its storage's elements"]);
    // Many tensors viewing one storage whole: at most 8 times the file's bytes.
    let names: Vec<String> = (0..40).map(|i| format!("t{i}")).collect();
    let many: Vec<Described> = names.iter().map(|n| Described(n, "0", 4000, 0, &[4000], &[1])).collect();
    let bytes = zip_of(&many, vec![stored("archive/data/0", &floats(4000))], |p| stored("archive/data.pkl", &p));
    refused(&bytes, &["more than 8 times the file's"]);

    // The legacy stream: every count checked against the bytes left and its pickle.
    let lying = legacy_file(&[Described("w", "0", 1000, 0, &[1000], &[1])], &[("0", 4, data.clone())]);
    refused(&lying, &["storage `0` holds 4 elements, though its tensors' pickle says 1000"]);
    let counts = legacy_file(&[Described("w", "0", 1 << 62, 0, &[4], &[1])], &[("0", 1 << 62, data.clone())]);
    refused(&counts, &["storage `0` of 4611686018427387904 elements of Float is more bytes than a file holds"]);
    let counts = legacy_file(&[Described("w", "0", 1 << 40, 0, &[4], &[1])], &[("0", 1 << 40, data.clone())]);
    refused(&counts, &["storage `0`: cut short (1099511627776 elements, 16 bytes left)"]);
    let cut = &legacy[..legacy.len() - 20];
    refused(cut, &["cut short before storage `0`"]);
}

/// A pickle of a list nested `levels` deep, as `pickle.dumps` writes it.
fn nested_list(levels: usize) -> Vec<u8> {
    [&b"\x80\x02"[..], &vec![b']'; levels], &vec![b'a'; levels - 1], b"."].concat()
}

#[test]
fn a_pickle_nested_a_million_deep_is_refused_in_one_line() {
    // 2 MB: it overflowed the stack (the drop of the nested lists recursed).
    let deep = zip_archive(&[stored("archive/data.pkl", &nested_list(1_000_000))]);
    refused(&deep, &["pickle byte", "nested deeper than 100 levels"]);
    // In the legacy stream as its magic number and as its state dict: the same.
    refused(&[&nested_list(1_000_000)[..], b""].concat(), &["not a torch.save file"]);
    let mut legacy = legacy_file(&[W], &[("0", 4, floats(4))]);
    let at = legacy.windows(2).position(|w| w == b"}.").unwrap() + 2;
    legacy.splice(at..at, nested_list(1_000_000));
    refused(&legacy, &["the state dict byte", "nested deeper than 100 levels"]);
}

#[test]
fn hostile_model_folders_fail_in_one_line_through_the_cli() {
    let work = scratch("hostile-bins");
    let data = floats(4);
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        (
            "huge-entry",
            zip_of(&[W], vec![stored("archive/data/0", &data)], |p| Entry {
                declared: 1 << 40,
                ..stored("archive/data.pkl", &p)
            }),
            "declares 1099511627776 bytes",
        ),
        ("deep", zip_archive(&[stored("archive/data.pkl", &nested_list(1_000_000))]), "nested deeper than 100 levels"),
        (
            "deflated",
            zip_of(&[W], vec![stored("archive/data/0", &data)], |p| deflated("archive/data.pkl", &p)),
            "compressed (Deflated)",
        ),
        (
            "size-2-62",
            zip_of(&[Described("w", "0", 4, 0, &[1 << 62], &[4])], vec![stored("archive/data/0", &data)], |p| {
                stored("archive/data.pkl", &p)
            }),
            "tensor `w`",
        ),
    ];
    for (name, bytes, says) in &cases {
        let dir = work.join(name);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("pytorch_model.bin"), bytes).unwrap();
        let err = indolm_fails(&["convert", s(&dir), s(&work.join(format!("{name}-out")))]);
        assert!(err.contains("pytorch_model.bin") && err.contains(says) && err.lines().count() == 1, "{name}: {err}");
    }
    // And a model folder the deep pickle is in, through a command that scores with it.
    let model = copy_dir(reference_model(), "hostile-bins-model");
    std::fs::remove_file(model.join("model.safetensors")).unwrap();
    std::fs::write(model.join("pytorch_model.bin"), &cases[1].1).unwrap();
    let text = work.join("text.txt");
    std::fs::write(&text, "Saya makan nasi.\n").unwrap();
    let err = indolm_fails(&["--device", "cpu", "eval", "pll", "--model", s(&model), "--text", s(&text)]);
    assert!(err.contains("nested deeper than 100 levels") && err.lines().count() == 1, "{err}");
}

#[test]
fn a_dict_of_200000_keys_is_read_in_linear_time() {
    // Each key was looked for among all before it: 65 s for this 2.7 MB pickle (hours at the
    // 64 MiB cap); with an index, well under a second.
    let mut p = b"\x80\x02}(".to_vec();
    for i in 0..200_000 {
        let key = format!("k{i}");
        p.push(b'X');
        p.extend_from_slice(&(key.len() as u32).to_le_bytes());
        p.extend_from_slice(key.as_bytes());
        p.extend_from_slice(b"K\x01");
    }
    p.extend_from_slice(b"u.");
    let start = std::time::Instant::now();
    refused(&zip_archive(&[stored("archive/data.pkl", &p)]), &["`k0` is an int, not a tensor"]);
    assert!(start.elapsed().as_secs_f64() < 10.0, "{:?}", start.elapsed());
}

#[test]
fn safetensors_shapes_past_64_bits_are_refused_in_one_line() {
    // safetensors checks a tensor's bytes against its shape, but a shape with a 0 holds no bytes
    // whatever its other sizes: [0, 2^63] reached libtorch as a negative size, [0, 2^62, 4] as
    // strides past 2^64 (each a 27-line C++ backtrace), through the reader of safetensors files
    // and through the decoders' mapping loader.
    let work = scratch("safetensors-shapes");
    for (name, shape) in [("negative", "[0, 9223372036854775808]"), ("strides", "[0, 4611686018427387904, 4]")] {
        let mut header = format!(r#"{{"w":{{"dtype":"F32","shape":{shape},"data_offsets":[0,0]}}}}"#).into_bytes();
        header.resize(header.len().next_multiple_of(8), b' ');
        let dir = work.join(name);
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("model.safetensors");
        std::fs::write(&file, [&(header.len() as u64).to_le_bytes()[..], &header].concat()).unwrap();
        let err = indolm_torch::model::weights::read_file(&file).unwrap_err().to_string();
        assert!(
            err.contains("tensor `w`: shape") && err.contains("beyond a 64-bit element count") && !err.contains('\n'),
            "{err}"
        );
        // The decoders' loader, which maps the file and views it.
        let mapped = indolm_torch::model::decoder::load::Weights::open(&dir, tch::Kind::Float, tch::Device::Cpu);
        let err = mapped.err().expect("mapped though hostile").to_string();
        assert!(
            err.contains("tensor `w`: shape") && err.contains("beyond a 64-bit element count") && !err.contains('\n'),
            "{err}"
        );
        let err = indolm_fails(&["convert", s(&dir), s(&work.join(format!("{name}-out")))]);
        assert!(err.contains("beyond a 64-bit element count") && err.lines().count() == 1, "{err}");
    }
}
