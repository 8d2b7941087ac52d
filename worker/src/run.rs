//! The worker process body: pin, build one monoio runtime, open the connections, then turn issue
//! commands into requests on free connections and each response into one record.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use loadgen_wire::{
    monotonic_ns, FailureKind, InFlightTable, IssueCmd, IssueConsumer, RecordHeader,
    RecordProducer, WorkerRole, NO_ENDPOINT,
};
use monoio::io::AsyncReadRent;

use crate::exit::{EXIT_COORDINATOR_GONE, EXIT_OK, EXIT_SETUP_FAILED};
use crate::http::conn::{Conn, ConnectError, Outcome};
use crate::http::tls::TlsClient;
use crate::request::{ApiType, Endpoint, RequestTable};

/// One endpoint as a worker sees it: where its slots connect, what they send, and how their
/// local side is bound.
#[derive(Clone, Debug)]
pub struct WorkerEndpoint {
    /// Where this endpoint's slots connect; `endpoint.tls` set (an `https://` URL) makes each
    /// of them TLS, verified as its `Verify` says.
    pub endpoint: Endpoint,
    /// Every row's request bytes for this endpoint (its Host header and path differ).
    pub requests: Arc<RequestTable>,
    /// Of this endpoint's slots (numbered by `slot_endpoint`'s ordinal), those from this index
    /// on bind a local port before they connect (odd ports: past the even half of the
    /// ephemeral range, a plain connect scans it); its slot count or more: none do.
    pub bind_from_slot: u32,
    /// Local addresses this endpoint's connections bind to before connecting, one per slot in
    /// turn (by ordinal); empty = the kernel picks the source address.
    pub source_addresses: Vec<std::net::IpAddr>,
}

impl WorkerEndpoint {
    /// `endpoint` with its table, its slots connecting from the kernel's choice of address and
    /// port (no bind first, no source address).
    pub fn new(endpoint: Endpoint, requests: Arc<RequestTable>) -> WorkerEndpoint {
        WorkerEndpoint {
            endpoint,
            requests,
            bind_from_slot: u32::MAX,
            source_addresses: Vec::new(),
        }
    }
}

/// What the coordinator gives one worker (its part of the plan).
#[derive(Clone, Debug)]
pub struct WorkerSpec {
    pub worker_id: u16,
    /// Pin the process to this core when `Some`.
    pub core: Option<usize>,
    /// Every endpoint of the run, in the run's order (a record names its endpoint by this
    /// index, so at most `MAX_ENDPOINTS`); slot `i` connects to
    /// `slot_endpoint(first_endpoint, i, endpoints.len())`.
    pub endpoints: Vec<WorkerEndpoint>,
    /// The endpoint of this worker's slot 0: the run numbers its connections across workers
    /// and deals them to the endpoints in turn, so the split is exact over the run.
    pub first_endpoint: u32,
    pub connections: u32,
    /// Connections opened before the worker reports ready (at least one per endpoint this
    /// worker's slots reach, at most `connections`); the rest open on demand, on their slot's
    /// first request.
    pub warm_connections: u32,
    pub api: ApiType,
    pub streaming: bool,
    /// Use epoll even where io_uring works.
    pub force_epoll: bool,
    /// Longest output kept per sample; longer outputs are cut and counted.
    pub max_output_bytes: usize,
    /// Per-request timeout in ns from the request's write to its response's end; 0 = none.
    /// A request past it fails with `FailureKind::Timeout`.
    pub request_timeout_ns: u64,
    /// Agentic runs with `inject_tool_delay`: per dataset row, the pause in ns before that
    /// turn is issued after the turn before it completed (0 for none).
    pub turn_delays_ns: Option<Arc<Vec<u64>>>,
    /// Which sample each connection slot has on the wire, read by the coordinator when this
    /// worker dies (`None` in tests that do not need it).
    pub in_flight: Option<InFlightTable>,
    /// The null endpoint (`null://`): no connection is opened and every sample is answered
    /// at once with this response, so a run measures the coordinator alone.
    pub synthetic: Option<crate::synthetic::SyntheticResponse>,
    /// Where a videogen run writes videos answered as raw bytes
    /// (`INFERENCE_ENDPOINT_VIDEOGEN_FALLBACK_DIR`, read by the plan); `None` fails them.
    pub video_fallback_dir: Option<std::path::PathBuf>,
}

impl WorkerSpec {
    /// The request table of endpoint 0 (the only one of a null-endpoint run).
    pub fn first_requests(&self) -> &RequestTable {
        &self.endpoints[0].requests
    }
}

/// The coordinator forks a worker from its spec without knowing the HTTP client: it reads
/// the id and slots, writes the core and in-flight table, and calls `run_worker` in the child.
impl WorkerRole for WorkerSpec {
    fn worker_id(&self) -> u16 {
        self.worker_id
    }

    fn connections(&self) -> u32 {
        self.connections
    }

    fn endpoint_count(&self) -> usize {
        self.endpoints.len()
    }

    fn place(&mut self, core: Option<usize>, in_flight: InFlightTable) {
        self.core = core;
        self.in_flight = Some(in_flight);
    }

    fn in_flight(&self) -> Option<&InFlightTable> {
        self.in_flight.as_ref()
    }
}

/// The endpoint of slot `slot` of a worker whose slot 0 goes to `first` among `endpoints`, and
/// the slot's ordinal among that endpoint's slots of the worker: slots are dealt to the
/// endpoints in turn, so any `endpoints` consecutive slots reach each endpoint once.
pub fn slot_endpoint(first: usize, slot: usize, endpoints: usize) -> (usize, usize) {
    let n = endpoints.max(1);
    ((first + slot) % n, slot / n)
}

/// How many of a worker's `slots` reach endpoint `e` under `slot_endpoint`.
pub fn endpoint_slot_count(first: usize, slots: usize, endpoints: usize, e: usize) -> usize {
    let n = endpoints.max(1);
    // Endpoint `e` first appears at slot `(e - first) mod n`, then every n slots.
    let offset = (e + n - first % n) % n;
    if slots <= offset {
        0
    } else {
        (slots - offset).div_ceil(n)
    }
}

