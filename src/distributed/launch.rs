//! How a data-parallel job was launched, read from the environment its launcher sets:
//! torchrun (`RANK`, `WORLD_SIZE`, `LOCAL_RANK`, `MASTER_ADDR`, `MASTER_PORT`) or Slurm's
//! `srun` (`SLURM_PROCID`, `SLURM_NTASKS`, `SLURM_LOCALID`, with `MASTER_ADDR` defaulting to
//! the first host of `SLURM_JOB_NODELIST`). A process started by neither is a single process.
use crate::error::{Error, Result};

/// One process's place in a data-parallel job.
#[derive(Debug, Clone, PartialEq)]
pub struct Launch {
    /// Which launcher set the variables: `torchrun` or `slurm`.
    pub launcher: &'static str,
    /// This process's rank, `0..world_size`.
    pub rank: usize,
    /// The number of processes.
    pub world_size: usize,
    /// The rank on this node (the GPU it takes).
    pub local_rank: usize,
    /// Where the rendezvous store listens.
    pub master_addr: String,
    /// Its port.
    pub master_port: u16,
    /// torchrun's agent already serves the store (`TORCHELASTIC_USE_AGENT_STORE=True`): every
    /// rank connects to it as a client.
    pub agent_store: bool,
    /// `GLOO_SOCKET_IFNAME`: the network interface Gloo binds to.
    pub gloo_interface: Option<String>,
}

/// The port used when Slurm launches without `MASTER_PORT` (torchrun's default).
pub(crate) const DEFAULT_PORT: u16 = 29500;

impl Launch {
    /// The launch described by this process's environment; `None` for a plain process.
    pub fn from_env() -> Result<Option<Launch>> {
        Self::from_vars(|name| std::env::var(name).ok())
    }

    /// The launch described by the variables `get` returns (the environment, or a test's).
    pub(crate) fn from_vars(get: impl Fn(&str) -> Option<String>) -> Result<Option<Launch>> {
        let number = |name: &str| -> Result<Option<usize>> {
            get(name)
                .map(|v| {
                    v.trim().parse::<usize>().map_err(|_| {
                        Error::argument(format!("environment {name}"), format!("expected a number, found {v:?}"))
                    })
                })
                .transpose()
        };
        let required = |name: &str, launcher: &str| -> Result<usize> {
            number(name)?.ok_or_else(|| {
                Error::argument(format!("environment {name}"), format!("not set, though {launcher} variables are"))
            })
        };
        let (launcher, rank, world_size, local_rank, master_addr) = if get("WORLD_SIZE").is_some() {
            let world = required("WORLD_SIZE", "torchrun")?;
            let rank = required("RANK", "torchrun")?;
            let local = number("LOCAL_RANK")?.unwrap_or(0);
            let addr = get("MASTER_ADDR").ok_or_else(|| {
                Error::argument("environment MASTER_ADDR", "not set, though WORLD_SIZE is (torchrun sets both)")
            })?;
            ("torchrun", rank, world, local, addr)
        } else if get("SLURM_NTASKS").is_some() && get("SLURM_PROCID").is_some() {
            let world = required("SLURM_NTASKS", "Slurm")?;
            let rank = required("SLURM_PROCID", "Slurm")?;
            let local = number("SLURM_LOCALID")?.unwrap_or(0);
            let addr = match get("MASTER_ADDR") {
                Some(addr) => addr,
                None => {
                    let nodes = get("SLURM_JOB_NODELIST").or_else(|| get("SLURM_NODELIST")).ok_or_else(|| {
                        Error::argument(
                            "environment MASTER_ADDR",
                            "not set, and no SLURM_JOB_NODELIST to take the first host from",
                        )
                    })?;
                    first_host(&nodes)?
                }
            };
            ("slurm", rank, world, local, addr)
        } else {
            return Ok(None);
        };
        if world_size == 0 || rank >= world_size {
            return Err(Error::argument(
                "environment RANK",
                format!("rank {rank} does not fit a world of {world_size} process(es)"),
            ));
        }
        let master_port = match get("MASTER_PORT") {
            Some(p) => p.trim().parse::<u16>().map_err(|_| {
                Error::argument("environment MASTER_PORT", format!("expected a port number, found {p:?}"))
            })?,
            None if launcher == "slurm" => DEFAULT_PORT,
            None => {
                return Err(Error::argument("environment MASTER_PORT", "not set, though WORLD_SIZE is"));
            }
        };
        Ok(Some(Launch {
            launcher,
            rank,
            world_size,
            local_rank,
            master_addr,
            master_port,
            agent_store: get("TORCHELASTIC_USE_AGENT_STORE").is_some_and(|v| v.eq_ignore_ascii_case("true")),
            gloo_interface: get("GLOO_SOCKET_IFNAME").filter(|v| !v.is_empty()),
        }))
    }

