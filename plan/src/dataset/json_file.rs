//! JSON datasets read as a stream: `serde_json`'s deserializer over a `TextReader`, whose
//! visitors hand on one record at a time. An array of objects stops at `samples=N`; an object
//! of columns (as pandas writes `orient="columns"`) keeps only the columns asked for. Neither
//! the file's text nor its whole tree is ever held.

use std::collections::{BTreeSet, HashSet};
use std::fmt;

use serde::de::{DeserializeSeed, Error as _, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

use super::column_names::{check_column_count, ColumnNames};
use super::open::{read_error, TextReader};
use super::spec::{DatasetSpec, DATASET_COLUMNS_MAX};
use crate::error::AppError;

/// What a pass over the file keeps of each record.
pub(super) enum Keep<'a> {
    /// No values: every record's column names go into the set (for the column mapping),
    /// each record's in sorted order, as a parsed `Map` lists them.
    Names(&'a mut ColumnNames),
    /// The values of these columns; the others are parsed past and never built.
    Columns(&'a HashSet<&'a str>),
    /// Every column (raw records).
    All,
}

impl Keep<'_> {
    fn wants(&self, column: &str) -> bool {
        match self {
            Keep::Names(_) => false,
            Keep::Columns(keep) => keep.contains(column),
            Keep::All => true,
        }
    }
}

/// A record: its index in the file and the columns its pass keeps.
pub(super) type Each<'a> = &'a mut dyn FnMut(usize, Map<String, Value>) -> Result<(), AppError>;

/// Calls `each` for the first `limit` records of the JSON file, in order, and returns how
/// many there were. An array stops being read after its `limit`-th element, so what follows
/// (more rows, or anything malformed) is never seen.
pub(super) fn for_each_record(
    spec: &DatasetSpec,
    limit: usize,
    keep: Keep<'_>,
    each: Each<'_>,
) -> Result<usize, AppError> {
    let path = &spec.path;
    // serde_json reads a byte at a time: `BufReader` hands each out of its buffer inline.
    let text = std::io::BufReader::with_capacity(1 << 16, TextReader::open(spec)?);
    let mut de = serde_json::Deserializer::from_reader(text);
    let mut pass = Pass { path, limit, keep, each, count: 0, failure: None, stopped: false };
    let result = Top(&mut pass).deserialize(&mut de).and_then(|()| de.end());
    if let Some(failure) = pass.failure {
        return Err(failure);
    }
    if !pass.stopped {
        result.map_err(|e| json_error(path, e, ""))?;
    }
    Ok(pass.count)
}

/// The `AppError` of a JSON dataset's parse error: a read error as `read_error` makes it,
/// else bad input naming the file and (in `e`) the line and column, then `hint`.
pub(super) fn json_error(path: &str, e: serde_json::Error, hint: &str) -> AppError {
    if e.is_io() {
        return read_error(path, e.into());
    }
    AppError::Input(format!("dataset {path}: {e}{hint}"))
}

struct Pass<'a> {
    path: &'a str,
    limit: usize,
    keep: Keep<'a>,
    each: Each<'a>,
    count: usize,
    /// Why the pass stopped with an error of ours (a bad record, or `each`'s error).
    failure: Option<AppError>,
    /// Stopped after `limit` records, the rest unread: not an error.
    stopped: bool,
}

/// Keeps `failure` for `for_each_record` and gives the deserializer an error to unwind with.
fn fail<E: serde::de::Error>(slot: &mut Option<AppError>, failure: AppError) -> E {
    *slot = Some(failure);
    E::custom("the dataset pass stopped")
}

impl Pass<'_> {
    fn hand_on<E: serde::de::Error>(
        &mut self,
        index: usize,
        record: Map<String, Value>,
    ) -> Result<(), E> {
        self.count += 1;
        (self.each)(index, record).map_err(|e| fail(&mut self.failure, e))
    }
}

/// The visitor methods of the JSON scalars (null, booleans, numbers, strings), each calling
/// `$then(self)`.
macro_rules! scalars_then {
    ($then:expr) => {
        fn visit_unit<E: serde::de::Error>(self) -> Result<Self::Value, E> {
            ($then)(self)
        }
        fn visit_bool<E: serde::de::Error>(self, _: bool) -> Result<Self::Value, E> {
            ($then)(self)
        }
        fn visit_i64<E: serde::de::Error>(self, _: i64) -> Result<Self::Value, E> {
            ($then)(self)
        }
        fn visit_u64<E: serde::de::Error>(self, _: u64) -> Result<Self::Value, E> {
            ($then)(self)
        }
        fn visit_f64<E: serde::de::Error>(self, _: f64) -> Result<Self::Value, E> {
            ($then)(self)
        }
        fn visit_str<E: serde::de::Error>(self, _: &str) -> Result<Self::Value, E> {
            ($then)(self)
        }
    };
}

/// The file's top-level value: an array of records or an object of columns.
struct Top<'p, 'a>(&'p mut Pass<'a>);