/// One sample waiting for a connection; an agentic conversation's first turn with the count
/// of turns after it (rows and sample ids consecutive), which the same slot runs in order.
#[derive(Clone, Copy, Debug)]
struct Job {
    sample_id: u64,
    row: u32,
    issued_ns: u64,
    /// Turns of the conversation after this one (0 for a plain sample).
    turns_left: u32,
}

impl Job {
    /// The conversation's next turn, issued by the worker when it is written.
    fn next_turn(self) -> Job {
        Job {
            sample_id: self.sample_id + 1,
            row: self.row + 1,
            issued_ns: 0,
            turns_left: self.turns_left - 1,
        }
    }

    /// The turns after this one, as jobs never issued.
    fn rest(self) -> impl Iterator<Item = Job> {
        (1..=self.turns_left).map(move |k| Job {
            sample_id: self.sample_id + u64::from(k),
            row: self.row + k,
            issued_ns: 0,
            turns_left: self.turns_left - k,
        })
    }
}

/// Wakers of tasks waiting for a condition on the worker's shared state. Each waiter owns a fixed
/// slot (its connection index), so re-polling a pending wait overwrites its waker instead of
/// growing the list: the list never holds more than one entry per task.
///
/// Slots may be put in groups (the job list groups connections by endpoint): each group keeps
/// its own stack, and `wake_one` takes the groups in turn, so at a low rate, when few
/// connections are busy, samples still go to every endpoint in turn instead of all to the
/// most recently used connection.
struct WaitList {
    slots: RefCell<Vec<Option<Waker>>>,
    /// Each slot's group (all 0 until `set_groups`).
    group_of: RefCell<Vec<usize>>,
    /// Per group, the slots holding a waker, most recent last (each index at most once).
    stacks: RefCell<Vec<Vec<usize>>>,
    /// The group `wake_one` tries first.
    next_group: Cell<usize>,
}

impl WaitList {
    fn new(slot_count: usize) -> WaitList {
        WaitList {
            slots: RefCell::new(vec![None; slot_count]),
            group_of: RefCell::new(vec![0; slot_count]),
            stacks: RefCell::new(vec![Vec::with_capacity(slot_count)]),
            next_group: Cell::new(0),
        }
    }

    /// Puts slot `i` in group `group_of[i]` of `groups`; before any slot registers.
    fn set_groups(&self, group_of: Vec<usize>, groups: usize) {
        debug_assert!(self.stacks.borrow().iter().all(Vec::is_empty));
        let per_group = |g: usize| group_of.iter().filter(|&&x| x == g).count();
        *self.stacks.borrow_mut() =
            (0..groups.max(1)).map(|g| Vec::with_capacity(per_group(g))).collect();
        *self.group_of.borrow_mut() = group_of;
    }

    fn register(&self, slot: usize, waker: &Waker) {
        let mut slots = self.slots.borrow_mut();
        if slots[slot].replace(waker.clone()).is_none() {
            let group = self.group_of.borrow()[slot];
            self.stacks.borrow_mut()[group].push(slot);
        }
    }

    /// Wakes the most recent waiter of the next group in turn that has one.
    fn wake_one(&self) {
        let groups = self.stacks.borrow().len();
        let first = self.next_group.get();
        for k in 0..groups {
            let group = (first + k) % groups;
            if let Some(waker) = self.pop_waker(group) {
                self.next_group.set((group + 1) % groups);
                waker.wake();
                return;
            }
        }
    }

    fn pop_waker(&self, group: usize) -> Option<Waker> {
        loop {
            let slot = self.stacks.borrow_mut()[group].pop()?;
            if let Some(waker) = self.slots.borrow_mut()[slot].take() {
                return Some(waker);
            }
        }
    }

    fn wake_all(&self) {
        let groups = self.stacks.borrow().len();
        for group in 0..groups {
            while let Some(waker) = self.pop_waker(group) {
                waker.wake();
            }
        }
    }

    /// Resolves once `ready()` holds; re-checked each time the task is woken.
    fn until<'a, F: Fn() -> bool + 'a>(
        &'a self,
        slot: usize,
        ready: F,
    ) -> impl Future<Output = ()> + 'a {
        WaitUntil { list: self, slot, ready }
    }
}

struct WaitUntil<'a, F> {
    list: &'a WaitList,
    slot: usize,
    ready: F,
}

impl<F: Fn() -> bool> Future for WaitUntil<'_, F> {
    type Output = ();
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if (self.ready)() {
            return Poll::Ready(());
        }
        self.list.register(self.slot, cx.waker());
        Poll::Pending
    }
}

/// State shared by the worker's tasks (one thread, so `Rc` + `Cell`/`RefCell`).
struct Shared {
    spec: WorkerSpec,
    /// Each endpoint's TLS client (`None`: plain HTTP), for slots built on demand.
    tls: Vec<Option<Rc<TlsClient>>>,
    queue: RefCell<VecDeque<Job>>,
    queue_limit: usize,
    stopping: Cell<bool>,
    aborting: Cell<bool>,
    /// On-demand connects under way (see `ON_DEMAND_CONNECTS_IN_FLIGHT`).
    connects_in_flight: Cell<usize>,
    coordinator_gone: Cell<bool>,
    jobs: WaitList,
    space: WaitList,
    abort: WaitList,
    records: RefCell<RecordProducer>,
    /// Records were pushed since the doorbell task last flushed.
    unflushed: Cell<bool>,
    /// The doorbell task's wake-up (slot 0).
    flush: WaitList,
    /// Tells the doorbell task to end.
    flusher_done: Cell<bool>,
    warned_usage: Cell<bool>,
    warned_truncated: Cell<bool>,
}

