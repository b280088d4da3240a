//! `indolm download`: the public pretraining and evaluation sources, fetched over HTTPS with a
//! progress bar, resumable partial downloads (`<file>.part` and an HTTP Range request), a size
//! and SHA-256 check where the host publishes them, and always a check of the content
//! ([`content`]: xz structure, parquet footer, CSV columns) before a file counts as complete. A `mirror` base URL replaces every
//! host (`<mirror>/<host>/<path>`), for offline mirrors and for the tests' loopback server.
//! Every request has connect and read timeouts, and a failed transfer is retried (resuming
//! from what arrived) with growing pauses, so a stalled mirror never hangs a job.
pub(crate) mod content;

use crate::error::{Error, IoContext, Result};
pub(crate) use content::Content;
use indicatif::{ProgressBar, ProgressStyle};
use std::io::{IsTerminal, Read, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// One file to fetch: where from, where to, and what it must be.
#[derive(Debug, Clone, PartialEq)]
pub struct FileSpec {
    /// Where the file is published (the mirror, if any, is applied when fetching).
    pub url: String,
    /// Local path it is saved to.
    pub dest: PathBuf,
    /// Expected size in bytes, when the host lists it.
    pub size: Option<u64>,
    /// Expected SHA-256 (lowercase hex), when the host lists it.
    pub sha256: Option<String>,
    /// What the file must hold, checked always.
    pub content: Content,
}

const CC100: &str = "https://data.statmt.org/cc-100";
const HF_WIKIPEDIA: &str = "https://huggingface.co/datasets/wikimedia/wikipedia";
const HF_WIKIPEDIA_API: &str = "https://huggingface.co/api/datasets/wikimedia/wikipedia/tree/main";
const INDOMMLU: &str = "https://raw.githubusercontent.com/fajri91/IndoMMLU/main/data/indoMMLU.csv";
const NUSAX: &str = "https://raw.githubusercontent.com/IndoNLP/nusax/main/datasets";
/// The 12 NusaX sentiment languages, as the dataset's folders name them.
pub const NUSAX_LANGUAGES: [&str; 12] = [
    "acehnese",
    "balinese",
    "banjarese",
    "buginese",
    "english",
    "indonesian",
    "javanese",
    "madurese",
    "minangkabau",
    "ngaju",
    "sundanese",
    "toba_batak",
];

/// How long to wait for the network, and how often to try again.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Patience {
    /// The longest wait to connect, for the response's headers, and for each read of the body.
    pub timeout: Duration,
    /// Further attempts after a failed one (a timeout, a refused or cut connection, HTTP 5xx).
    pub retries: u32,
}

impl Default for Patience {
    /// 60 s per wait, 5 retries (pauses of 1, 2, 4, 8 and 16 s between them).
    fn default() -> Self {
        Patience { timeout: Duration::from_secs(60), retries: 5 }
    }
}

/// Fetches `FileSpec`s over HTTPS, or from a mirror, with a progress bar when stderr is a terminal.
pub struct Downloader {
    agent: ureq::Agent,
    mirror: Option<String>,
    show_progress: bool,
    patience: Patience,
}

/// A failed attempt, and whether another attempt may succeed (the network) or cannot (a missing
/// file, a checksum, the local disk).
struct Failure {
    error: Error,
    transient: bool,
}

impl From<Error> for Failure {
    /// Local errors (files, checks) are not worth retrying.
    fn from(error: Error) -> Self {
        Failure { error, transient: false }
    }
}

impl Downloader {
    /// A downloader with the default [`Patience`]; `mirror` (a trailing `/` ignored) replaces
    /// every host when given.
    pub fn new(mirror: Option<String>) -> Self {
        Self::with_patience(mirror, Patience::default())
    }

