//! `indolm download` against a loopback HTTP server (127.0.0.1, this test's own) that serves a
//! mirror of the public hosts' layouts, supports Range requests, and can cut a transfer short.
use crate::common::{self, *};
use sha2::{Digest, Sha256};
use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// Serves files under `root`; the first request for a path in `cut` sends half the body and
/// closes, the first for a path in `stall` sends half and then goes silent with the connection
/// open. Records each request line with its Range header.
struct Server {
    base: String,
    log: Arc<Mutex<Vec<String>>>,
}

fn serve(root: PathBuf, cut: Vec<String>) -> Server {
    serve_with_stalls(root, cut, Vec::new())
}

fn serve_with_stalls(root: PathBuf, cut: Vec<String>, stall: Vec<String>) -> Server {
    let stall = Arc::new(Mutex::new(stall));
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let log = Arc::new(Mutex::new(Vec::new()));
    let cut = Arc::new(Mutex::new(cut));
    let log2 = Arc::clone(&log);
    std::thread::spawn(move || {
        for stream in listener.incoming().take(200) {
            let Ok(mut stream) = stream else { continue };
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut request = String::new();
            reader.read_line(&mut request).unwrap();
            let mut range_from: Option<usize> = None;
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap() == 0 || line == "\r\n" {
                    break;
                }
                if let Some(v) = line.to_lowercase().strip_prefix("range: bytes=") {
                    range_from = v.trim().trim_end_matches('-').parse().ok();
                }
            }
            let path = request.split_whitespace().nth(1).unwrap_or("/").to_string();
            log2.lock().unwrap().push(format!("{path} range={range_from:?}"));
            let file = root.join(path.trim_start_matches('/'));
            let Ok(body) = std::fs::read(&file) else {
                let _ = stream.write_all(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
                continue;
            };
            let (status, slice) = match range_from {
                Some(from) if from < body.len() => ("206 Partial Content", &body[from..]),
                _ => ("200 OK", &body[..]),
            };
            let head = format!("HTTP/1.1 {status}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n", slice.len());
            let _ = stream.write_all(head.as_bytes());
            let mut stall = stall.lock().unwrap();
            if let Some(i) = stall.iter().position(|c| *c == path) {
                stall.remove(i);
                let _ = stream.write_all(&slice[..slice.len() / 2]);
                let _ = stream.flush();
                std::thread::spawn(move || {
                    std::thread::sleep(std::time::Duration::from_secs(60));
                    drop(stream);
                });
                continue;
            }
            let mut cut = cut.lock().unwrap();
            if let Some(i) = cut.iter().position(|c| *c == path) {
                cut.remove(i);
                let _ = stream.write_all(&slice[..slice.len() / 2]);
                continue; // dropped: the connection closes mid-body
            }
            let _ = stream.write_all(slice);
        }
    });
    Server { base, log }
}

fn put(root: &Path, rel: &str, bytes: &[u8]) {
    let p = root.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, bytes).unwrap();
}

/// A real (small) Wikipedia-layout parquet shard, written by pyarrow.
fn parquet_shard(work: &Path) -> Vec<u8> {
    let columns =
        serde_json::json!({"id": ["1"], "url": ["u"], "title": ["Bandung"], "text": ["Bandung di Jawa Barat."]});
    std::fs::write(work.join("cols.json"), columns.to_string()).unwrap();
    let path = work.join("shard.parquet");
    reference(&["write-parquet", path.to_str().unwrap(), work.join("cols.json").to_str().unwrap()]);
    std::fs::read(path).unwrap()
}