/// The worker process body: the child calls this right after fork, then `_exit`s with its
/// return value (0 ok, 3 setup failed, 4 coordinator gone).
pub fn run_worker(spec: WorkerSpec, issue: IssueConsumer, mut records: RecordProducer) -> i32 {
    if let Some(core) = spec.core {
        if !core_affinity::set_for_current(core_affinity::CoreId { id: core }) {
            records.push_warning(&format!("worker {}: cannot pin to core {core}", spec.worker_id));
        }
    }
    if let Some(response) = spec.synthetic.clone() {
        let mut issue = issue;
        return crate::synthetic::run_synthetic(
            spec.worker_id,
            spec.connections,
            &response,
            &mut issue,
            &mut records,
        );
    }
    // The TLS configs, built before any connect: a bad CA bundle or an empty system store is
    // a setup error here, not a failed handshake per connection.
    let tls = match tls_clients(&spec.endpoints) {
        Ok(tls) => tls,
        Err(e) => {
            records.push_setup_failed(&format!("worker {}: {e}", spec.worker_id));
            records.push_done();
            return EXIT_SETUP_FAILED;
        }
    };
    let entries = (spec.connections.saturating_mul(2)).clamp(256, 32768).next_power_of_two();
    let mut runtime = match build_runtime(spec.force_epoll, entries) {
        Ok((runtime, warning)) => {
            if let Some(warning) = warning {
                records.push_warning(&format!("worker {}: {warning}", spec.worker_id));
            }
            runtime
        }
        Err(e) => {
            records.push_setup_failed(&format!(
                "worker {}: cannot start runtime: {e}",
                spec.worker_id
            ));
            records.push_done();
            return EXIT_SETUP_FAILED;
        }
    };
    let slot_count = spec.connections as usize;
    let queue_limit = (slot_count * 2).max(64);
    let shared = Rc::new(Shared {
        spec,
        tls,
        queue: RefCell::new(VecDeque::with_capacity(queue_limit)),
        queue_limit,
        stopping: Cell::new(false),
        aborting: Cell::new(false),
        connects_in_flight: Cell::new(0),
        coordinator_gone: Cell::new(false),
        jobs: WaitList::new(slot_count),
        space: WaitList::new(1),
        abort: WaitList::new(slot_count),
        records: RefCell::new(records),
        unflushed: Cell::new(false),
        flush: WaitList::new(1),
        flusher_done: Cell::new(false),
        warned_usage: Cell::new(false),
        warned_truncated: Cell::new(false),
    });
    runtime.block_on(worker_main(shared, issue))
}

type Runtime = monoio::FusionRuntime<
    monoio::time::TimeDriver<monoio::IoUringDriver>,
    monoio::time::TimeDriver<monoio::LegacyDriver>,
>;

/// io_uring unless refused or disabled; then epoll, with the reason as a warning. Both with the
/// timer, which the per-request timeout needs (without one no timer is ever armed).
fn build_runtime(force_epoll: bool, entries: u32) -> std::io::Result<(Runtime, Option<String>)> {
    let forced_by_env = std::env::var_os("MONOIO_FORCE_LEGACY_DRIVER").is_some();
    let mut warning = None;
    if !force_epoll && !forced_by_env {
        let builder = monoio::RuntimeBuilder::<monoio::IoUringDriver>::new();
        match builder.with_entries(entries).enable_timer().build() {
            Ok(runtime) => return Ok((runtime.into(), None)),
            Err(e) => warning = Some(format!("io_uring refused ({e}); using epoll")),
        }
    }
    let runtime = monoio::RuntimeBuilder::<monoio::LegacyDriver>::new().enable_timer().build()?;
    Ok((runtime.into(), warning))
}

/// One TLS client per endpoint (`None` for `http://`); endpoints with equal settings (same
/// host and verification) share one, so the roots are read once per distinct setting.
fn tls_clients(
    endpoints: &[WorkerEndpoint],
) -> Result<Vec<Option<Rc<TlsClient>>>, crate::http::tls::TlsSetupError> {
    let mut built: Vec<(&crate::http::tls::TlsSettings, Rc<TlsClient>)> = Vec::new();
    let mut out = Vec::with_capacity(endpoints.len());
    for ep in endpoints {
        let Some(settings) = ep.endpoint.tls.as_ref() else {
            out.push(None);
            continue;
        };
        let client = match built.iter().find(|(s, _)| *s == settings) {
            Some((_, client)) => client.clone(),
            None => {
                let client = Rc::new(TlsClient::new(settings)?);
                built.push((settings, client.clone()));
                client
            }
        };
        out.push(Some(client));
    }
    Ok(out)
}

/// The endpoint's URL as the user reads it (the plan stripped any userinfo before).
pub fn endpoint_url(ep: &Endpoint) -> String {
    let scheme = if ep.tls.is_some() { "https" } else { "http" };
    let host = if ep.host.contains(':') && !ep.host.starts_with('[') {
        format!("[{}]", ep.host)
    } else {
        ep.host.clone()
    };
    format!("{scheme}://{host}:{}{}", ep.port, ep.path_prefix)
}

/// Connects in flight at once while a worker opens its warm connections (the reference's
/// `max_concurrent_warmup_connects`).
pub const WARMUP_CONNECTS_IN_FLIGHT: usize = 128;