impl<'de> DeserializeSeed<'de> for Top<'_, '_> {
    type Value = ();

    fn deserialize<D: serde::Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Top<'_, '_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an array of objects or an object of columns")
    }

    scalars_then!(|top: Self| {
        let path = top.0.path;
        Err(fail(
            &mut top.0.failure,
            AppError::Input(format!(
                "dataset {path}: expected an array of objects or an object of columns"
            )),
        ))
    });

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let pass = self.0;
        let mut index = 0;
        loop {
            if index == pass.limit {
                pass.stopped = true;
                return Err(A::Error::custom("stopped at the row limit"));
            }
            match seq.next_element_seed(Record(&mut *pass))? {
                None => return Ok(()),
                Some(Some(record)) => pass.hand_on(index, record)?,
                Some(None) => {
                    let path = pass.path;
                    let failure = format!("dataset {path} item {index}: not a JSON object");
                    return Err(fail(&mut pass.failure, AppError::Input(failure)));
                }
            }
            index += 1;
        }
    }

    /// `{col: [v0, v1, …]}`: every column must be an array, all of one length (the first
    /// non-empty one's); the columns kept are held up to `limit` values, then dealt out as
    /// records.
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let pass = self.0;
        let path = pass.path;
        let (mut rows, mut names, mut kept) = (0usize, BTreeSet::new(), Vec::new());
        while let Some(name) = map.next_key::<String>()? {
            let take = if pass.keep.wants(&name) { pass.limit } else { 0 };
            let Some((len, values)) = map.next_value_seed(Column(take))? else {
                let failure = format!("dataset {path}: column {name:?} is not an array");
                return Err(fail(&mut pass.failure, AppError::Input(failure)));
            };
            if rows == 0 {
                rows = len;
            }
            if len != rows {
                let failure =
                    format!("dataset {path}: column {name:?} has {len} values, others have {rows}");
                return Err(fail(&mut pass.failure, AppError::Input(failure)));
            }
            if let Keep::Names(_) = pass.keep {
                names.insert(name);
                if let Err(e) = check_column_count(path, names.len()) {
                    return Err(fail(&mut pass.failure, e));
                }
            } else if take > 0 {
                kept.push((name, values.into_iter()));
            }
        }
        if let Keep::Names(all) = &mut pass.keep {
            names.iter().for_each(|name| _ = all.insert(name));
        }
        for index in 0..rows.min(pass.limit) {
            let record = kept.iter_mut().filter_map(|(n, v)| Some((n.clone(), v.next()?)));
            pass.hand_on(index, record.collect())?;
        }
        Ok(())
    }
}

/// One element of the array: the record its pass keeps, or `None` when it is not an object.
struct Record<'p, 'a>(&'p mut Pass<'a>);

impl<'de> DeserializeSeed<'de> for Record<'_, '_> {
    type Value = Option<Map<String, Value>>;

    fn deserialize<D: serde::Deserializer<'de>>(
        self,
        deserializer: D,
    ) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Record<'_, '_> {
    type Value = Option<Map<String, Value>>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object")
    }

    scalars_then!(|_: Self| Ok(None));

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(None)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let Pass { keep, failure, path, .. } = self.0;
        let mut record = Map::new();
        let Keep::Names(all) = keep else {
            while let Some(key) = map.next_key::<String>()? {
                if keep.wants(&key) {
                    let value: Value = map.next_value()?;
                    record.insert(key, value);
                } else {
                    map.next_value::<IgnoredAny>()?;
                }
            }
            return Ok(Some(record));
        };
        // Only the names: parsing stops as soon as the record alone has too many.
        let mut names = BTreeSet::new();
        while let Some(key) = map.next_key::<String>()? {
            map.next_value::<IgnoredAny>()?;
            names.insert(key);
            if names.len() > DATASET_COLUMNS_MAX {
                return Err(fail(failure, check_column_count(path, names.len()).unwrap_err()));
            }
        }
        names.iter().for_each(|name| _ = all.insert(name));
        match check_column_count(path, all.len()) {
            Ok(()) => Ok(Some(record)),
            Err(e) => Err(fail(failure, e)),
        }
    }
}

/// One column of an object of columns: its length and its first `take` values, or `None`
/// when it is not an array.
struct Column(usize);

impl<'de> DeserializeSeed<'de> for Column {
    type Value = Option<(usize, Vec<Value>)>;

    fn deserialize<D: serde::Deserializer<'de>>(
        self,
        deserializer: D,
    ) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Column {
    type Value = Option<(usize, Vec<Value>)>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an array")
    }

    scalars_then!(|_: Self| Ok(None));

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(None)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let (mut len, mut values) = (0usize, Vec::new());
        loop {
            if len < self.0 {
                let Some(value) = seq.next_element::<Value>()? else { break };
                values.push(value);
            } else if seq.next_element::<IgnoredAny>()?.is_none() {
                break;
            }
            len += 1;
        }
        Ok(Some((len, values)))
    }
}
