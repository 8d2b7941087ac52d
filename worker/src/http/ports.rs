//! Local port choice for many connections to one address: Linux's `connect()` takes even
//! ephemeral ports first and, once they are all in use towards one address, scans every one of
//! them per connect; `bind()` takes odd ones. Runs with more connections than the even half
//! bind the surplus first. Past one source address's ports a run spreads its connections
//! over several source addresses (`source_addresses_for`), and the budgets here hold per source
//! address.

use std::net::IpAddr;

/// Of the even ports of the ephemeral range (the ones `connect()` takes first), the share a run
/// uses for one destination before it binds the rest of its connections first (see
/// `bind_from_slot`): the rest of the machine keeps some.
pub const EVEN_PORT_BUDGET_PERCENT: usize = 85;

/// The even ports of an ephemeral range `low..=high`.
pub fn even_ports(low: u32, high: u32) -> usize {
    if high < low {
        return 0;
    }
    (high / 2 + 1).saturating_sub(low.div_ceil(2)) as usize
}

/// The first of a worker's `share` slots that binds a local port before it connects, when the
/// run holds `endpoint_total` connections to that worker's endpoint. Linux's `connect()` takes
/// even ports first and, once they are all in use towards one address, scans every one of
/// them per connect (4,000 connects past 12,000: 8.8 s, against 0.14 s with `bind()` first,
/// which takes odd ports). Slots below the returned index connect directly; `share` when the
/// whole run fits the even ports.
pub fn bind_from_slot(share: usize, endpoint_total: usize, even_ports: usize) -> usize {
    let budget = even_ports * EVEN_PORT_BUDGET_PERCENT / 100;
    if endpoint_total <= budget {
        return share;
    }
    share * budget / endpoint_total.max(1)
}

/// `bind_from_slot` for a worker whose slots take `sources` source addresses in turn (slot
/// `i` the address `i % sources`): each address carries about `endpoint_total / sources` of
/// the run's connections and has even ports of its own, so the budget holds per address.
pub fn bind_from_slot_over_sources(
    share: usize,
    endpoint_total: usize,
    sources: usize,
    even_ports: usize,
) -> usize {
    bind_from_slot(share, endpoint_total.div_ceil(sources.max(1)), even_ports)
}

/// This machine's ephemeral range `(low, high)` (`/proc/sys/net/ipv4/ip_local_port_range`;
/// Linux's default 32768-60999 when it cannot be read).
pub fn ephemeral_range() -> (u32, u32) {
    let text =
        std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range").unwrap_or_default();
    let mut bounds = text.split_whitespace().filter_map(|n| n.parse::<u32>().ok());
    match (bounds.next(), bounds.next()) {
        (Some(low), Some(high)) if low <= high => (low, high),
        _ => (32_768, 60_999),
    }
}

/// The even ports of this machine's ephemeral range (see `ephemeral_range`).
pub fn ephemeral_even_ports() -> usize {
    let (low, high) = ephemeral_range();
    even_ports(low, high)
}

/// Of the whole ephemeral range, the share a run uses from one source address towards one
/// destination (even ports by `connect()`, odd ones by `bind()`): the rest of the machine
/// keeps some, as with `EVEN_PORT_BUDGET_PERCENT`.
pub const SOURCE_PORT_BUDGET_PERCENT: usize = 85;

/// Connections one source address may hold to one destination address and port: the
/// `SOURCE_PORT_BUDGET_PERCENT` share of the ephemeral range `low..=high`.
pub fn ports_per_source(low: u32, high: u32) -> usize {
    let ports = if high < low { 0 } else { (high - low + 1) as usize };
    ports * SOURCE_PORT_BUDGET_PERCENT / 100
}

/// Source addresses made up for a loopback endpoint at most: 127.0.0.0/8 is all local on
/// Linux, but a run needing this many (6 million connections to one address) is a mistake.
pub const LOOPBACK_SOURCES_MAX: usize = 250;

/// Which source addresses a run's connections to one destination use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SourceChoice {
    /// The given list (empty: the kernel picks) is enough.
    AsGiven,
    /// A loopback endpoint past one address's ports and no list given: these loopback
    /// addresses, 127.0.0.1 first.
    Loopback(Vec<IpAddr>),
    /// Too few addresses (the given ones, or the one the kernel would pick for an endpoint
    /// that is not IPv4 loopback): `needed` would hold the connections.
    TooFew { needed: usize },
}