fn sha256(bytes: &[u8]) -> String {
    Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

#[test]
fn cc100_resumes_after_a_cut_connection() {
    let work = scratch("dl-cc100");
    let root = work.join("mirror");
    let text: String = (0..30000).map(|i| format!("Paragraf {i} dalam bahasa Sunda.\n")).collect();
    let mut xz = liblzma::write::XzEncoder::new(Vec::new(), 1);
    xz.write_all(text.as_bytes()).unwrap();
    let bytes = xz.finish().unwrap();
    put(&root, "data.statmt.org/cc-100/su.txt.xz", &bytes);
    let server = serve(root, vec!["/data.statmt.org/cc-100/su.txt.xz".into()]);
    let out = work.join("out");
    let args = ["download", "cc100", "--lang", "su", "--out", out.to_str().unwrap(), "--mirror", &server.base];
    let mut no_retry = args.to_vec();
    no_retry.extend(["--retries", "0"]);
    let err = indolm_fails(&no_retry);
    assert!(err.contains("run the command again to resume") && err.contains("gave up after 1 attempt"), "{err}");
    let part = out.join("cc100/su.txt.xz.part");
    let partial = std::fs::metadata(&part).unwrap().len();
    assert!(partial > 0 && (partial as usize) < bytes.len());
    let (stdout, _) = indolm_ok(&args);
    assert!(stdout.contains(&format!("{} bytes fetched", bytes.len() as u64 - partial)), "{stdout}");
    assert_eq!(std::fs::read(out.join("cc100/su.txt.xz")).unwrap(), bytes);
    assert!(!part.exists());
    let log = server.log.lock().unwrap().clone();
    assert_eq!(log[1], format!("/data.statmt.org/cc-100/su.txt.xz range=Some({partial})"), "{log:?}");
    let (stdout, _) = indolm_ok(&args);
    assert!(stdout.contains("already complete"), "{stdout}");
}

#[test]
fn wikipedia_shards_are_checked_against_the_listing() {
    let work = scratch("dl-wiki");
    let root = work.join("mirror");
    let shard = parquet_shard(&work);
    let shard_path = "20231101.su/train-00000-of-00001.parquet";
    put(&root, &format!("huggingface.co/datasets/wikimedia/wikipedia/resolve/main/{shard_path}"), &shard);
    let listing = |sha: &str| {
        serde_json::json!([
            {"type": "file", "path": shard_path, "size": shard.len(), "lfs": {"oid": sha, "size": shard.len()}},
            {"type": "file", "path": "20231101.su/README.md", "size": 3}
        ])
        .to_string()
    };
    put(
        &root,
        "huggingface.co/api/datasets/wikimedia/wikipedia/tree/main/20231101.su",
        listing(&sha256(&shard)).as_bytes(),
    );
    let server = serve(root.clone(), vec![]);
    let out = work.join("out");
    let args = ["download", "wikipedia", "--lang", "su", "--out", out.to_str().unwrap(), "--mirror", &server.base];
    let (stdout, _) = indolm_ok(&args);
    assert!(stdout.contains("size, SHA-256 and content checked"), "{stdout}");
    assert_eq!(std::fs::read(out.join("wikipedia").join(shard_path)).unwrap(), shard);

    // A listing whose checksum does not match: refused, nothing left behind.
    put(
        &root,
        "huggingface.co/api/datasets/wikimedia/wikipedia/tree/main/20231101.su",
        listing(&"0".repeat(64)).as_bytes(),
    );
    let out2 = work.join("out2");
    let err = indolm_fails(&[
        "download",
        "wikipedia",
        "--lang",
        "su",
        "--out",
        out2.to_str().unwrap(),
        "--mirror",
        &server.base,
    ]);
    assert!(err.contains("SHA-256") && err.contains(&"0".repeat(64)), "{err}");
    assert!(!out2.join("wikipedia").join(format!("{shard_path}.part")).exists());
    let err = indolm_fails(&[
        "download",
        "wikipedia",
        "--lang",
        "xx",
        "--out",
        out2.to_str().unwrap(),
        "--mirror",
        &server.base,
    ]);
    assert!(err.contains("HTTP 404"), "{err}");
}

#[test]
fn nusax_lands_in_the_test_data_layout() {
    let work = scratch("dl-nusax");
    let root = work.join("mirror");
    let shared = test_data().join("nusax/sentiment");
    for lang in indolm_torch::data::download::NUSAX_LANGUAGES {
        for split in ["train", "valid", "test"] {
            let bytes = std::fs::read(shared.join(lang).join(format!("{split}.csv"))).unwrap();
            put(
                &root,
                &format!("raw.githubusercontent.com/IndoNLP/nusax/main/datasets/sentiment/{lang}/{split}.csv"),
                &bytes,
            );
        }
    }
    // The translation corpus (tests/data has no test split: the validation file stands in) and
    // the lexicon, Indonesian to each other language.
    let datasets = "raw.githubusercontent.com/IndoNLP/nusax/main/datasets";
    let nusax = test_data().join("nusax");
    for (split, file) in [("train", "train"), ("valid", "valid"), ("test", "valid")] {
        put(
            &root,
            &format!("{datasets}/mt/{split}.csv"),
            &std::fs::read(nusax.join(format!("mt/{file}.csv"))).unwrap(),
        );
    }
    let lexicons: Vec<_> =
        indolm_torch::data::download::NUSAX_LANGUAGES.iter().filter(|l| **l != "indonesian").collect();
    for lang in &lexicons {
        let bytes = std::fs::read(nusax.join(format!("lexicon/{lang}.csv"))).unwrap();
        put(&root, &format!("{datasets}/lexicon/{lang}.csv"), &bytes);
    }
    let server = serve(root, vec![]);
    let out = work.join("out");
    indolm_ok(&["download", "nusax", "--out", out.to_str().unwrap(), "--mirror", &server.base]);
    for lang in indolm_torch::data::download::NUSAX_LANGUAGES {
        assert_eq!(
            std::fs::read(out.join("nusax/sentiment").join(lang).join("test.csv")).unwrap(),
            std::fs::read(shared.join(lang).join("test.csv")).unwrap()
        );
    }
    let read = |p: &std::path::Path| std::fs::read(p).unwrap();
    assert_eq!(read(&out.join("nusax/mt/train.csv")), read(&nusax.join("mt/train.csv")));
    assert_eq!(read(&out.join("nusax/mt/test.csv")), read(&nusax.join("mt/valid.csv")));
    for lang in &lexicons {
        let name = format!("lexicon/{lang}.csv");
        assert_eq!(read(&out.join("nusax").join(&name)), read(&nusax.join(&name)));
    }
}

#[test]
fn indommlu_csv_is_fetched() {
    let work = scratch("dl-indommlu");
    let root = work.join("mirror");
    let csv = std::fs::read(common::root().join("tests/fixtures/indommlu/indoMMLU-fixture.csv")).unwrap();
    put(&root, "raw.githubusercontent.com/fajri91/IndoMMLU/main/data/indoMMLU.csv", &csv);
    let server = serve(root, vec![]);
    let out = work.join("out");
    indolm_ok(&["download", "indommlu", "--out", out.to_str().unwrap(), "--mirror", &server.base]);
    let path = out.join("indommlu/indoMMLU.csv");
    assert_eq!(std::fs::read(&path).unwrap(), csv);
    assert_eq!(indolm_eval::indommlu::load(&path).unwrap().len(), 30);
}

/// A transfer that is cut, or that stalls mid-body, is resumed by the same command (a Range
/// request for the rest after a pause), and the file arrives whole.
#[test]
fn a_cut_or_stalled_transfer_is_resumed_within_one_command() {
    let work = scratch("dl-retry");
    let root = work.join("mirror");
    let mut body = b"subject,level,kelas,soal,jawaban,kunci,is_for_fewshot\n".to_vec();
    for i in 0..12_000 {
        body.extend(format!("IPA,SD,4,Soal nomor {i} ...,\"A. satu\nB. dua\",A,0\n").as_bytes());
    }
    put(&root, "raw.githubusercontent.com/fajri91/IndoMMLU/main/data/indoMMLU.csv", &body);
    let path = "/raw.githubusercontent.com/fajri91/IndoMMLU/main/data/indoMMLU.csv".to_string();
    for (cut, stall) in [(vec![path.clone()], vec![]), (vec![], vec![path.clone()])] {
        let server = serve_with_stalls(root.clone(), cut, stall);
        let out = work.join(format!("out-{}", server.base.rsplit(':').next().unwrap()));
        let args = ["download", "indommlu", "--out", out.to_str().unwrap(), "--mirror", &server.base, "--timeout", "1"];
        let (stdout, stderr) = indolm_ok(&args);
        assert!(stderr.contains("retrying in 1s (1 of 5)"), "{stderr}");
        assert!(stdout.contains("bytes fetched"), "{stdout}");
        assert_eq!(std::fs::read(out.join("indommlu/indoMMLU.csv")).unwrap(), body);
        let log = server.log.lock().unwrap().clone();
        assert_eq!(log.len(), 2, "{log:?}");
        assert!(log[1].contains("range=Some("), "the retry did not resume: {log:?}");
    }
}

/// A mirror that accepts connections and never answers: each attempt ends at the timeout, the
/// retries are announced, and the command gives up with a message naming the wait.
#[test]
fn a_server_that_never_answers_times_out_instead_of_hanging() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for stream in listener.incoming().take(10) {
            held.push(stream); // accepted, never read or answered
        }
    });
    let out = scratch("dl-stalled");
    let started = std::time::Instant::now();
    let result = indolm(&[
        "download",
        "indommlu",
        "--out",
        out.to_str().unwrap(),
        "--mirror",
        &base,
        "--timeout",
        "1",
        "--retries",
        "1",
    ]);
    let elapsed = started.elapsed();
    let stderr = String::from_utf8_lossy(&result.stderr);
    assert_eq!(result.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("retrying in 1s (1 of 1)")
            && stderr.contains("no answer within 1s")
            && stderr.contains("gave up after 2 attempts"),
        "{stderr}"
    );
    // Two 1 s attempts and a 1 s wait, with a loaded machine's delays: well below the server's
    // 60 s silence.
    assert!(elapsed < std::time::Duration::from_secs(45), "took {elapsed:?}");
    println!("a silent server was given up on after {:.1}s (2 attempts, 1 s timeout)", elapsed.as_secs_f64());
}

