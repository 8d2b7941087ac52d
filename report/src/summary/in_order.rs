//! A JSON map read with its entries in the file's order: the summary's reader and its
//! `agentic` reader both need it, so it sits below both.

use std::fmt;
use std::marker::PhantomData;

use serde::de::{Deserialize, Deserializer, MapAccess, Visitor};

/// A JSON map's entries in the file's order (a map read into a sorted map would lose it).
pub struct InOrder<V>(pub Vec<(String, V)>);

impl<V> Default for InOrder<V> {
    fn default() -> Self {
        InOrder(Vec::new())
    }
}

impl<'de, V: Deserialize<'de>> Deserialize<'de> for InOrder<V> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Entries<V>(PhantomData<V>);
        impl<'de, V: Deserialize<'de>> Visitor<'de> for Entries<V> {
            type Value = InOrder<V>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a map")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<InOrder<V>, A::Error> {
                let mut out = Vec::with_capacity(map.size_hint().unwrap_or(0));
                while let Some(entry) = map.next_entry::<String, V>()? {
                    out.push(entry);
                }
                Ok(InOrder(out))
            }
        }
        d.deserialize_map(Entries(PhantomData))
    }
}
