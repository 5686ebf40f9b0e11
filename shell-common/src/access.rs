//! `--allowed-ips`: which client addresses may talk to the daemon.

use std::fmt;
use std::net::IpAddr;

/// One allowed network: an address and a prefix length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Network {
    addr: IpAddr,
    prefix: u8,
}

/// Why an `--allowed-ips` entry was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AccessError {
    /// Not an address or network.
    BadEntry(String),
}

impl fmt::Display for AccessError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AccessError::BadEntry(e) => write!(f, "bad --allowed-ips entry {e:?}: want ADDR, ADDR/BITS or a spamd-style prefix like 10. or 192.168.1."),
        }
    }
}

impl std::error::Error for AccessError {}

impl Network {
    /// Parses `1.2.3.4`, `10.0.0.0/8`, `::1`, `2001:db8::/32`, or spamd's `10.` / `192.168.` prefixes.
    pub fn parse(text: &str) -> Result<Network, AccessError> {
        let bad = || AccessError::BadEntry(text.to_string());
        let text = text.trim();
        if let Some((addr, bits)) = text.split_once('/') {
            let addr: IpAddr = addr.parse().map_err(|_| bad())?;
            let prefix: u8 = bits.parse().map_err(|_| bad())?;
            let max = if addr.is_ipv4() { 32 } else { 128 };
            if prefix > max {
                return Err(bad());
            }
            return Ok(Network { addr, prefix });
        }
        if let Ok(addr) = text.parse::<IpAddr>() {
            let prefix = if addr.is_ipv4() { 32 } else { 128 };
            return Ok(Network { addr, prefix });
        }
        // spamd accepts dotted prefixes such as "10." or "192.168.1".
        let parts: Vec<&str> = text.trim_end_matches('.').split('.').collect();
        if parts.is_empty() || parts.len() > 3 {
            return Err(bad());
        }
        let mut octets = [0u8; 4];
        for (o, p) in octets.iter_mut().zip(&parts) {
            *o = p.parse().map_err(|_| bad())?;
        }
        Ok(Network { addr: IpAddr::from(octets), prefix: (parts.len() * 8) as u8 })
    }

    /// Whether `ip` is inside this network (IPv4-mapped IPv6 addresses count as IPv4).
    pub fn contains(&self, ip: IpAddr) -> bool {
        let ip = match ip {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
            v4 => v4,
        };
        match (self.addr, ip) {
            (IpAddr::V4(net), IpAddr::V4(ip)) => {
                let mask = if self.prefix == 0 { 0 } else { u32::MAX << (32 - u32::from(self.prefix)) };
                u32::from(net) & mask == u32::from(ip) & mask
            }
            (IpAddr::V6(net), IpAddr::V6(ip)) => {
                let mask = if self.prefix == 0 { 0 } else { u128::MAX << (128 - u32::from(self.prefix)) };
                u128::from(net) & mask == u128::from(ip) & mask
            }
            _ => false,
        }
    }
}

/// The allowed networks; spamd's default is localhost only.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AccessList {
    networks: Vec<Network>,
}

impl AccessList {
    /// Parses comma- or space-separated entries; empty input gives spamd's default (127.0.0.1, ::1).
    pub fn parse<'a>(entries: impl IntoIterator<Item = &'a str>) -> Result<AccessList, AccessError> {
        let mut networks = Vec::new();
        for entry in entries {
            for item in entry.split([',', ' ']).filter(|s| !s.is_empty()) {
                networks.push(Network::parse(item)?);
            }
        }
        if networks.is_empty() {
            networks.push(Network::parse("127.0.0.1")?);
            networks.push(Network::parse("::1")?);
        }
        Ok(AccessList { networks })
    }

    /// Whether a client at `ip` may connect.
    pub fn allows(&self, ip: IpAddr) -> bool {
        self.networks.iter().any(|n| n.contains(ip))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allows_table() {
        let cases: &[(&[&str], &str, bool)] = &[
            (&[], "127.0.0.1", true),
            (&[], "::1", true),
            (&[], "127.0.0.2", false),
            (&[], "::ffff:127.0.0.1", true),
            (&["10.0.0.0/8"], "10.9.8.7", true),
            (&["10.0.0.0/8"], "11.0.0.1", false),
            (&["10."], "10.200.0.1", true),
            (&["192.168.1"], "192.168.1.77", true),
            (&["192.168.1"], "192.168.2.1", false),
            (&["127.0.0.1,192.168.0.0/16"], "192.168.44.1", true),
            (&["2001:db8::/32"], "2001:db8:1::5", true),
            (&["2001:db8::/32"], "2001:db9::5", false),
            (&["0.0.0.0/0"], "8.8.8.8", true),
        ];
        for (entries, ip, want) in cases {
            let list = AccessList::parse(entries.iter().copied()).expect("valid list");
            assert_eq!(list.allows(ip.parse().expect("ip")), *want, "{entries:?} {ip}");
        }
    }

    #[test]
    fn bad_entries_table() {
        for bad in ["10.0.0.0/33", "hello", "1.2.3.4/x", "::1/129", "300.", "1.2.3.4.5.6"] {
            assert!(AccessList::parse([bad]).is_err(), "{bad}");
        }
    }
}
