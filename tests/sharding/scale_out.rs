//! One benchmark across several client hosts, as the engines launch it: a two-task Slurm job
//! (the project's `examples/slurm/llm-loadgen.sbatch`, on a single-node cluster this test
//! starts with `.ci/slurm-cluster.sh`) merges into the one-host run of its plan; and two shards
//! in network namespaces of their own hold 40,000 connections to one stub address, where one
//! host alone runs out of ports.
//!
//! Both need root (the Slurm daemons, `ip netns`) and Debian's `slurm-wlm`, `munge` and
//! `iproute2`, which `.ci/run` installs. A machine without them fails the test, saying what it
//! lacks (a test that did not run must not pass), unless `LOADGEN_SKIP_SLURM=1` or
//! `LOADGEN_SKIP_NETNS=1` opts out of it knowingly (never under CI).

use std::collections::BTreeSet;

use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::support::fleet::StubFleet;
use crate::support::{
    alone, bin, bin_path, char_tokenizer, read_json, report_dir, root, run, show, stub, summary,
};
use loadgen_stubs::StubKind;

/// The engines' variables a run must not inherit from a shell under Slurm or a Job.
const ENGINE_VARS: [&str; 4] =
    ["SLURM_PROCID", "SLURM_NTASKS", "JOB_COMPLETION_INDEX", "LOADGEN_SHARDS"];

/// How long a job or a shard may take before the test gives up on it (and kills it).
const RUN_DEADLINE: Duration = Duration::from_secs(240);

/// The opt-outs of the two tests that need root and system packages: set to 1, a machine that
/// lacks them skips the test, saying so; unset, the test fails there (it did not run).
const SKIP_SLURM: &str = "LOADGEN_SKIP_SLURM";
const SKIP_NETNS: &str = "LOADGEN_SKIP_NETNS";

/// Whether this machine can run the test: root and every program named. When it cannot, the
/// test fails, naming what is missing, unless `opt_out=1` skips it (never under CI, where
/// `.ci/run` installs them).
fn machine_has(test: &str, programs: &[&str], opt_out: &str) -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    let root = unsafe { libc::geteuid() } == 0;
    let missing: Vec<&str> = programs.iter().copied().filter(|p| !on_path(p)).collect();
    if root && missing.is_empty() {
        return true;
    }
    let why = format!("needs root (root: {root}) and {missing:?} on PATH");
    crate::support::skip_only_if_opted_out(test, &why, opt_out);
    false
}

fn on_path(program: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|paths| std::env::split_paths(&paths).any(|d| d.join(program).is_file()))
}

/// Waits for a child within `RUN_DEADLINE`, killing it past that.
fn wait(child: Child, what: &str) -> Output {
    crate::support::wait_output(child, what, RUN_DEADLINE)
}

/// A single-node Slurm cluster in one folder; stopped when dropped.
struct Cluster {
    dir: PathBuf,
}

impl Cluster {
    fn start(dir: PathBuf) -> Cluster {
        let out = Command::new("bash")
            .arg(root().join(".ci/slurm-cluster.sh"))
            .arg("start")
            .arg(&dir)
            .output()
            .expect("the cluster script runs");
        show(&out);
        let cluster = Cluster { dir };
        assert!(out.status.success(), "the single-node cluster starts");
        cluster
    }

    fn conf(&self) -> PathBuf {
        self.dir.join("slurm.conf")
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = Command::new("bash")
            .arg(root().join(".ci/slurm-cluster.sh"))
            .arg("stop")
            .arg(&self.dir)
            .output();
    }
}

/// The plan both the one-host run and the job run: 61 samples of the 1,000-prompt dataset at
/// concurrency 4, streamed, 7 warm-up samples, the char tokenizer.
fn write_plan(dir: &Path, url: &str) -> PathBuf {
    let dataset = crate::support::assets().join("datasets/dummy_1k.jsonl");
    let plan = format!(
        "name: slurm-job\ntype: online\nmodel_params:\n  name: test-model\n  tokenizer_name: {tokenizer}\n  streaming: \"on\"\n\
         datasets:\n  - name: perf\n    type: performance\n    path: {dataset}\n    parser:\n      \
         prompt: text_input\nsettings:\n  runtime:\n    n_samples_to_issue: 61\n    \
         min_duration_ms: 0\n  load_pattern:\n    type: concurrency\n    target_concurrency: 4\n  \
         warmup:\n    enabled: true\n    n_requests: 7\n  client:\n    num_workers: 1\n\
         endpoint_config:\n  endpoints: [\"{url}\"]\n",
        dataset = dataset.display(),
        tokenizer = char_tokenizer(),
    );
    let path = dir.join("plan.yaml");
    std::fs::write(&path, plan).unwrap();
    path
}

