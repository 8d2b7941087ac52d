//! Unit tests of the run specs of plans resolved from flags (beside the flags, which the plan
//! does not import): the workers' shares, endpoints and source addresses, the request tables.

use std::sync::Arc;

use loadgen_coordinator::cpu::CpuPlan;
use loadgen_coordinator::order::SampleOrder;
use loadgen_coordinator::LoadPattern;
use loadgen_wire::MAX_ENDPOINTS;
use loadgen_worker::http::ports::{
    bind_from_slot_over_sources, ephemeral_even_ports, ephemeral_range, ports_per_source,
};
use loadgen_worker::request::{Endpoint, RequestTable};
use loadgen_worker::{endpoint_slot_count, WorkerSpec};

use super::plan_from_args;
use crate::error::AppError;
use crate::plan::{check_endpoint_count, request_tables, worker_specs, Plan, ViewFacts};

#[test]
fn the_timeout_flag_reaches_the_workers() {
    let plan = plan_from_args(&[
        "offline",
        "--endpoints",
        "http://127.0.0.1:9,http://127.0.0.1:10",
        "--model",
        "m",
        "--timeout",
        "1.5",
    ])
    .unwrap();
    let endpoints: Vec<Endpoint> =
        plan.endpoints.iter().map(|e| Endpoint::parse(&e.url).unwrap()).collect();
    let tables = vec![Arc::new(RequestTable::new()), Arc::new(RequestTable::new())];
    let specs = worker_specs(&plan, &endpoints, &tables, 3, 12, &mut Vec::new()).unwrap();
    assert_eq!(specs.len(), 3);
    assert!(specs.iter().all(|w| w.request_timeout_ns == 1_500_000_000));
    let none = plan_from_args(&["offline"]).unwrap();
    let specs = worker_specs(&none, &endpoints, &tables, 2, 4, &mut Vec::new()).unwrap();
    assert!(specs.iter().all(|w| w.request_timeout_ns == 0), "0 = none by default");
}

/// The plan and worker specs of `connections` over `workers` to `url`, with `extra` flags.
fn specs_for(
    url: &str,
    extra: &[&str],
    workers: usize,
    connections: usize,
) -> Result<Vec<WorkerSpec>, AppError> {
    let args = [&["offline", "--endpoints", url, "--model", "m"][..], extra].concat();
    let plan = plan_from_args(&args).unwrap();
    let endpoints = vec![Endpoint::parse(url).unwrap()];
    let tables = vec![Arc::new(RequestTable::new())];
    worker_specs(&plan, &endpoints, &tables, workers, connections, &mut Vec::new())
}

fn ips(list: &[&str]) -> Vec<std::net::IpAddr> {
    list.iter().map(|a| a.parse().unwrap()).collect()
}

#[test]
fn a_loopback_run_past_one_address_gets_loopback_source_addresses() {
    let (low, high) = ephemeral_range();
    let per = ports_per_source(low, high);
    // One more than one address holds, whatever this machine's range: two addresses.
    let specs = specs_for("http://127.0.0.1:9", &[], 3, per + 1).unwrap();
    for w in &specs {
        let ep = &w.endpoints[0];
        assert_eq!(ep.source_addresses, ips(&["127.0.0.1", "127.0.0.2"]), "{}", w.worker_id);
        let share = w.connections as usize;
        let even = ephemeral_even_ports();
        assert_eq!(
            ep.bind_from_slot as usize,
            bind_from_slot_over_sources(share, per + 1, 2, even)
        );
    }
    let specs = specs_for("http://127.0.0.1:9", &[], 3, per).unwrap();
    let sources = |w: &WorkerSpec| w.endpoints[0].source_addresses.clone();
    assert!(specs.iter().all(|w| sources(w).is_empty()), "one address holds them");
    let given = ["--source-addresses", "127.0.0.3"];
    let specs = specs_for("http://127.0.0.1:9", &given, 2, 10).unwrap();
    assert!(specs.iter().all(|w| sources(w) == ips(&["127.0.0.3"])), "as given");
}