async fn worker_main(shared: Rc<Shared>, mut issue: IssueConsumer) -> i32 {
    let spec = &shared.spec;
    let (opened, first_errors) = open_warm_connections(spec, &shared.tls).await;
    let open_count = opened.iter().filter(|c| c.is_open()).count() as u32;
    if let Some(message) = unreachable_endpoint(spec, &opened, &first_errors) {
        let mut records = shared.records.borrow_mut();
        records.push_setup_failed(&format!("worker {}: {message}", spec.worker_id));
        records.push_done();
        return EXIT_SETUP_FAILED;
    }
    let slots = pool_slots(spec, opened);
    let groups = slots.iter().map(|s| s.endpoint(spec)).collect();
    shared.jobs.set_groups(groups, spec.endpoints.len());
    let tasks: Vec<_> = slots
        .into_iter()
        .enumerate()
        .map(|(slot, conn)| monoio::spawn(conn_task(shared.clone(), slot, conn)))
        .collect();
    // Idle tasks wait on a stack (the last to register is woken first). monoio runs spawned
    // tasks in order, so once this marker task has run every slot task has registered, the
    // open connections (spawned last) on top: a closed slot connects only when every open
    // connection is busy. Only then is the worker ready: a sample the scheduler issues from
    // here on is taken by a connection at once, so a schedule that starts at the ready
    // barrier is kept from its first sample.
    monoio::spawn(async {}).await;
    if !shared.records.borrow_mut().push_ready(open_count) {
        shared.coordinator_gone.set(true);
        shared.aborting.set(true);
        shared.jobs.wake_all();
        for task in tasks {
            task.await;
        }
        return EXIT_COORDINATOR_GONE;
    }
    shared.records.borrow_mut().defer_doorbell(true);
    let flusher = monoio::spawn(doorbell_task(shared.clone()));
    issue_loop(&shared, &mut issue).await;
    if shared.stopping.get() || shared.aborting.get() {
        shared.jobs.wake_all();
    }
    let mut all_done = std::pin::pin!(async {
        for task in tasks {
            task.await;
        }
    });
    let mut done = false;
    if !shared.aborting.get() {
        // After Stop the coordinator may still abort the drain (at the cap or its timeout).
        monoio::select! {
            _ = &mut all_done => done = true,
            _ = abort_after_stop(&shared, &issue) => {}
        }
    }
    if !done {
        all_done.await;
    }
    shared.flusher_done.set(true);
    shared.flush.wake_all();
    flusher.await;
    shared.records.borrow_mut().defer_doorbell(false);
    cancel_queued(&shared);
    if shared.coordinator_gone.get() {
        return EXIT_COORDINATOR_GONE;
    }
    shared.records.borrow_mut().push_done();
    EXIT_OK
}

/// Why this worker cannot start: an endpoint its slots reach with no warm connection open
/// (the first one, named with its URL and the connect error), or no slot at all.
fn unreachable_endpoint(
    spec: &WorkerSpec,
    slots: &[Conn],
    first_errors: &[Option<ConnectError>],
) -> Option<String> {
    if slots.is_empty() {
        return Some("no connections configured".to_string());
    }
    let n = spec.endpoints.len();
    let first = spec.first_endpoint as usize;
    for (e, ep) in spec.endpoints.iter().enumerate() {
        let reached = endpoint_slot_count(first, spec.connections as usize, n, e) > 0;
        if !reached || slots.iter().any(|c| c.is_open() && usize::from(c.endpoint()) == e) {
            continue;
        }
        let url = endpoint_url(&ep.endpoint);
        // A certificate that did not verify says so, names the host and what to pass.
        let why = match &first_errors[e] {
            Some(err) => err.message(ep.endpoint.addr),
            None => "no connection opened".to_string(),
        };
        return Some(format!("endpoint {url}: {why}"));
    }
    None
}

/// Warm connections of a worker: what the plan asks, at least one per endpoint its slots
/// reach (the first `endpoints` slots reach each once), at most its slots.
fn warm_count(spec: &WorkerSpec) -> usize {
    let slots = spec.connections as usize;
    let per_endpoint = slots.min(spec.endpoints.len().max(1));
    (spec.warm_connections as usize).max(per_endpoint).min(slots)
}

/// The connection of pool slot `index` (closed): slot `index` reaches endpoint `e`; it leaves
/// from that endpoint's source address `ordinal % len` (`http::ports` sizes each address's
/// share of the run, and `bind_from_slot` counts per endpoint and address).
fn new_slot_conn(spec: &WorkerSpec, tls: &[Option<Rc<TlsClient>>], index: usize) -> Conn {
    let (e, ordinal) = slot_endpoint(spec.first_endpoint as usize, index, spec.endpoints.len());
    let ep = &spec.endpoints[e];
    let sources = &ep.source_addresses;
    let mut conn = Conn::new(ep.endpoint.addr, spec.api, spec.max_output_bytes);
    conn.set_endpoint(e as u8);
    conn.set_bind_before_connect(ordinal >= ep.bind_from_slot as usize);
    conn.set_source_address((!sources.is_empty()).then(|| sources[ordinal % sources.len()]));
    conn.set_tls(tls[e].clone());
    conn.acc.video_fallback_dir = spec.video_fallback_dir.clone();
    conn
}

/// A pool slot as its task starts: a warm connection (open, or closed after a failed connect),
/// or the index of one not built yet. The pool's other slots cost nothing until a sample finds
/// every open connection busy: a large pool ceiling (`Connections::max_connections`) is only
/// what the load may grow to.
enum Slot {
    Built(Box<Conn>),
    Lazy(usize),
}

impl Slot {
    fn endpoint(&self, spec: &WorkerSpec) -> usize {
        match self {
            Slot::Built(conn) => usize::from(conn.endpoint()),
            Slot::Lazy(index) => {
                slot_endpoint(spec.first_endpoint as usize, *index, spec.endpoints.len()).0
            }
        }
    }
}

/// The worker's pool: the slots never built first, then the warm ones as
/// `open_warm_connections` returns them (closed first, open last).
fn pool_slots(spec: &WorkerSpec, warm: Vec<Conn>) -> Vec<Slot> {
    let slot_count = spec.connections as usize;
    let mut slots: Vec<Slot> = Vec::with_capacity(slot_count);
    slots.extend((warm.len()..slot_count).map(Slot::Lazy));
    slots.extend(warm.into_iter().map(|conn| Slot::Built(Box::new(conn))));
    slots
}