    /// A downloader that waits and retries as `patience` says.
    pub fn with_patience(mirror: Option<String>, patience: Patience) -> Self {
        let t = Some(patience.timeout);
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_resolve(t)
            .timeout_connect(t)
            .timeout_send_request(t)
            .timeout_recv_response(t)
            .timeout_per_read(t)
            .build()
            .into();
        Downloader {
            agent,
            mirror: mirror.map(|m| m.trim_end_matches('/').to_string()),
            show_progress: std::io::stderr().is_terminal(),
            patience,
        }
    }

    /// The URL actually requested: with a mirror, `https://host/path` becomes `<mirror>/host/path`.
    pub fn resolve(&self, url: &str) -> String {
        match &self.mirror {
            Some(m) => format!("{m}/{}", url.split_once("://").map_or(url, |(_, rest)| rest)),
            None => url.to_string(),
        }
    }

    /// One GET (from byte `range_from` when > 0); a network failure is transient.
    fn get(&self, url: &str, range_from: u64) -> std::result::Result<ureq::http::Response<ureq::Body>, Failure> {
        let mut req = self.agent.get(url);
        if range_from > 0 {
            req = req.header("Range", format!("bytes={range_from}-"));
        }
        req.call().map_err(|e| Failure {
            error: Error::download(format!("download {url}"), network_message(&e.to_string(), self.patience.timeout)),
            transient: true,
        })
    }

    /// Runs `attempt` until it succeeds, fails for good, or has been retried
    /// `patience.retries` times, pausing 1, 2, 4 … 30 s between attempts.
    fn retrying<T>(&self, mut attempt: impl FnMut() -> std::result::Result<T, Failure>) -> Result<T> {
        let mut pause = Duration::from_secs(1);
        for retry in 1.. {
            match attempt() {
                Ok(value) => return Ok(value),
                Err(f) if f.transient && retry <= self.patience.retries => {
                    let _ = writeln!(
                        std::io::stderr(),
                        "{}; retrying in {}s ({retry} of {})",
                        f.error,
                        pause.as_secs(),
                        self.patience.retries
                    );
                    std::thread::sleep(pause);
                    pause = (pause * 2).min(Duration::from_secs(30));
                }
                Err(f) if f.transient => {
                    let tries = self.patience.retries + 1;
                    return Err(Error::download(
                        "download",
                        format!("{} (gave up after {tries} attempt{})", f.error, if tries == 1 { "" } else { "s" }),
                    ));
                }
                Err(f) => return Err(f.error),
            }
        }
        unreachable!("the loop returns")
    }

    /// CC-100 for one language: `<out>/cc100/<lang>.txt.xz`.
    pub fn cc100(&self, lang: &str, out: &Path) -> Vec<FileSpec> {
        vec![FileSpec {
            url: format!("{CC100}/{lang}.txt.xz"),
            dest: out.join("cc100").join(format!("{lang}.txt.xz")),
            size: None,
            sha256: None,
            content: Content::Xz,
        }]
    }