#[test]
fn a_remote_run_past_one_address_is_refused_naming_the_count_range_and_flag() {
    let (low, high) = ephemeral_range();
    let per = ports_per_source(low, high);
    let err = specs_for("http://192.0.2.1:9", &[], 2, per + 1).unwrap_err();
    assert_eq!(err.exit_code(), 3, "{err}");
    let msg = err.to_string();
    for want in [
        format!("{} connections to 192.0.2.1:9 need 2 source addresses", per + 1),
        format!("ephemeral port range {low}-{high}"),
        "give --source-addresses with 2 addresses".to_string(),
    ] {
        assert!(msg.contains(&want), "{want:?} in {msg}");
    }
    let one = ["--source-addresses", "127.0.0.2"];
    let err = specs_for("http://127.0.0.1:9", &one, 2, per + 1).unwrap_err();
    assert!(err.to_string().contains("--source-addresses gives 1"), "{err}");
}

#[test]
fn a_source_address_that_is_not_local_is_refused_before_the_run() {
    // 192.0.2.0/24 is TEST-NET-1: documentation only, never a host's address.
    let err =
        specs_for("http://192.0.2.1:9", &["--source-addresses", "192.0.2.7"], 1, 4).unwrap_err();
    assert_eq!(err.exit_code(), 2, "{err}");
    assert!(err.to_string().contains("192.0.2.7 is not an address of this host"), "{err}");
    let err = specs_for("http://localhost:9", &["--source-addresses", "::1"], 1, 4);
    let err = err.unwrap_err().to_string();
    assert!(err.contains("::1 is not of the family of endpoint localhost"), "{err}");
}

#[test]
fn a_poisson_warm_up_draws_its_schedule_and_order_from_the_warm_up_seed() {
    let plan = plan_from_args(&[
        "online",
        "--load-pattern",
        "poisson",
        "--target-qps",
        "10",
        "--endpoints",
        "http://127.0.0.1:9",
        "--model",
        "m",
        "--warmup",
        "--warmup-requests",
        "7",
        "--warmup-seed",
        "5",
    ])
    .unwrap();
    let endpoints = vec![Endpoint::parse("http://127.0.0.1:9").unwrap()];
    let cores = loadgen_coordinator::cpu::cores_available();
    let cpu_plan = CpuPlan::new(&cores, 1, false, false);
    let spec = plan.run_spec(&endpoints, cpu_plan, &ViewFacts::default(), &mut Vec::new()).unwrap();
    assert_eq!(spec.pattern, LoadPattern::Poisson { target_qps: 10.0, seed: 42 });
    assert_eq!(spec.warmup.pattern, LoadPattern::Poisson { target_qps: 10.0, seed: 5 });
    let rows = plan.dataset.rows.len();
    assert_eq!(spec.warmup.rows, SampleOrder::first_rows(rows, 6, 7));
    assert_eq!(spec.workers[0].first_requests().len(), rows, "unsalted: no extra requests");
}

/// A large header and model name are held once per endpoint, not once per dataset row: the
/// 1,000 rows of the synthetic dataset with a 100 KB header and a 4 KB model cost about
/// what the rows alone cost (issue 25: a 1 MiB header cost 1 GB).
#[test]
fn what_every_request_shares_is_held_once_per_endpoint_not_per_row() {
    let header = format!("X-Big: {}", "h".repeat(100_000));
    let model = "m".repeat(crate::plan::MAX_MODEL_NAME_BYTES);
    let url = "http://127.0.0.1:9";
    let args = ["offline", "--endpoints", url, "--model", &model, "--header", &header];
    let plan = plan_from_args(&args).unwrap();
    let small = ["offline", "--endpoints", url, "--model", "m"];
    let plain = plan_from_args(&small).unwrap();
    let endpoints = vec![Endpoint::parse(url).unwrap()];
    let bytes = |plan: &Plan| {
        let tables = request_tables(plan, &endpoints, &[]).unwrap();
        assert_eq!(tables[0].len(), plan.dataset.rows.len());
        tables[0].total_bytes()
    };
    let (big, base) = (bytes(&plan), bytes(&plain));
    assert!(big < base + 100_000 + 4_096 + 2_000, "{big} bytes against {base} without them");
    let tables = request_tables(&plan, &endpoints, &[]).unwrap();
    let request = tables[0].request(999);
    assert!(request.windows(header.len()).any(|w| w == header.as_bytes()), "sent on each");
}