/// Builds the worker's warm connections and opens them (`warm_count`, at least one per
/// endpoint), at most `WARMUP_CONNECTS_IN_FLIGHT` connects at a time; for an `https://`
/// endpoint each connect includes its TLS handshake, so warm connections handshake before the
/// worker is ready, outside the measured window. They come back closed first, open last; a
/// slot whose connect failed stays closed and reconnects on its first request. Also returns
/// each endpoint's first connect error.
async fn open_warm_connections(
    spec: &WorkerSpec,
    tls: &[Option<Rc<TlsClient>>],
) -> (Vec<Conn>, Vec<Option<ConnectError>>) {
    let warm_count = warm_count(spec);
    let n = spec.endpoints.len();
    let new_conn = |index: usize| new_slot_conn(spec, tls, index);
    let pending: Rc<RefCell<Vec<Conn>>> = Rc::new(RefCell::new(Vec::with_capacity(warm_count)));
    pending.borrow_mut().extend((0..warm_count).map(new_conn));
    let connected = Rc::new(RefCell::new(Vec::with_capacity(warm_count)));
    let first_errors: Rc<RefCell<Vec<Option<ConnectError>>>> =
        Rc::new(RefCell::new((0..n).map(|_| None).collect()));
    let connectors: Vec<_> = (0..warm_count.min(WARMUP_CONNECTS_IN_FLIGHT))
        .map(|_| {
            let (pending, connected, first_errors) =
                (pending.clone(), connected.clone(), first_errors.clone());
            monoio::spawn(async move {
                loop {
                    let conn = pending.borrow_mut().pop();
                    let Some(mut conn) = conn else { return };
                    if let Err(e) = conn.connect().await {
                        first_errors.borrow_mut()[usize::from(conn.endpoint())].get_or_insert(e);
                    }
                    connected.borrow_mut().push(conn);
                }
            })
        })
        .collect();
    for connector in connectors {
        connector.await;
    }
    let mut slots: Vec<Conn> = Vec::with_capacity(warm_count);
    let warmed = std::mem::take(&mut *connected.borrow_mut());
    let (open, closed): (Vec<Conn>, Vec<Conn>) = warmed.into_iter().partition(Conn::is_open);
    slots.extend(closed);
    slots.extend(open);
    let first_errors = std::mem::take(&mut *first_errors.borrow_mut());
    (slots, first_errors)
}

/// Moves issue commands into the local queue until Stop or Abort; sleeps on the wake socket when
/// the ring is empty and on the queue when it is full.
async fn issue_loop(shared: &Rc<Shared>, issue: &mut IssueConsumer) {
    let wake = issue.wake_stream().and_then(monoio::net::UnixStream::from_std);
    let mut wake = match wake {
        Ok(wake) => wake,
        Err(e) => {
            shared.records.borrow_mut().push_warning(&format!("worker wake socket: {e}"));
            shared.aborting.set(true);
            return;
        }
    };
    let mut scratch = Vec::with_capacity(64);
    loop {
        if shared.coordinator_gone.get() {
            shared.aborting.set(true);
            shared.abort.wake_all();
            return;
        }
        if issue.abort_requested() {
            shared.aborting.set(true);
            shared.abort.wake_all();
            return;
        }
        if shared.queue.borrow().len() >= shared.queue_limit {
            // Wait for room, or for the coordinator's out-of-band abort (a wake byte).
            let s = shared.clone();
            let space = shared.space.until(0, move || s.queue.borrow().len() < s.queue_limit);
            monoio::select! {
                _ = space => {}
                _ = wake.read(Vec::with_capacity(16)) => {}
            }
            continue;
        }
        match issue.try_pop() {
            Some(IssueCmd::Issue { sample_id, row, issued_ns }) => {
                let job = Job { sample_id, row, issued_ns, turns_left: 0 };
                shared.queue.borrow_mut().push_back(job);
                shared.jobs.wake_one();
            }
            Some(IssueCmd::Conversation { first_sample_id, first_row, turns }) => {
                let job = Job {
                    sample_id: first_sample_id,
                    row: first_row,
                    issued_ns: 0,
                    turns_left: turns.saturating_sub(1),
                };
                shared.queue.borrow_mut().push_back(job);
                shared.jobs.wake_one();
            }
            Some(IssueCmd::Stop) => {
                shared.stopping.set(true);
                return;
            }
            Some(IssueCmd::Abort) => {
                shared.aborting.set(true);
                shared.abort.wake_all();
                return;
            }
            None => {
                if issue.prepare_sleep() {
                    let (_, buf) = wake.read(std::mem::take(&mut scratch)).await;
                    scratch = buf;
                    scratch.clear();
                    issue.end_sleep();
                }
            }
        }
    }
}

/// Resolves once the coordinator aborts after a Stop (its wake socket closing counts too), with
/// the in-flight exchanges told to cancel; never resolves without a wake socket.
async fn abort_after_stop(shared: &Shared, issue: &IssueConsumer) {
    let Ok(wake) = issue.wake_stream().and_then(monoio::net::UnixStream::from_std) else {
        return std::future::pending().await;
    };
    let mut wake = wake;
    loop {
        if issue.abort_requested() {
            break;
        }
        let (result, _) = wake.read(Vec::with_capacity(16)).await;
        if !matches!(result, Ok(n) if n > 0) {
            break;
        }
    }
    shared.aborting.set(true);
    shared.abort.wake_all();
    shared.jobs.wake_all();
}

/// Rings the aggregator's doorbell once per event-loop tick that pushed records, instead of once
/// per record: woken by the tick's first push, it runs after the tasks that tick already woke.
async fn doorbell_task(shared: Rc<Shared>) {
    loop {
        let s = shared.clone();
        shared.flush.until(0, move || s.unflushed.get() || s.flusher_done.get()).await;
        if shared.unflushed.replace(false) {
            shared.records.borrow_mut().flush_doorbell();
        }
        if shared.flusher_done.get() {
            return;
        }
    }
}

/// Notes a record push for the doorbell task.
fn note_push(shared: &Shared) {
    if !shared.unflushed.replace(true) {
        shared.flush.wake_one();
    }
}

/// Reports every queued, never-sent sample as cancelled (each turn of a queued conversation).
fn cancel_queued(shared: &Shared) {
    let now = monotonic_ns();
    while let Some(job) = shared.queue.borrow_mut().pop_front() {
        let outcome = Outcome::failed(FailureKind::Cancelled, now);
        push_failure_at(shared, job, outcome, (NO_ENDPOINT, 0), b"cancelled before it was sent");
        push_rest(shared, job, FailureKind::Cancelled, b"cancelled before it was sent");
    }
}

