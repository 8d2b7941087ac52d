//! A worker role as the coordinator sees it before fork. The coordinator sizes a worker's
//! rings and in-flight table from its spec, writes the core and table it chose into it, and
//! hands it to the entry function the binary gave (`loadgen_worker::run_worker`), so the
//! coordinator links no HTTP or TLS client; the worker's spec implements this trait.

use super::inflight::InFlightTable;

/// One worker's part of the plan, as far as the coordinator needs it.
pub trait WorkerRole: Clone {
    /// The worker's id: its rings, its in-flight table and its records carry it.
    fn worker_id(&self) -> u16;

    /// Its connection slots: the rows of its in-flight table, and its share of a closed loop.
    fn connections(&self) -> u32;

    /// The endpoints of the run (a record names its endpoint when there are more than one).
    fn endpoint_count(&self) -> usize;

    /// Where it runs: the core to pin the process to (`None`: unpinned), and the table of the
    /// samples on its connections, which the coordinator reads should the worker die.
    fn place(&mut self, core: Option<usize>, in_flight: InFlightTable);

    /// The in-flight table `place` gave it (`None` before).
    fn in_flight(&self) -> Option<&InFlightTable>;
}