/// The source-address rule: `connections` to destination `dest`, `given` source addresses
/// listed by the user (0 = none), `per_source` connections each address holds
/// (`ports_per_source`). One address holds up to `per_source`; past that a loopback endpoint
/// gets 127.0.0.1, 127.0.0.2, … (all local on Linux) and any other endpoint needs a list.
pub fn source_addresses_for(
    dest: IpAddr,
    connections: usize,
    given: usize,
    per_source: usize,
) -> SourceChoice {
    let needed = connections.div_ceil(per_source.max(1)).max(1);
    if given > 0 {
        return if given >= needed {
            SourceChoice::AsGiven
        } else {
            SourceChoice::TooFew { needed }
        };
    }
    if needed == 1 {
        return SourceChoice::AsGiven;
    }
    match dest {
        IpAddr::V4(v4) if v4.is_loopback() && needed <= LOOPBACK_SOURCES_MAX => {
            let first = u32::from(std::net::Ipv4Addr::LOCALHOST);
            let addrs = (0..needed as u32).map(|k| IpAddr::from((first + k).to_be_bytes()));
            SourceChoice::Loopback(addrs.collect())
        }
        _ => SourceChoice::TooFew { needed },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connections_past_the_even_ports_bind_first() {
        // The default range 32768-60999 has 14,116 even ports; 85% of them is 11,998.
        assert_eq!(even_ports(32768, 60999), 14_116);
        assert_eq!(even_ports(1024, 65535), 32_256);
        assert_eq!(even_ports(3, 3), 0);
        assert_eq!(even_ports(4, 4), 1);
        assert_eq!(even_ports(5, 4), 0);
        assert_eq!(bind_from_slot(1_000, 1_000, 14_116), 1_000, "a small run never binds");
        assert_eq!(bind_from_slot(16_000, 16_000, 14_116), 11_998);
        // Four workers of 4,000 towards one address: each binds past its quarter of the budget.
        assert_eq!(bind_from_slot(4_000, 16_000, 14_116), 2_999);
        assert_eq!(bind_from_slot(4_000, 16_000, 32_256), 4_000);
    }

    #[test]
    fn the_even_port_budget_holds_per_source_address() {
        // 40,000 over two addresses is 20,000 each: past the 11,998 budget of each, so a
        // worker of 13,334 binds from 13,334 * 11,998 / 20,000 = 7,999 (about 4,000 slots of
        // each address connect directly, the rest bind first).
        assert_eq!(bind_from_slot_over_sources(13_334, 40_000, 2, 14_116), 7_999);
        assert_eq!(bind_from_slot_over_sources(8_000, 16_000, 2, 14_116), 8_000, "fits each");
        assert_eq!(
            bind_from_slot_over_sources(16_000, 16_000, 1, 14_116),
            bind_from_slot(16_000, 16_000, 14_116)
        );
        assert_eq!(bind_from_slot_over_sources(100, 100, 0, 14_116), 100, "no list: as one");
    }

    #[test]
    fn one_source_address_holds_its_share_of_the_whole_range() {
        // The default range has 28,232 ports; 85% of them is 23,997.
        assert_eq!(ports_per_source(32_768, 60_999), 23_997);
        assert_eq!(ports_per_source(1_024, 65_535), 54_835);
        assert_eq!(ports_per_source(10, 9), 0);
    }

    fn v4(text: &str) -> IpAddr {
        text.parse().unwrap()
    }

    #[test]
    fn loopback_runs_past_one_address_get_more_loopback_sources() {
        let per = ports_per_source(32_768, 60_999);
        let lo = v4("127.0.0.1");
        assert_eq!(source_addresses_for(lo, 1_000, 0, per), SourceChoice::AsGiven);
        assert_eq!(source_addresses_for(lo, per, 0, per), SourceChoice::AsGiven, "exactly fits");
        assert_eq!(
            source_addresses_for(lo, 40_000, 0, per),
            SourceChoice::Loopback(vec![v4("127.0.0.1"), v4("127.0.0.2")])
        );
        assert_eq!(
            source_addresses_for(v4("127.0.0.9"), 3 * per + 1, 0, per),
            SourceChoice::Loopback(vec![
                v4("127.0.0.1"),
                v4("127.0.0.2"),
                v4("127.0.0.3"),
                v4("127.0.0.4")
            ])
        );
        let absurd = (LOOPBACK_SOURCES_MAX + 1) * per;
        let needed = LOOPBACK_SOURCES_MAX + 1;
        assert_eq!(source_addresses_for(lo, absurd, 0, per), SourceChoice::TooFew { needed });
    }

    #[test]
    fn other_endpoints_past_one_address_need_a_list() {
        let per = ports_per_source(32_768, 60_999);
        let remote = v4("10.1.2.3");
        assert_eq!(source_addresses_for(remote, per, 0, per), SourceChoice::AsGiven);
        assert_eq!(
            source_addresses_for(remote, 40_000, 0, per),
            SourceChoice::TooFew { needed: 2 }
        );
        // IPv6 has one loopback address: nothing to pick from.
        let v6_loopback: IpAddr = "::1".parse().unwrap();
        assert_eq!(
            source_addresses_for(v6_loopback, 40_000, 0, per),
            SourceChoice::TooFew { needed: 2 }
        );
        assert_eq!(source_addresses_for(remote, 40_000, 2, per), SourceChoice::AsGiven);
        assert_eq!(
            source_addresses_for(remote, 50_000, 2, per),
            SourceChoice::TooFew { needed: 3 }
        );
        // A list given for a small run is used as given, never second-guessed.
        assert_eq!(source_addresses_for(v4("127.0.0.1"), 10, 3, per), SourceChoice::AsGiven);
    }
}