/// Reports the turns after `job` of its conversation as failed by `kind`, never sent. A
/// `TurnAborted` turn is issued and fails at once (as the reference publishes its skipped
/// turns' failures), holding no connection; a `Cancelled` one was never issued, as a queued
/// closed-loop sample an abort cancels.
fn push_rest(shared: &Shared, job: Job, kind: FailureKind, error: &[u8]) {
    for turn in job.rest() {
        let now = monotonic_ns();
        let issued_ns = if kind == FailureKind::Cancelled { 0 } else { now };
        let turn = Job { issued_ns, ..turn };
        if issued_ns != 0 {
            note_issued(shared, turn.sample_id, turn.row, now);
        }
        push_failure_at(shared, turn, Outcome::failed(kind, now), (NO_ENDPOINT, 0), error);
    }
}

async fn conn_task(shared: Rc<Shared>, slot: usize, conn: Slot) {
    let (mut conn, index) = match conn {
        Slot::Built(conn) => (Some(*conn), 0),
        Slot::Lazy(index) => (None, index),
    };
    serve(&shared, slot, &mut conn, index).await;
    if let Some(conn) = &mut conn {
        conn.close_with_reset();
    }
}

/// Connects of closed pool slots under way at once, per worker.
pub const ON_DEMAND_CONNECTS_IN_FLIGHT: usize = 32;

/// One on-demand connect under way; frees its place (and wakes a waiting slot) when dropped,
/// also when an abort drops the connect.
struct ConnectSlot<'a>(&'a Shared);

impl<'a> ConnectSlot<'a> {
    fn take(shared: &'a Shared) -> ConnectSlot<'a> {
        shared.connects_in_flight.set(shared.connects_in_flight.get() + 1);
        ConnectSlot(shared)
    }
}

impl Drop for ConnectSlot<'_> {
    fn drop(&mut self) {
        self.0.connects_in_flight.set(self.0.connects_in_flight.get() - 1);
        self.0.jobs.wake_one();
    }
}

/// Runs the slot's exchanges until the worker stops or aborts; a slot not built yet
/// (`None`) builds connection `index` for its first sample.
async fn serve(shared: &Rc<Shared>, slot: usize, conn: &mut Option<Conn>, index: usize) {
    loop {
        // A closed slot takes a sample only while fewer than ON_DEMAND_CONNECTS_IN_FLIGHT
        // connects are under way: an overloaded endpoint grows the pool at a bounded pace
        // instead of burying the event loop in connects.
        let may_take = |s: &Shared, open: bool| {
            open || s.connects_in_flight.get() < ON_DEMAND_CONNECTS_IN_FLIGHT
        };
        let open = conn.as_ref().is_some_and(Conn::is_open);
        let job = if may_take(shared, open) { shared.queue.borrow_mut().pop_front() } else { None };
        let Some(job) = job else {
            if shared.stopping.get() || shared.aborting.get() {
                return;
            }
            let s = shared.clone();
            shared
                .jobs
                .until(slot, move || {
                    (!s.queue.borrow().is_empty() && may_take(&s, open))
                        || s.stopping.get()
                        || s.aborting.get()
                })
                .await;
            continue;
        };
        shared.space.wake_one();
        if shared.aborting.get() {
            shared.queue.borrow_mut().push_front(job);
            return;
        }
        // Closed-loop patterns leave the issue stamp to the worker: the sample is issued when
        // its request is written, not when it was queued behind busy connections.
        let mut job = job;
        // An agentic conversation's first turn waits out its own tool delay too, as the
        // reference delays every turn it issues by its row's `delay_seconds` (other runs have
        // no delays and skip the call).
        let has_delays = shared.spec.turn_delays_ns.is_some();
        if has_delays && !tool_delay(shared, slot, job.row).await {
            shared.queue.borrow_mut().push_front(job);
            return;
        }
        if job.issued_ns == 0 {
            job.issued_ns = monotonic_ns();
            note_issued(shared, job.sample_id, job.row, job.issued_ns);
        }
        let conn = conn.get_or_insert_with(|| new_slot_conn(&shared.spec, &shared.tls, index));
        if run_turns(shared, slot, conn, job).await == JobEnd::Aborted {
            return;
        }
    }
}

/// Runs `job` on the slot's connection and, for an agentic conversation, each later turn as
/// soon as the one before it succeeded (after the next turn's tool delay): no round trip to
/// the coordinator between turns. A failed turn fails the rest as `TurnAborted`; an abort
/// cancels them. Returns how the last exchange ended.
async fn run_turns(shared: &Rc<Shared>, slot: usize, conn: &mut Conn, first: Job) -> JobEnd {
    let mut job = first;
    loop {
        let end = exchange_job(shared, slot, conn, job).await;
        // The record is in the ring: the sample is no longer this slot's.
        if let Some(table) = &shared.spec.in_flight {
            table.clear(slot);
        }
        if job.turns_left == 0 {
            return end;
        }
        match end {
            JobEnd::Aborted => {
                push_rest(shared, job, FailureKind::Cancelled, b"cancelled by abort");
                return end;
            }
            JobEnd::Done(FailureKind::None) => {}
            JobEnd::Done(kind) => {
                let why = format!("prior turn failed: {}", kind.as_str());
                push_rest(shared, job, FailureKind::TurnAborted, why.as_bytes());
                return end;
            }
        }
        let next = job.next_turn();
        if !tool_delay(shared, slot, next.row).await {
            push_rest(shared, job, FailureKind::Cancelled, b"cancelled by abort");
            return JobEnd::Aborted;
        }
        job = next;
        job.issued_ns = monotonic_ns();
        note_issued(shared, job.sample_id, job.row, job.issued_ns);
    }
}