#[test]
fn a_two_task_slurm_job_merges_into_the_one_host_run_of_its_plan() {
    let programs = ["sbatch", "srun", "sinfo", "slurmctld", "slurmd", "munged"];
    if !machine_has("the Slurm test", &programs, SKIP_SLURM) {
        return;
    }
    // It loads both cores (a cluster and a job): it runs alone, as the other tests do not.
    let _alone = alone();
    let work = report_dir("slurm-job");
    std::fs::create_dir_all(&work).unwrap();
    let cluster = Cluster::start(work.join("cluster"));
    let server = stub(StubKind::Echo, |_| {});
    let plan = write_plan(&work, &server.url());
    let single = work.join("single");
    let out = run([
        "benchmark",
        "from-config",
        "-c",
        plan.to_str().unwrap(),
        "--report-dir",
        single.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(0), "the one-host run succeeds");

    // The example batch script as a user submits it, two tasks on the one node.
    let job_out = work.join("job");
    let mut sbatch = Command::new("sbatch");
    for var in ENGINE_VARS {
        sbatch.env_remove(var);
    }
    let log = work.join("job.out");
    let child = sbatch
        .env("SLURM_CONF", cluster.conf())
        .env("CONFIG", &plan)
        .env("LOADGEN", bin_path())
        .env("OUT", &job_out)
        .env("START_DELAY_S", "5")
        .args(["--wait", "--ntasks=2", "--ntasks-per-node=2", "--time=10"])
        .arg(format!("--output={}", log.display()))
        .arg(format!("--chdir={}", work.display()))
        .arg(root().join("examples/slurm/llm-loadgen.sbatch"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("sbatch starts");
    let out = wait(child, "the Slurm job");
    let job_log = std::fs::read_to_string(&log).unwrap_or_default();
    eprintln!("--- the job's output ---\n{job_log}");
    assert_eq!(out.status.code(), Some(0), "the job succeeds");
    let merged = job_out.join("merged");
    assert!(job_log.contains(&format!("merged report: {}", merged.display())), "{job_log}");

    // Each task was one shard, told by Slurm's own variables.
    for i in 0..2 {
        let shard = read_json(&job_out.join(format!("shard-{i}/shard.json")));
        assert_eq!((shard["index"].as_u64(), shard["count"].as_u64()), (Some(i), Some(2)));
    }
    let (s, m) = (summary(&single), summary(&merged));
    assert_eq!(
        read_json(&single.join("sample_idx_map.json")),
        read_json(&merged.join("sample_idx_map.json")),
        "the job's samples are the one-host run's, sample for sample"
    );
    for key in
        ["n_samples_issued", "n_samples_completed", "n_samples_failed", "n_samples_abandoned"]
    {
        assert_eq!(s[key], m[key], "{key}");
    }
    assert_eq!(m["n_samples_completed"], 61);
    assert_eq!(s["input_sequence_lengths"]["total"], m["input_sequence_lengths"]["total"]);
    assert_eq!(s["output_sequence_lengths"]["total"], m["output_sequence_lengths"]["total"]);
    assert_eq!(m["shards"].as_array().map(Vec::len), Some(2), "{m}");
}

/// The namespaces and links of the port test; deleted when dropped (after the processes in
/// them, which the test's other guards stop first).
struct Namespaces {
    names: Vec<String>,
}

impl Namespaces {
    /// A server namespace holding `SERVER_ADDR` on its loopback device, and `clients`
    /// namespaces, each linked to it by a veth pair: client i is 10.213.i.2, routed to the
    /// server's address through 10.213.i.1.
    fn create(clients: usize) -> Namespaces {
        let tag = std::process::id();
        let server = format!("lg{tag}s");
        let mut ns = Namespaces { names: vec![server.clone()] };
        ip(&["netns", "add", &server]);
        ip(&["-n", &server, "link", "set", "lo", "up"]);
        ip(&["-n", &server, "addr", "add", &format!("{SERVER_ADDR}/32"), "dev", "lo"]);
        for i in 0..clients {
            let client = format!("lg{tag}c{i}");
            ip(&["netns", "add", &client]);
            ns.names.push(client.clone());
            let (near, far) = (format!("lg{tag}s{i}"), format!("lg{tag}c{i}"));
            ip(&["link", "add", &near, "type", "veth", "peer", "name", &far]);
            ip(&["link", "set", &near, "netns", &server]);
            ip(&["link", "set", &far, "netns", &client]);
            ip(&["-n", &server, "addr", "add", &format!("10.213.{i}.1/24"), "dev", &near]);
            ip(&["-n", &server, "link", "set", &near, "up"]);
            ip(&["-n", &client, "addr", "add", &format!("10.213.{i}.2/24"), "dev", &far]);
            ip(&["-n", &client, "link", "set", &far, "up"]);
            ip(&["-n", &client, "link", "set", "lo", "up"]);
            let via = format!("10.213.{i}.1");
            ip(&["-n", &client, "route", "add", &format!("{SERVER_ADDR}/32"), "via", &via]);
        }
        ns
    }

    fn server(&self) -> &str {
        &self.names[0]
    }

    fn client(&self, i: usize) -> &str {
        &self.names[1 + i]
    }
}

impl Drop for Namespaces {
    fn drop(&mut self) {
        // Deleting a namespace removes its veth ends, and with them their peers.
        for name in &self.names {
            let _ = Command::new("ip").args(["netns", "del", name]).output();
        }
    }
}

/// The stub's address: not loopback, so a client cannot spread over 127.0.0.0/8 by itself.
const SERVER_ADDR: &str = "10.213.255.1";

fn ip(args: &[&str]) {
    let out = Command::new("ip").args(args).output().expect("ip runs");
    assert!(out.status.success(), "ip {args:?}: {}", String::from_utf8_lossy(&out.stderr));
}

/// The closed loop of the port test: as many samples as connections, every connection opened
/// (warmed) before the start, so the stubs accept exactly this many.
const CONNECTIONS: u64 = 40_000;

fn port_test_args(url: &str, workers: usize, dir: &Path) -> Vec<String> {
    let n = CONNECTIONS.to_string();
    let args = [
        "benchmark",
        "online",
        "--load-pattern",
        "concurrency",
        "--concurrency",
        &n,
        "--num-samples",
        &n,
        "--endpoints",
        url,
        "--model",
        "m",
        "--streaming",
        "off",
        "--workers",
        &workers.to_string(),
        "--report-dir",
        dir.to_str().unwrap(),
        "-v",
    ];
    args.map(str::to_string).to_vec()
}

fn in_namespace(namespace: &str, args: &[String]) -> Command {
    let mut cmd = Command::new("ip");
    cmd.args(["netns", "exec", namespace, bin_path()]).args(args);
    for var in ENGINE_VARS {
        cmd.env_remove(var);
    }
    cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
    cmd
}

#[test]
fn forty_thousand_connections_to_one_address_need_two_shards_in_their_own_namespaces() {
    if !machine_has("the network-namespace test", &["ip"], SKIP_NETNS) {
        return;
    }
    // 40,000 connections load both cores, and the shards' common start must not wait on
    // another test: it runs alone.
    let _alone = alone();
    let ns = Namespaces::create(2);
    // 40,000 connections over 4 stub processes (SO_REUSEPORT spreads them unevenly) and 2
    // workers per shard: 10,000 descriptors a process, under a 20,000 hard limit.
    let stubs = StubFleet::start_under(&["ip", "netns", "exec", ns.server()], SERVER_ADDR, 4);
    let url = stubs.url();
    let work = report_dir("netns-shards");
    std::fs::create_dir_all(&work).unwrap();

    // One host alone: 40,000 connections from one source address to one destination is
    // past its ports, refused before the start, saying what to do.
    let alone = work.join("alone");
    let out = wait(
        in_namespace(ns.client(0), &port_test_args(&url, 4, &alone)).spawn().unwrap(),
        "one host",
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "one host runs out of ports: {stderr}");
    assert!(stderr.contains("--source-addresses") && stderr.contains("40000"), "{stderr}");

    // Two shards, one per namespace, half the connections each, from a common start far
    // enough ahead for a debug build on 2 busy cores to open 20,000 connections (about 3 s
    // measured, 11 s when both cores were shared with a build).
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
    let start_at = format!("{:.3}", now.as_secs_f64() + 20.0);
    let dirs: Vec<PathBuf> = (0..2).map(|i| work.join(format!("shard{i}"))).collect();
    let children: Vec<Child> = (0..2)
        .map(|i| {
            let mut args = port_test_args(&url, 2, &dirs[i]);
            args.extend([
                "--shard".into(),
                format!("{i}/2"),
                "--start-at".into(),
                start_at.clone(),
            ]);
            in_namespace(ns.client(i), &args).spawn().expect("the shard starts")
        })
        .collect();
    for (i, child) in children.into_iter().enumerate() {
        let out = wait(child, &format!("shard {i}"));
        assert_eq!(out.status.code(), Some(0), "shard {i} succeeds");
    }
    let merged = work.join("merged");
    let mut merge = bin();
    merge.arg("merge").args(&dirs).arg("--out").arg(&merged);
    let out = merge.output().expect("merge runs");
    show(&out);
    assert_eq!(out.status.code(), Some(0), "the merge succeeds");
    let served = stubs.stop();

    let m = summary(&merged);
    assert_eq!(m["n_samples_completed"], CONNECTIONS, "{m}");
    assert_eq!(m["n_samples_failed"], 0, "{m}");
    let per_shard: Vec<u64> = m["shards"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["n_samples_completed"].as_u64().unwrap())
        .collect();
    assert_eq!(per_shard, [CONNECTIONS / 2, CONNECTIONS / 2]);
    assert_eq!((served.connections, served.requests), (CONNECTIONS, CONNECTIONS), "{served:?}");
    let want: BTreeSet<IpAddr> = ["10.213.0.2", "10.213.1.2"].map(|a| a.parse().unwrap()).into();
    assert_eq!(served.peers, want, "each shard's connections left from its own host");
    drop(ns);
}

/// Runs one test of this binary in a child whose PATH has none of the tests' programs, outside
/// CI, with `env` set: its output and whether it passed.
fn run_without_programs(test: &str, env: &[(&str, &str)]) -> (bool, String) {
    let mut cmd = Command::new(std::env::current_exe().expect("the test binary"));
    // The test's name in this binary: its module path without the crate's name.
    let name = format!("{}::{test}", module_path!().split_once("::").unwrap().1);
    cmd.args(["--exact", &name, "--nocapture", "--test-threads=1"]);
    cmd.env("PATH", "/nonexistent").env_remove("CI").env_remove(SKIP_SLURM).env_remove(SKIP_NETNS);
    let out = cmd.envs(env.iter().copied()).output().expect("the test binary runs");
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (out.status.success(), text)
}

/// A test that cannot run on this machine fails, naming what it lacks and the opt-out; only
/// the opt-out skips it, and then it says so.
#[test]
fn a_test_without_its_programs_fails_unless_opted_out() {
    let cases = [
        ("a_two_task_slurm_job_merges_into_the_one_host_run_of_its_plan", SKIP_SLURM),
        (
            "forty_thousand_connections_to_one_address_need_two_shards_in_their_own_namespaces",
            SKIP_NETNS,
        ),
    ];
    for (test, opt_out) in cases {
        let (passed, text) = run_without_programs(test, &[]);
        assert!(!passed, "{test} passed without running:\n{text}");
        assert!(text.contains(&format!("set {opt_out}=1 to skip it knowingly")), "{text}");
        let (passed, text) = run_without_programs(test, &[(opt_out, "1")]);
        assert!(passed, "{test} with {opt_out}=1:\n{text}");
        assert!(text.contains(&format!("not run here ({opt_out}=1 skips it)")), "{text}");
    }
}

/// The Kubernetes example as `kubectl apply` reads it: its documents, its Job's shard count
/// equal to `completions`, and the benchmark YAML in its ConfigMap valid for this binary.
#[test]
fn the_kubernetes_example_is_an_indexed_job_with_a_valid_benchmark() {
    use serde::Deserialize;
    let text = std::fs::read_to_string(root().join("examples/kubernetes/indexed-job.yaml"))
        .expect("the example is there");
    let docs: Vec<serde_yaml_ng::Value> = serde_yaml_ng::Deserializer::from_str(&text)
        .map(|d| serde_yaml_ng::Value::deserialize(d).expect("each document parses"))
        .collect();
    let kinds: Vec<&str> = docs.iter().map(|d| d["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["ConfigMap", "Job", "Job"]);
    let job = &docs[1]["spec"];
    assert_eq!(job["completionMode"].as_str(), Some("Indexed"));
    let container = &job["template"]["spec"]["containers"][0];
    let shards =
        container["env"].as_sequence().unwrap().iter().find(|e| e["name"] == "LOADGEN_SHARDS");
    let shards: u64 = shards.and_then(|e| e["value"].as_str()).unwrap().parse().unwrap();
    assert_eq!(Some(shards), job["completions"].as_u64(), "LOADGEN_SHARDS = completions");
    let args = container["args"][0].as_str().unwrap();
    assert!(args.contains("--report-dir /reports/shard-$JOB_COMPLETION_INDEX"), "{args}");
    assert!(args.contains("--start-at ${START_AT}"), "{args}");

    let dir = report_dir("k8s-example");
    std::fs::create_dir_all(&dir).unwrap();
    let bench = dir.join("bench.yaml");
    std::fs::write(&bench, docs[0]["data"]["bench.yaml"].as_str().unwrap()).unwrap();
    let out = run(["validate-yaml", "-c", bench.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "the ConfigMap's benchmark is valid");
}

/// The Slurm example is a shell script bash accepts (the Slurm test runs it in full).
#[test]
fn the_slurm_example_is_valid_bash() {
    let out = Command::new("bash")
        .arg("-n")
        .arg(root().join("examples/slurm/llm-loadgen.sbatch"))
        .output()
        .expect("bash runs");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}