/// What comes back is checked by its content, size and checksum known or not: an HTML page
/// saved as `.xz`, half an `.xz`, HTML as a NusaX CSV and a parquet shard that is not one are
/// each refused, naming the URL and what came back, and nothing is left behind; a rerun checks
/// an existing file instead of trusting it, and fetches a bad one again.
#[test]
fn downloads_are_checked_by_content() {
    let work = scratch("dl-content");
    let root = work.join("mirror");
    let html = b"<!DOCTYPE html><html><head><title>Index of /cc-100</title></head><body></body></html>\n";
    let text: String = (0..30000).map(|i| format!("Paragraf {i} dalam bahasa Jawa.\n")).collect();
    let mut xz = liblzma::write::XzEncoder::new(Vec::new(), 1);
    xz.write_all(text.as_bytes()).unwrap();
    let whole = xz.finish().unwrap();
    put(&root, "data.statmt.org/cc-100/jv.txt.xz", html);
    put(&root, "data.statmt.org/cc-100/su.txt.xz", &whole[..whole.len() / 2]);
    put(&root, "data.statmt.org/cc-100/id.txt.xz", &whole);
    let server = serve(root.clone(), vec![]);
    let out = work.join("out");
    let cc100 = |lang: &str| {
        ["download", "cc100", "--lang", lang, "--out", out.to_str().unwrap(), "--mirror", &server.base]
            .map(String::from)
    };
    let run = |args: &[String]| indolm_fails(&args.iter().map(String::as_str).collect::<Vec<_>>());
    let err = run(&cc100("jv"));
    assert!(
        err.contains("/data.statmt.org/cc-100/jv.txt.xz")
            && err.contains(&format!("not xz data: it holds an HTML page ({} bytes)", html.len()))
            && err.contains("the download was removed"),
        "{err}"
    );
    assert!(!out.join("cc100/jv.txt.xz").exists() && !out.join("cc100/jv.txt.xz.part").exists());
    let err = run(&cc100("su"));
    assert!(err.contains("not xz data") && err.contains("cut short"), "{err}");
    assert!(!out.join("cc100/su.txt.xz").exists() && !out.join("cc100/su.txt.xz.part").exists());

    // A bad file left by an earlier version (or by hand) is checked, not trusted, and replaced.
    std::fs::create_dir_all(out.join("cc100")).unwrap();
    std::fs::write(out.join("cc100/id.txt.xz"), html).unwrap();
    let args = cc100("id");
    let (stdout, stderr) = indolm_ok(&args.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(stderr.contains("not xz data: it holds an HTML page") && stderr.contains("fetching it again"), "{stderr}");
    assert!(stdout.contains("bytes fetched (content checked)"), "{stdout}");
    assert_eq!(std::fs::read(out.join("cc100/id.txt.xz")).unwrap(), whole);
    let (stdout, _) = indolm_ok(&args.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(stdout.contains("already complete (content checked)"), "{stdout}");

    // HTML where NusaX's CSV should be.
    put(&root, "raw.githubusercontent.com/IndoNLP/nusax/main/datasets/sentiment/acehnese/train.csv", html);
    let err = indolm_fails(&["download", "nusax", "--out", out.to_str().unwrap(), "--mirror", &server.base]);
    assert!(err.contains("acehnese/train.csv") && err.contains("not a CSV file: it holds an HTML page"), "{err}");
    assert!(!out.join("nusax/sentiment/acehnese/train.csv").exists());
}