    /// The Wikipedia parquet shards of `<date>.<lang>`, with sizes and SHA-256 from the hub's listing.
    pub fn wikipedia(&self, date: &str, lang: &str, out: &Path) -> Result<Vec<FileSpec>> {
        let config = format!("{date}.{lang}");
        let url = self.resolve(&format!("{HF_WIKIPEDIA_API}/{config}"));
        let text = self.retrying(|| {
            let resp = self.get(&url, 0)?;
            let status = resp.status().as_u16();
            if status != 200 {
                return Err(Failure {
                    error: Error::download(
                        format!("download wikipedia {config}"),
                        format!("listing {url} answered HTTP {status}"),
                    ),
                    transient: status >= 500,
                });
            }
            let mut text = String::new();
            resp.into_body().into_reader().read_to_string(&mut text).map_err(|e| Failure {
                error: Error::download(
                    format!("download {url}"),
                    network_message(&e.to_string(), self.patience.timeout),
                ),
                transient: true,
            })?;
            Ok(text)
        })?;
        let listing: serde_json::Value =
            serde_json::from_str(&text).map_err(|e| Error::download(format!("listing {url}"), e.to_string()))?;
        let files: Vec<FileSpec> = listing
            .as_array()
            .into_iter()
            .flatten()
            .filter(|f| f["type"] == "file" && f["path"].as_str().is_some_and(|p| p.ends_with(".parquet")))
            .map(|f| -> Result<FileSpec> {
                let path = f["path"].as_str().unwrap();
                // The server names the files; each must land under `<out>/wikipedia/`.
                if !indolm_core::files::stays_inside(Path::new(path)) {
                    return Err(Error::download(
                        format!("listing {url}"),
                        format!(
                            "names the file {}, which is not a relative path inside its dataset: refused",
                            indolm_core::files::quoted(path)
                        ),
                    ));
                }
                Ok(FileSpec {
                    url: format!("{HF_WIKIPEDIA}/resolve/main/{path}"),
                    dest: out.join("wikipedia").join(path),
                    size: f["size"].as_u64(),
                    sha256: f["lfs"]["oid"].as_str().map(String::from),
                    content: Content::Parquet,
                })
            })
            .collect::<Result<_>>()?;
        if files.is_empty() {
            return Err(Error::download(
                format!("download wikipedia {config}"),
                format!("no parquet shards listed at {url} (is the date/language right?)"),
            ));
        }
        Ok(files)
    }

    /// NusaX in the layout of `tests/data/nusax`: sentiment (12 languages × train/valid/test,
    /// `sentiment/<language>/<split>.csv`), the translation corpus (`mt/<split>.csv`, one column
    /// per language) and the bilingual lexicon (`lexicon/<language>.csv`, Indonesian to each of
    /// the other 11).
    pub fn nusax(&self, out: &Path) -> Vec<FileSpec> {
        let root = out.join("nusax");
        let sentiment = NUSAX_LANGUAGES.iter().flat_map(|lang| {
            ["train", "valid", "test"].map(|split| FileSpec {
                url: format!("{NUSAX}/sentiment/{lang}/{split}.csv"),
                dest: root.join("sentiment").join(lang).join(format!("{split}.csv")),
                size: None,
                sha256: None,
                content: Content::csv(&["text", "label"]),
            })
        });
        let mt = ["train", "valid", "test"].map(|split| FileSpec {
            url: format!("{NUSAX}/mt/{split}.csv"),
            dest: root.join("mt").join(format!("{split}.csv")),
            size: None,
            sha256: None,
            content: Content::csv(&NUSAX_LANGUAGES),
        });
        let lexicon = NUSAX_LANGUAGES.iter().filter(|l| **l != "indonesian").map(|lang| FileSpec {
            url: format!("{NUSAX}/lexicon/{lang}.csv"),
            dest: root.join("lexicon").join(format!("{lang}.csv")),
            size: None,
            sha256: None,
            content: Content::csv(&["indonesian", lang]),
        });
        sentiment.chain(mt).chain(lexicon).collect()
    }

    /// IndoMMLU's CSV: `<out>/indommlu/indoMMLU.csv`.
    pub fn indommlu(&self, out: &Path) -> Vec<FileSpec> {
        vec![FileSpec {
            url: INDOMMLU.into(),
            dest: out.join("indommlu").join("indoMMLU.csv"),
            size: None,
            sha256: None,
            content: Content::csv(&["subject", "level", "kelas", "soal", "jawaban", "kunci"]),
        }]
    }

    /// Fetches one file: skipped when the file there passes every check (a rerun checks it again
    /// rather than trusting it; one that fails is fetched anew), resumed from `.part`,
    /// verified, renamed; retried as [`Patience`] says. Returns the bytes this call transferred.
    pub fn fetch(&self, spec: &FileSpec) -> Result<u64> {
        if spec.dest.exists() {
            match verify(spec, &spec.dest) {
                Ok(()) => return Ok(0),
                Err(e) => {
                    eprintln!("warning: {e}; fetching it again");
                    std::fs::remove_file(&spec.dest).with_path(&spec.dest)?;
                }
            }
        }
        if let Some(dir) = spec.dest.parent() {
            std::fs::create_dir_all(dir).with_path(dir)?;
        }
        let mut fetched = 0;
        self.retrying(|| {
            let (n, complete) = self.fetch_once(spec)?;
            fetched += n;
            complete.map(|_| fetched)
        })
    }

