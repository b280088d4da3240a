//! How a data-parallel job was launched, read from the environment its launcher sets:
//! torchrun (`RANK`, `WORLD_SIZE`, `LOCAL_RANK`, `MASTER_ADDR`, `MASTER_PORT`) or Slurm's
//! `srun` (`SLURM_PROCID`, `SLURM_NTASKS`, `SLURM_LOCALID`, with `MASTER_ADDR` defaulting to
//! the first host of `SLURM_JOB_NODELIST`). A process started by neither is a single process, and
//! so is a Slurm step of one task (a job array's task, several packed on one node: none of them
//! may serve a store on the one default port). The ranks on one node (`LOCAL_WORLD_SIZE`, or
//! Slurm's tasks per node) share its cores.
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
    /// The ranks on this node (`LOCAL_WORLD_SIZE`, else Slurm's tasks on this node, else 1):
    /// they share its cores.
    pub local_world_size: usize,
    /// `TORCHELASTIC_RESTART_COUNT`: which attempt of a torchrun job this is (0 outside
    /// torchrun). Each attempt's keys live apart in the store, which torchrun's agent keeps.
    pub restart_count: u32,
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
            if world == 1 {
                // One task is no job to join: run as a plain process, with no store to serve.
                // Packed one-GPU array tasks (recipes/slurm/compositions.sbatch) would otherwise
                // all serve theirs on MASTER_ADDR:29500, and all but the first fail.
                return Ok(None);
            }
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
        let local_world_size = match number("LOCAL_WORLD_SIZE")? {
            Some(n) => n,
            None if launcher == "slurm" => slurm_tasks_on_node(&get)?,
            None => 1,
        }
        .max(1);
        let restart_count = match get("TORCHELASTIC_RESTART_COUNT") {
            Some(v) => v.trim().parse::<u32>().map_err(|_| {
                Error::argument("environment TORCHELASTIC_RESTART_COUNT", format!("expected a number, found {v:?}"))
            })?,
            None => 0,
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
            local_world_size,
            restart_count,
        }))
    }

    /// The prefix of every key this launch's group puts in the store: the backend's, and the
    /// attempt's (a restarted torchrun job meets its agent's store again, with the last attempt's
    /// keys in it).
    pub(crate) fn store_prefix(&self, backend: &str) -> String {
        format!("indolm/{backend}/attempt-{}", self.restart_count)
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

/// The tasks Slurm runs on this node: `SLURM_NTASKS_PER_NODE`, else this node's entry
/// (`SLURM_NODEID`) of `SLURM_STEP_TASKS_PER_NODE` or `SLURM_TASKS_PER_NODE` (`8(x2),4`: 8 on
/// the first two nodes, 4 on the third), else 1.
fn slurm_tasks_on_node(get: &impl Fn(&str) -> Option<String>) -> Result<usize> {
    if let Some(n) = get("SLURM_NTASKS_PER_NODE").and_then(|v| v.trim().parse::<usize>().ok()) {
        return Ok(n);
    }
    let Some(list) = get("SLURM_STEP_TASKS_PER_NODE").or_else(|| get("SLURM_TASKS_PER_NODE")) else { return Ok(1) };
    let node = get("SLURM_NODEID").and_then(|v| v.trim().parse::<usize>().ok()).unwrap_or(0);
    tasks_per_node(&list).and_then(|counts| counts.get(node).copied()).ok_or_else(|| {
        Error::argument("environment SLURM_TASKS_PER_NODE", format!("cannot read {list:?} for node {node}"))
    })
}

/// Slurm's compressed tasks-per-node list, one count per node: `8(x2),4` gives [8, 8, 4].
fn tasks_per_node(list: &str) -> Option<Vec<usize>> {
    let mut counts = Vec::new();
    for part in list.trim().split(',') {
        let (count, times) = match part.split_once("(x") {
            Some((count, rest)) => (count, rest.strip_suffix(')')?.parse::<usize>().ok()?),
            None => (part, 1),
        };
        let count = count.trim().parse::<usize>().ok()?;
        counts.extend(std::iter::repeat_n(count, times));
    }
    Some(counts)
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
        assert_eq!(
            (t.local_world_size, t.restart_count, t.store_prefix("gloo").as_str()),
            (1, 0, "indolm/gloo/attempt-0")
        );
        let r = launch(&[
            ("RANK", "1"),
            ("WORLD_SIZE", "8"),
            ("LOCAL_WORLD_SIZE", "4"),
            ("MASTER_ADDR", "node1"),
            ("MASTER_PORT", "29400"),
            ("TORCHELASTIC_RESTART_COUNT", "2"),
        ])
        .unwrap()
        .unwrap();
        assert_eq!((r.local_world_size, r.store_prefix("nccl").as_str()), (4, "indolm/nccl/attempt-2"));
        let s = launch(&[
            ("SLURM_PROCID", "0"),
            ("SLURM_NTASKS", "16"),
            ("SLURM_LOCALID", "0"),
            ("SLURM_JOB_NODELIST", "gpu[003-010,012]"),
        ])
        .unwrap()
        .unwrap();
        assert_eq!((s.launcher, s.master_addr.as_str(), s.master_port), ("slurm", "gpu003", DEFAULT_PORT));
        // A Slurm step of one task is a plain process (no store, no port); torchrun's world of
        // one stays a group (the device check's one-rank NCCL step is launched so).
        let one_task = [("SLURM_PROCID", "0"), ("SLURM_NTASKS", "1"), ("SLURM_LOCALID", "0"), ("MASTER_ADDR", "h")];
        assert_eq!(launch(&one_task).unwrap(), None);
        let one_rank = [("RANK", "0"), ("WORLD_SIZE", "1"), ("MASTER_ADDR", "h"), ("MASTER_PORT", "1")];
        assert!(launch(&one_rank).unwrap().is_some());
        assert!(s.serves_store());
        assert_eq!(s.local_world_size, 1);
        let on_node = |node: &str| {
            launch(&[
                ("SLURM_PROCID", "0"),
                ("SLURM_NTASKS", "20"),
                ("SLURM_NODEID", node),
                ("SLURM_TASKS_PER_NODE", "8(x2),4"),
                ("MASTER_ADDR", "gpu003"),
            ])
            .unwrap()
            .unwrap()
            .local_world_size
        };
        assert_eq!((on_node("0"), on_node("1"), on_node("2")), (8, 8, 4));
        let beyond = [
            ("SLURM_PROCID", "0"),
            ("SLURM_NTASKS", "2"),
            ("SLURM_NODEID", "5"),
            ("SLURM_TASKS_PER_NODE", "2"),
            ("MASTER_ADDR", "h"),
        ];
        assert!(launch(&beyond).unwrap_err().to_string().contains("cannot read \"2\" for node 5"));
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
