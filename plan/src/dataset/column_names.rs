//! A dataset file's column names, gathered in time linear in their number and refused past
//! `DATASET_COLUMNS_MAX`.
//!
//! Looking each name up in the list of those seen made loading quadratic in the columns
//! (60,000 JSON Lines keys took 6–11 s, 100,000 CSV columns 16 s); a hash set beside the list
//! makes each lookup constant.

use std::collections::HashSet;
use std::fmt;

use serde::de::{DeserializeSeed, Error as _, IgnoredAny, MapAccess, Visitor};

use super::spec::DATASET_COLUMNS_MAX;
use crate::error::AppError;

/// Column names in order of first appearance, each once.
#[derive(Debug, Default)]
pub(super) struct ColumnNames {
    names: Vec<String>,
    seen: HashSet<String>,
}

impl ColumnNames {
    /// Adds `name` unless it is already there; true when it is new.
    pub(super) fn insert(&mut self, name: &str) -> bool {
        if self.seen.contains(name) {
            return false;
        }
        self.seen.insert(name.to_string());
        self.names.push(name.to_string());
        true
    }

    pub(super) fn len(&self) -> usize {
        self.names.len()
    }

    pub(super) fn into_vec(self) -> Vec<String> {
        self.names
    }
}

/// Refuses a file found to have `count` columns (all of them, or as many as were read before
/// stopping) when that is more than `DATASET_COLUMNS_MAX`.
pub(super) fn check_column_count(path: &str, count: usize) -> Result<(), AppError> {
    if count <= DATASET_COLUMNS_MAX {
        return Ok(());
    }
    Err(AppError::Input(format!(
        "dataset {path} has more than {DATASET_COLUMNS_MAX} columns (at least {count}), over the \
         DATASET_COLUMNS_MAX limit; keep only the columns a run reads (prompt, system, \
         messages, token ids, n, request columns)"
    )))
}

/// The keys of one JSON Lines object, added to `names`, with no value kept: parsing stops as
/// soon as the file has more than `DATASET_COLUMNS_MAX` columns, so a 12 MiB line of short
/// keys costs no more than the limit.
pub(super) struct KeysInto<'a>(pub(super) &'a mut ColumnNames);

impl<'de> DeserializeSeed<'de> for KeysInto<'_> {
    type Value = ();

    fn deserialize<D: serde::Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for KeysInto<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while let Some(key) = map.next_key::<String>()? {
            map.next_value::<IgnoredAny>()?;
            self.0.insert(&key);
            if self.0.len() > DATASET_COLUMNS_MAX {
                return Err(A::Error::custom("past the column limit"));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn column_names_keep_first_appearance_order_once_each() {
        let mut names = ColumnNames::default();
        let inserted: Vec<bool> =
            ["b", "a", "b", "c", "a"].iter().map(|n| names.insert(n)).collect();
        assert_eq!(inserted, [true, true, false, true, false]);
        assert_eq!(names.len(), 3);
        assert_eq!(names.into_vec(), ["b", "a", "c"]);
    }

    #[test]
    fn column_names_look_up_by_hash_not_by_scanning_the_list() {
        // Half a million distinct names and as many repeats: with a scan per lookup this is
        // about 10^11 string comparisons (many minutes); hashed, it is a million lookups.
        let count = 500_000;
        let mut names = ColumnNames::default();
        for i in 0..count {
            assert!(names.insert(&format!("c{i}")));
        }
        for i in (0..count).rev() {
            assert!(!names.insert(&format!("c{i}")));
        }
        assert_eq!(names.len(), count);
    }

    #[test]
    fn a_json_line_stops_parsing_past_the_column_limit() {
        let keys: Vec<String> =
            (0..DATASET_COLUMNS_MAX + 5).map(|i| format!("\"k{i}\": 0")).collect();
        let line = format!("{{{}}}", keys.join(", "));
        let mut names = ColumnNames::default();
        let mut de = serde_json::Deserializer::from_str(&line);
        assert!(KeysInto(&mut names).deserialize(&mut de).is_err());
        assert_eq!(names.len(), DATASET_COLUMNS_MAX + 1);

        let mut names = ColumnNames::default();
        let mut de =
            serde_json::Deserializer::from_str(r#"{"b": [1, {"x": 2}], "a": "s", "b": 3}"#);
        KeysInto(&mut names).deserialize(&mut de).unwrap();
        assert_eq!(names.into_vec(), ["b", "a"]);
    }

    #[test]
    fn the_column_count_is_refused_only_past_the_limit() {
        assert!(check_column_count("f.csv", DATASET_COLUMNS_MAX).is_ok());
        let err = check_column_count("f.csv", DATASET_COLUMNS_MAX + 1).unwrap_err();
        assert_eq!(err.exit_code(), 2);
        let msg = err.to_string();
        assert!(msg.contains("dataset f.csv has more than 10000 columns"), "{msg}");
        assert!(msg.contains("DATASET_COLUMNS_MAX"), "{msg}");
    }
}