    /// One attempt: the bytes it transferred, and whether the file is now complete (or why
    /// not). Bytes that arrived before a failure stay in `.part` for the next attempt.
    #[allow(clippy::type_complexity)]
    fn fetch_once(&self, spec: &FileSpec) -> std::result::Result<(u64, std::result::Result<(), Failure>), Failure> {
        let part = PathBuf::from(format!("{}.part", spec.dest.display()));
        let have = std::fs::metadata(&part).map(|m| m.len()).unwrap_or(0);
        let url = self.resolve(&spec.url);
        let resp = self.get(&url, have)?;
        let (append, total) = match resp.status().as_u16() {
            206 => (true, content_length(&resp).map(|n| n + have)),
            200 => (false, content_length(&resp)),
            416 if spec.size == Some(have) => (true, Some(have)),
            code => {
                return Err(Failure {
                    error: Error::download(format!("download {url}"), format!("HTTP {code}")),
                    transient: code >= 500,
                })
            }
        };
        if let (Some(expected), Some(total)) = (spec.size, total) {
            if expected != total {
                return Err(Error::download(
                    format!("download {url}"),
                    format!("the server offers {total} bytes, the listing says {expected}"),
                )
                .into());
            }
        }
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .write(true)
            .append(append)
            .truncate(!append)
            .open(&part)
            .with_path(&part)?;
        let start = if append { have } else { 0 };
        let bar = self.bar(&spec.dest, total, start);
        let mut reader = resp.into_body().into_reader();
        let mut buf = vec![0u8; 1 << 16];
        let mut written = start;
        let mut cut = None;
        loop {
            let n = match reader.read(&mut buf) {
                Ok(n) => n,
                Err(e) => {
                    let why = network_message(&e.to_string(), self.patience.timeout);
                    cut = Some(format!("{why} after {written} bytes; run the command again to resume"));
                    break;
                }
            };
            if n == 0 {
                break;
            }
            file.write_all(&buf[..n]).with_path(&part)?;
            written += n as u64;
            if let Some(b) = &bar {
                b.set_position(written);
            }
        }
        file.sync_all().with_path(&part)?;
        if let Some(b) = bar {
            b.finish_and_clear();
        }
        let fetched = written - start;
        if let (None, Some(total)) = (&cut, total) {
            if written != total {
                cut =
                    Some(format!("connection ended after {written} of {total} bytes; run the command again to resume"));
            }
        }
        if let Some(why) = cut {
            let error = Error::download(format!("download {url}"), why);
            return Ok((fetched, Err(Failure { error, transient: true })));
        }
        if let Err(e) = verify(spec, &part) {
            std::fs::remove_file(&part).with_path(&part)?;
            return Err(Error::download(format!("download {url}"), format!("{e}; the download was removed")).into());
        }
        std::fs::rename(&part, &spec.dest).with_path(&spec.dest)?;
        Ok((fetched, Ok(())))
    }

    fn bar(&self, dest: &Path, total: Option<u64>, start: u64) -> Option<ProgressBar> {
        self.show_progress.then(|| {
            let bar = ProgressBar::new(total.unwrap_or(0)).with_style(
                ProgressStyle::default_bar()
                    .template("{msg} {bar:30} {bytes}/{total_bytes} {bytes_per_sec} ETA {eta}")
                    .expect("valid template"),
            );
            bar.set_message(dest.file_name().map(|n| n.to_string_lossy().to_string()).unwrap_or_default());
            bar.set_position(start);
            bar
        })
    }
}

/// A network error's text, with the timeout named when it was one.
fn network_message(error: &str, timeout: Duration) -> String {
    if error.to_lowercase().contains("timeout") || error.to_lowercase().contains("timed out") {
        format!("{error} (no answer within {}s; --timeout sets the wait)", timeout.as_secs())
    } else {
        error.to_string()
    }
}