/// Waits out the tool delay before the turn of dataset row `row` (`inject_tool_delay`);
/// returns false when the worker aborted during it.
async fn tool_delay(shared: &Rc<Shared>, slot: usize, row: u32) -> bool {
    let delay_ns = shared.spec.turn_delays_ns.as_ref().and_then(|d| d.get(row as usize).copied());
    let delay_ns = delay_ns.unwrap_or(0);
    if delay_ns == 0 {
        return !shared.aborting.get();
    }
    let s = shared.clone();
    let aborted = shared.abort.until(slot, move || s.aborting.get());
    let timer = monoio::time::sleep(std::time::Duration::from_nanos(delay_ns));
    monoio::select! {
        _ = timer => !shared.aborting.get(),
        _ = aborted => false,
    }
}

/// How a job's exchange ended for its slot: the worker aborted, or its record (success or
/// failure of this kind) is pushed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum JobEnd {
    Aborted,
    Done(FailureKind),
}

/// How one job's exchange ended.
enum Ended {
    Exchanged(Outcome),
    TimedOut,
    Aborted,
}

/// Runs one job on `conn` and pushes its record; returns whether the worker aborted, else the
/// record's failure kind.
async fn exchange_job(shared: &Rc<Shared>, slot: usize, conn: &mut Conn, job: Job) -> JobEnd {
    let endpoint = usize::from(conn.endpoint());
    let request = shared.spec.endpoints[endpoint].requests.row_bytes(job.row as usize);
    let timeout_ns = shared.spec.request_timeout_ns;
    // Not written yet (an abort in the connect leaves no stamp); raw videos take its uuid.
    (conn.sent_ns, conn.acc.sample_id) = (0, job.sample_id);
    let ended = {
        let s = shared.clone();
        let aborted = shared.abort.until(slot, move || s.aborting.get());
        let exchange = async {
            if !conn.is_open() {
                let _connecting = ConnectSlot::take(shared);
                // A failed connect is reported by the exchange, which tries once more.
                let _ = conn.connect().await;
            }
            // From here the request may be on the wire: a worker that dies now has sent it.
            if let Some(table) = &shared.spec.in_flight {
                table.set(slot, job.sample_id);
            }
            let on_first_chunk = |first_chunk_ns| {
                let mut records = shared.records.borrow_mut();
                if !records.push_first_chunk(job.sample_id, first_chunk_ns) {
                    shared.coordinator_gone.set(true);
                }
            };
            let exchange = conn.exchange_noticing(&request, monotonic_ns, &on_first_chunk);
            if timeout_ns == 0 {
                // No timer armed: a run without a timeout pays nothing for it.
                return Ended::Exchanged(exchange.await);
            }
            let timer = monoio::time::sleep(std::time::Duration::from_nanos(timeout_ns));
            monoio::select! {
                outcome = exchange => Ended::Exchanged(outcome),
                _ = timer => Ended::TimedOut,
            }
        };
        monoio::select! {
            ended = exchange => ended,
            _ = aborted => Ended::Aborted,
        }
    };
    let now = monotonic_ns();
    match ended {
        Ended::Exchanged(outcome)
            if past_deadline(conn.sent_ns, outcome.complete_ns, timeout_ns) =>
        {
            // The response and the overdue timer were handled in one wake-up: its stamps say
            // it ended past the deadline, so it is a timeout whichever the loop saw first.
            push_timeout(shared, job, conn, timeout_ns, outcome.complete_ns);
            JobEnd::Done(FailureKind::Timeout)
        }
        Ended::Exchanged(outcome) => {
            let failure = outcome.failure;
            push_result(shared, job, conn, outcome);
            JobEnd::Done(failure)
        }
        Ended::TimedOut => {
            // A reset, so a late response cannot be read as the next request's.
            conn.abandon();
            push_timeout(shared, job, conn, timeout_ns, now);
            JobEnd::Done(FailureKind::Timeout)
        }
        Ended::Aborted => {
            conn.close_with_reset();
            let outcome = Outcome::failed(FailureKind::Cancelled, now);
            push_failure(shared, job, outcome, conn, b"cancelled by abort");
            JobEnd::Aborted
        }
    }
}

/// Whether a response whose request was written at `sent_ns` (0: never written) and that
/// ended at `complete_ns` missed a request timeout of `timeout_ns` (0: none): the stamps
/// decide, not the order in which the event loop noticed the response and the timer.
pub fn past_deadline(sent_ns: u64, complete_ns: u64, timeout_ns: u64) -> bool {
    timeout_ns != 0 && sent_ns != 0 && complete_ns.saturating_sub(sent_ns) > timeout_ns
}

fn push_timeout(shared: &Shared, job: Job, conn: &Conn, timeout_ns: u64, complete_ns: u64) {
    let message = format!(
        "no complete response within {} s (the request timeout)",
        std::time::Duration::from_nanos(timeout_ns).as_secs_f64()
    );
    let outcome = Outcome::failed(FailureKind::Timeout, complete_ns);
    push_failure(shared, job, outcome, conn, message.as_bytes());
}

fn base_header(
    shared: &Shared,
    job: Job,
    outcome: Outcome,
    endpoint: u8,
    sent_ns: u64,
) -> RecordHeader {
    // A clock read can never precede the issue stamp, but keep the pair assertion true even
    // if a coordinator stamped issue times ahead.
    let complete_ns = outcome.complete_ns.max(job.issued_ns);
    RecordHeader {
        sample_id: job.sample_id,
        issued_ns: job.issued_ns,
        first_chunk_ns: 0,
        complete_ns,
        sent_ns: if sent_ns == 0 { 0 } else { sent_ns.clamp(job.issued_ns, complete_ns) },
        row: job.row,
        first_chunk_len: 0,
        reasoning_len: 0,
        tool_calls_len: 0,
        prompt_tokens: None,
        completion_tokens: None,
        http_status: outcome.http_status,
        worker_id: shared.spec.worker_id,
        failure: outcome.failure as u8,
        finish: 0,
        resent: u8::from(outcome.resent),
        endpoint,
    }
}

/// Tells the aggregator a closed-loop sample was issued (its `sample.issued` line, in time); an
/// open loop's issues are told by the scheduler, which stamps them.
fn note_issued(shared: &Shared, sample_id: u64, row: u32, issued_ns: u64) {
    if !shared.records.borrow_mut().push_issued(sample_id, row, issued_ns) {
        shared.coordinator_gone.set(true);
    }
}