    /// Whether this process serves the rendezvous store (rank 0, unless torchrun's agent does).
    pub(crate) fn serves_store(&self) -> bool {
        self.rank == 0 && !self.agent_store
    }

    /// The address Gloo's transport should bind to: loopback for a job on loopback, else
    /// `None` (this host's name, as PyTorch does).
    pub(crate) fn gloo_host(&self) -> Option<&str> {
        let a = self.master_addr.as_str();
        (a == "localhost" || a.starts_with("127.") || a == "::1").then_some("127.0.0.1")
    }
}

/// The first host of a Slurm host list: `gpu[003-010,012],cpu1` gives `gpu003`,
/// `rack[1-2]-n[07,9]` gives `rack1-n07`.
pub(crate) fn first_host(list: &str) -> Result<String> {
    let bad = || Error::argument("environment SLURM_JOB_NODELIST", format!("cannot read the host list {list:?}"));
    let mut host = String::new();
    let mut rest = list.trim();
    while let Some(c) = rest.chars().next() {
        match c {
            ',' => break,
            '[' => {
                let end = rest.find(']').ok_or_else(bad)?;
                let first = rest[1..end].split([',', '-']).next().filter(|f| !f.is_empty()).ok_or_else(bad)?;
                host.push_str(first);
                rest = &rest[end + 1..];
            }
            _ => {
                host.push(c);
                rest = &rest[c.len_utf8()..];
            }
        }
    }
    if host.is_empty() {
        return Err(bad());
    }
    Ok(host)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn launch(vars: &[(&str, &str)]) -> Result<Option<Launch>> {
        let map: HashMap<String, String> = vars.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        Launch::from_vars(|k| map.get(k).cloned())
    }

    #[test]
    fn torchrun_and_slurm_variables_and_plain_processes() {
        assert_eq!(launch(&[]).unwrap(), None);
        let t = launch(&[
            ("RANK", "3"),
            ("WORLD_SIZE", "8"),
            ("LOCAL_RANK", "3"),
            ("MASTER_ADDR", "node1"),
            ("MASTER_PORT", "29400"),
            ("TORCHELASTIC_USE_AGENT_STORE", "True"),
        ])
        .unwrap()
        .unwrap();
        assert_eq!((t.launcher, t.rank, t.world_size, t.local_rank, t.master_port), ("torchrun", 3, 8, 3, 29400));
        assert!(t.agent_store && !t.serves_store() && t.gloo_host().is_none());
        let s = launch(&[
            ("SLURM_PROCID", "0"),
            ("SLURM_NTASKS", "16"),
            ("SLURM_LOCALID", "0"),
            ("SLURM_JOB_NODELIST", "gpu[003-010,012]"),
        ])
        .unwrap()
        .unwrap();
        assert_eq!((s.launcher, s.master_addr.as_str(), s.master_port), ("slurm", "gpu003", DEFAULT_PORT));
        assert!(s.serves_store());
    }

    #[test]
    fn inconsistent_variables_are_one_line_errors() {
        let err = launch(&[("RANK", "2"), ("WORLD_SIZE", "2"), ("MASTER_ADDR", "h"), ("MASTER_PORT", "1")]);
        assert!(err.unwrap_err().to_string().contains("rank 2 does not fit a world of 2"));
        let err = launch(&[("WORLD_SIZE", "2"), ("MASTER_ADDR", "h"), ("MASTER_PORT", "1")]).unwrap_err();
        assert!(err.to_string().contains("environment RANK: not set"), "{err}");
        let err = launch(&[("RANK", "0"), ("WORLD_SIZE", "two"), ("MASTER_ADDR", "h"), ("MASTER_PORT", "1")]);
        assert!(err.unwrap_err().to_string().contains("expected a number, found \"two\""));
        let err = launch(&[("RANK", "0"), ("WORLD_SIZE", "2"), ("MASTER_ADDR", "h"), ("MASTER_PORT", "99999")]);
        assert!(err.unwrap_err().to_string().contains("MASTER_PORT: expected a port number"));
    }

    #[test]
    fn first_host_of_slurm_host_lists() {
        assert_eq!(first_host("node7").unwrap(), "node7");
        assert_eq!(first_host("gpu[003-010,012],cpu1").unwrap(), "gpu003");
        assert_eq!(first_host("rack[1-2]-n[07,9]").unwrap(), "rack1-n07");
        assert!(first_host("gpu[003").is_err() && first_host("").is_err());
    }
}