/// The plan and worker specs of `connections` over `workers` to the `urls`.
fn multi_specs(urls: &[&str], workers: usize, connections: usize) -> Vec<WorkerSpec> {
    let joined = urls.join(",");
    let args = ["offline", "--endpoints", &joined, "--model", "m"];
    let plan = plan_from_args(&args).unwrap();
    let endpoints: Vec<Endpoint> = urls.iter().map(|u| Endpoint::parse(u).unwrap()).collect();
    let tables: Vec<_> = urls.iter().map(|_| Arc::new(RequestTable::new())).collect();
    worker_specs(&plan, &endpoints, &tables, workers, connections, &mut Vec::new()).unwrap()
}

/// Slots per endpoint over the whole run, from each worker's first endpoint and share.
fn run_split(specs: &[WorkerSpec], endpoints: usize) -> Vec<usize> {
    (0..endpoints)
        .map(|e| {
            let of = |w: &WorkerSpec| {
                let (first, share) = (w.first_endpoint as usize, w.connections as usize);
                endpoint_slot_count(first, share, endpoints, e)
            };
            specs.iter().map(of).sum()
        })
        .collect()
}

#[test]
fn every_worker_spreads_its_slots_over_all_endpoints_and_the_run_split_is_exact() {
    let urls = ["http://127.0.0.1:9", "http://127.0.0.1:10", "http://127.0.0.1:11"];
    // (workers, connections) -> slots per endpoint over the run.
    for (workers, connections, want) in [
        (1, 4, vec![2, 1, 1]),
        (1, 6, vec![2, 2, 2]),
        (2, 7, vec![3, 2, 2]),
        (3, 3, vec![1, 1, 1]),
        (4, 10, vec![4, 3, 3]),
    ] {
        let specs = multi_specs(&urls, workers, connections);
        assert_eq!(run_split(&specs, 3), want, "{workers} workers, {connections} connections");
        for w in &specs {
            assert_eq!(w.endpoints.len(), 3, "every worker holds every endpoint");
            let addrs: Vec<_> = w.endpoints.iter().map(|e| e.endpoint.addr.port()).collect();
            assert_eq!(addrs, [9, 10, 11], "in the run's order");
        }
    }
    // One worker, two endpoints: the default small-machine run reaches both.
    let specs = multi_specs(&urls[..2], 1, 32);
    assert_eq!(run_split(&specs, 2), [16, 16]);
    assert_eq!(specs[0].first_endpoint, 0);
    // Worker 1's slot 0 continues the run's numbering after worker 0's 3 slots.
    let specs = multi_specs(&urls[..2], 2, 5);
    assert_eq!(specs.iter().map(|w| w.first_endpoint).collect::<Vec<_>>(), [0, 1]);
}

#[test]
fn fewer_connections_than_endpoints_is_refused_naming_both_counts() {
    let plan = plan_from_args(&[
        "offline",
        "--endpoints",
        "http://127.0.0.1:9,http://127.0.0.1:10,http://127.0.0.1:11",
        "--model",
        "m",
    ])
    .unwrap();
    let endpoints: Vec<Endpoint> =
        plan.endpoints.iter().map(|e| Endpoint::parse(&e.url).unwrap()).collect();
    let tables: Vec<_> = endpoints.iter().map(|_| Arc::new(RequestTable::new())).collect();
    let err = worker_specs(&plan, &endpoints, &tables, 1, 2, &mut Vec::new()).unwrap_err();
    assert_eq!(err.exit_code(), 3, "{err}");
    let msg = err.to_string();
    assert!(msg.contains("3 endpoints need at least 3 connections"), "{msg}");
    assert!(msg.contains("the run has 2"), "{msg}");
    assert!(check_endpoint_count(MAX_ENDPOINTS + 1, 100_000).is_err());
    assert!(check_endpoint_count(MAX_ENDPOINTS, 100_000).is_ok());
}

#[test]
fn port_budgets_count_the_connections_to_each_address() {
    let (low, high) = ephemeral_range();
    let per = ports_per_source(low, high);
    // Two URLs naming one loopback address share its ports: past one source address
    // together though each alone fits.
    let urls = ["http://127.0.0.1:9", "http://127.0.0.1:9/b"];
    let specs = multi_specs(&urls, 1, per + 2);
    for ep in &specs[0].endpoints {
        assert_eq!(ep.source_addresses, ips(&["127.0.0.1", "127.0.0.2"]));
    }
    // Two addresses, each with half: one source address each holds them.
    let urls = ["http://127.0.0.1:9", "http://127.0.0.1:10"];
    let specs = multi_specs(&urls, 1, per + 2);
    assert!(specs[0].endpoints.iter().all(|ep| ep.source_addresses.is_empty()));
}