fn content_length(resp: &ureq::http::Response<ureq::Body>) -> Option<u64> {
    resp.headers().get("content-length")?.to_str().ok()?.parse().ok()
}

/// Checks a file against the expected size and SHA-256 (when known), then its content; an
/// error names the file and what it holds instead.
pub(crate) fn verify(spec: &FileSpec, path: &Path) -> Result<()> {
    let len = std::fs::metadata(path).with_path(path)?.len();
    if let Some(size) = spec.size {
        if len != size {
            return Err(Error::invalid(path, format!("size {len} bytes, expected {size}")));
        }
    }
    if let Some(expected) = &spec.sha256 {
        let found = indolm_core::files::sha256_file(path)?;
        if &found != expected {
            return Err(Error::invalid(path, format!("SHA-256 {found}, expected {expected}")));
        }
    }
    if let Some(why) = spec.content.check(path)? {
        let what = content::describe(path)?;
        return Err(Error::invalid(path, format!("not {}: it holds {what}; {why}", spec.content.name())));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mirror_replaces_the_scheme_and_keeps_host_and_path() {
        let url = "https://data.statmt.org/cc-100/jv.txt.xz";
        assert_eq!(Downloader::new(None).resolve(url), url);
        assert_eq!(
            Downloader::new(Some("http://127.0.0.1:8080/".into())).resolve(url),
            "http://127.0.0.1:8080/data.statmt.org/cc-100/jv.txt.xz"
        );
    }

    #[test]
    fn file_layouts() {
        let d = Downloader::new(None);
        let out = Path::new("data");
        let cc = d.cc100("su", out);
        assert_eq!(cc[0].dest, Path::new("data/cc100/su.txt.xz"));
        let nusax = d.nusax(out);
        assert_eq!(nusax.len(), 36 + 3 + 11);
        assert_eq!(nusax[0].url, format!("{NUSAX}/sentiment/acehnese/train.csv"));
        assert_eq!(nusax[35].dest, Path::new("data/nusax/sentiment/toba_batak/test.csv"));
        assert_eq!(nusax[38].url, format!("{NUSAX}/mt/test.csv"));
        assert_eq!(nusax[38].dest, Path::new("data/nusax/mt/test.csv"));
        assert_eq!(nusax[49].url, format!("{NUSAX}/lexicon/toba_batak.csv"));
        assert!(nusax.iter().all(|f| !f.dest.ends_with("lexicon/indonesian.csv")));
        assert_eq!(d.indommlu(out)[0].dest, Path::new("data/indommlu/indoMMLU.csv"));
    }

    #[test]
    fn verify_checks_size_then_sha256_then_content() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("abc");
        std::fs::write(&path, b"abc").unwrap();
        // SHA-256 of "abc" (FIPS 180-2's example).
        let sha = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";
        let spec = |size: Option<u64>, sha256: Option<&str>| FileSpec {
            url: String::new(),
            dest: path.clone(),
            size,
            sha256: sha256.map(String::from),
            content: Content::csv(&["a"]),
        };
        std::fs::write(&path, b"a\n1\n").unwrap();
        assert!(verify(&spec(None, None), &path).is_ok());
        std::fs::write(&path, b"abc").unwrap();
        let err = verify(&spec(Some(3), Some(sha)), &path).unwrap_err().to_string();
        assert!(err.contains("not a CSV file: it holds text starting \"abc\" (3 bytes)"), "{err}");
        let err = verify(&spec(Some(4), Some(sha)), &path).unwrap_err().to_string();
        assert!(err.ends_with("size 3 bytes, expected 4"), "{err}");
        let err = verify(&spec(Some(3), Some(&sha.replace('b', "c"))), &path).unwrap_err().to_string();
        assert!(err.contains(&format!("SHA-256 {sha}, expected")), "{err}");
    }
}