/// Pushes a failure of a sample that reached connection `conn` (its endpoint and write stamp).
fn push_failure(shared: &Shared, job: Job, outcome: Outcome, conn: &Conn, error: &[u8]) {
    push_failure_at(shared, job, outcome, (conn.endpoint(), conn.sent_ns), error);
}

/// Pushes a failure: `(endpoint, sent_ns)` says where it went and when it was written (0:
/// never).
fn push_failure_at(
    shared: &Shared,
    job: Job,
    outcome: Outcome,
    (endpoint, sent_ns): (u8, u64),
    error: &[u8],
) {
    let header = base_header(shared, job, outcome, endpoint, sent_ns);
    if !shared.records.borrow_mut().push_record(&header, &[], error) {
        shared.coordinator_gone.set(true);
    }
    note_push(shared);
}

fn push_result(shared: &Shared, job: Job, conn: &Conn, outcome: Outcome) {
    let acc = &conn.acc;
    let mut header = base_header(shared, job, outcome, conn.endpoint(), conn.sent_ns);
    if acc.first_chunk_ns != 0 {
        let from_ns = job.issued_ns.max(header.sent_ns);
        header.first_chunk_ns = acc.first_chunk_ns.clamp(from_ns, header.complete_ns);
    }
    header.first_chunk_len = acc.first_chunk_len.min(acc.output.len()) as u32;
    header.reasoning_len = acc.reasoning_len as u32;
    header.tool_calls_len = acc.tool_calls_len as u32;
    header.prompt_tokens = acc.usage.prompt_tokens;
    header.completion_tokens = acc.usage.completion_tokens;
    header.finish = acc.finish as u8;
    let mut records = shared.records.borrow_mut();
    if !records.push_streamed_record(&header, &acc.output, &conn.error, acc.chunks.as_bytes()) {
        shared.coordinator_gone.set(true);
        return;
    }
    note_push(shared);
    warn_once(shared, &mut records, conn);
}

/// One warning per worker process for each kind of trouble the records alone do not show.
fn warn_once(shared: &Shared, records: &mut RecordProducer, conn: &Conn) {
    let id = shared.spec.worker_id;
    if let Some(kind) = conn.acc.usage.first_bad {
        if !shared.warned_usage.replace(true) {
            records.push_warning(&format!(
                "worker {id}: the endpoint sent {kind} as a usage count; such counts are treated as missing"
            ));
        }
    }
    if conn.acc.truncated && !shared.warned_truncated.replace(true) {
        records.push_warning(&format!(
            "worker {id}: an output exceeded {} bytes and was cut",
            shared.spec.max_output_bytes
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_dealt_to_the_endpoints_in_turn_from_the_workers_first() {
        // Worker whose slot 0 is endpoint 1 of 3: slots 0..7 reach 1, 2, 0, 1, 2, 0, 1.
        let got: Vec<(usize, usize)> = (0..7).map(|slot| slot_endpoint(1, slot, 3)).collect();
        assert_eq!(got, [(1, 0), (2, 0), (0, 0), (1, 1), (2, 1), (0, 1), (1, 2)]);
        // Any `endpoints` consecutive slots reach each endpoint once, so the ordinals of one
        // endpoint's slots count 0, 1, 2, ... with no gap.
        for first in 0..4 {
            for e in 0..4 {
                let ordinals: Vec<usize> = (0..21)
                    .map(|s| slot_endpoint(first, s, 4))
                    .filter(|x| x.0 == e)
                    .map(|x| x.1)
                    .collect();
                assert_eq!(ordinals, (0..ordinals.len()).collect::<Vec<_>>());
                assert_eq!(ordinals.len(), endpoint_slot_count(first, 21, 4, e), "{first} {e}");
            }
        }
        assert_eq!(slot_endpoint(0, 5, 1), (0, 5), "one endpoint: every slot, ordinal = slot");
    }

    #[test]
    fn slot_counts_per_endpoint_add_up_and_differ_by_at_most_one() {
        for endpoints in 1..6 {
            for first in 0..endpoints {
                for slots in 0..13 {
                    let counts: Vec<usize> = (0..endpoints)
                        .map(|e| endpoint_slot_count(first, slots, endpoints, e))
                        .collect();
                    assert_eq!(counts.iter().sum::<usize>(), slots);
                    let (min, max) = (counts.iter().min(), counts.iter().max());
                    assert!(max.unwrap() - min.unwrap() <= 1, "{counts:?}");
                }
            }
        }
        assert_eq!(endpoint_slot_count(2, 1, 3, 2), 1);
        assert_eq!(endpoint_slot_count(2, 1, 3, 0), 0, "a one-slot worker reaches one endpoint");
    }

    #[test]
    fn a_response_that_ends_past_its_deadline_is_a_timeout_whatever_the_loop_saw_first() {
        let ms = 1_000_000;
        // (sent, complete, timeout) -> past the deadline
        let cases = [
            (10 * ms, 40 * ms, 50 * ms, false),
            (10 * ms, 60 * ms, 50 * ms, false),
            (10 * ms, 60 * ms + 1, 50 * ms, true),
            (10 * ms, 400 * ms, 50 * ms, true),
            (10 * ms, 400 * ms, 0, false),
            (0, 400 * ms, 50 * ms, false),
        ];
        for (sent, complete, timeout, want) in cases {
            assert_eq!(past_deadline(sent, complete, timeout), want, "{sent} {complete} {timeout}");
        }
    }

    #[test]
    fn an_endpoint_url_names_scheme_host_port_and_prefix() {
        let ep = Endpoint::parse("http://127.0.0.1:9/team").unwrap();
        assert_eq!(endpoint_url(&ep), "http://127.0.0.1:9/team");
        let ep = Endpoint::parse("https://[::1]:8443").unwrap();
        assert_eq!(endpoint_url(&ep), "https://[::1]:8443");
    }
}
