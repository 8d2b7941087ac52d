//! Scalar coercion as the reference's schema does it: pydantic v2's lax mode (2.12), one
//! `deserialize_with` helper per scalar type, used by every schema field of that type.
//!
//! The reference validates `yaml.safe_load` output with pydantic models that are not strict,
//! so `"0.5"` is a float, `128.0`, `"2"` and `true` are ints, `"yes"` is a bool, while a
//! number or a boolean is not a string and a boolean is not an enum's name. The rules below
//! are pydantic-core's (`str_as_int`, `str_as_float`, `str_as_bool`, `float_as_int`), checked
//! value by value against pydantic 2.12.5 (see the table tests in `yaml.rs`).
//!
//! Each helper runs inside the deserializer's own call (a `Visitor`), so serde_yaml_ng puts
//! the key path in front of its message (`settings.client.num_workers: "many" is not …`).

use std::borrow::Cow;
use std::fmt;
use std::marker::PhantomData;

use serde::de::{self, DeserializeOwned, Deserializer, IntoDeserializer, Visitor};
use serde::Deserialize;

/// One scalar as YAML (read as the reference reads it) hands it over.
#[derive(Debug, Clone, PartialEq)]
pub enum Scalar<'a> {
    Null,
    Bool(bool),
    Int(i128),
    Float(f64),
    Str(Cow<'a, str>),
}

impl fmt::Display for Scalar<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Scalar::Null => f.write_str("null"),
            Scalar::Bool(b) => write!(f, "{b}"),
            Scalar::Int(i) => write!(f, "{i}"),
            Scalar::Float(x) => write!(f, "{x:?}"),
            Scalar::Str(s) => write!(f, "{s:?}"),
        }
    }
}

/// Why a scalar was refused: the value as written (or `None` for a secret, never shown)
/// and what the key takes.
fn refused(value: &Scalar<'_>, secret: bool, why: &str) -> String {
    if secret {
        format!("this value (not shown: the key holds a secret) {why}")
    } else {
        format!("{value} {why}")
    }
}

const QUOTE_HINT: &str = "(YAML, as the reference reads it, takes unquoted yes/no/on/off/\
                          true/false for booleans and digits for numbers): quote it";

// ---- the conversions (pure, pydantic's lax table) -------------------------------------

/// pydantic's int from a string: surrounding whitespace, one leading `+` or `-`, leading
/// zeros, single underscores between digits and a `.0…` tail are allowed (`" 2 "`, `"+2"`,
/// `"02"`, `"1_000"`, `"128.0"`); anything else (`"128.5"`, `"1e3"`, `"0x10"`, `""`) is not.
pub fn str_as_int(text: &str) -> Option<i128> {
    let mut s = text.trim();
    let negative = match s.as_bytes().first() {
        Some(b'-') => true,
        Some(b'+') => false,
        _ => {
            return digits_as_int(s, false);
        }
    };
    s = &s[1..];
    if s.starts_with(['+', '-']) {
        return None;
    }
    digits_as_int(s, negative)
}

fn digits_as_int(s: &str, negative: bool) -> Option<i128> {
    let s = match s.split_once('.') {
        Some((whole, zeros)) if !zeros.is_empty() && zeros.bytes().all(|b| b == b'0') => whole,
        Some(_) => return None,
        None => s,
    };
    let digits = strip_underscores(s)?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let magnitude: i128 = digits.parse().ok()?;
    Some(if negative { -magnitude } else { magnitude })
}

/// Python's rule for underscores in numbers: none leading or trailing, never two in a row.
fn strip_underscores(s: &str) -> Option<Cow<'_, str>> {
    if !s.contains('_') {
        return Some(Cow::Borrowed(s));
    }
    if s.starts_with('_') || s.ends_with('_') || s.contains("__") {
        return None;
    }
    Some(Cow::Owned(s.replace('_', "")))
}

/// pydantic's float from a string: Rust's own float syntax after trimming (`"0.5"`, `"1e3"`,
/// `"inf"`, `"nan"`), else the same after removing single underscores (`"1_000.5"`).
pub fn str_as_float(text: &str) -> Option<f64> {
    if let Ok(x) = text.trim().parse::<f64>() {
        return Some(x);
    }
    if !text.contains('_') {
        return None;
    }
    strip_underscores(text)?.parse::<f64>().ok()
}

/// pydantic's bool from a string, case-insensitive and untrimmed.
pub fn str_as_bool(text: &str) -> Option<bool> {
    const FALSE: [&str; 6] = ["0", "f", "n", "no", "off", "false"];
    const TRUE: [&str; 6] = ["1", "t", "y", "yes", "on", "true"];
    if FALSE.iter().any(|w| text.eq_ignore_ascii_case(w)) {
        Some(false)
    } else if TRUE.iter().any(|w| text.eq_ignore_ascii_case(w)) {
        Some(true)
    } else {
        None
    }
}

/// An int: an int, a bool (1/0), a float without a fraction, or a string of one.
pub fn as_int(value: &Scalar<'_>) -> Result<i128, String> {
    const WANT: &str = "is not a whole number: give one such as 4 or \"4\"";
    match value {
        Scalar::Int(i) => Ok(*i),
        Scalar::Bool(b) => Ok(i128::from(*b)),
        Scalar::Float(x) if !x.is_finite() => Err(refused(value, false, WANT)),
        Scalar::Float(x) if x.fract() != 0.0 => {
            Err(refused(value, false, "is not a whole number (it has a fractional part)"))
        }
        // pydantic takes a whole float only inside i64's range.
        Scalar::Float(x) if *x > i64::MIN as f64 && *x < i64::MAX as f64 => Ok(*x as i128),
        Scalar::Float(_) => Err(refused(value, false, "is too large for a whole number")),
        Scalar::Str(s) => str_as_int(s).ok_or_else(|| refused(value, false, WANT)),
        Scalar::Null => Err(refused(value, false, WANT)),
    }
}

/// A float: a float, an int, a bool (1.0/0.0), or a string of a number.
pub fn as_float(value: &Scalar<'_>) -> Result<f64, String> {
    const WANT: &str = "is not a number: give one such as 0.5 or \"0.5\"";
    match value {
        Scalar::Float(x) => Ok(*x),
        Scalar::Int(i) => Ok(*i as f64),
        Scalar::Bool(b) => Ok(f64::from(u8::from(*b))),
        Scalar::Str(s) => str_as_float(s).ok_or_else(|| refused(value, false, WANT)),
        Scalar::Null => Err(refused(value, false, WANT)),
    }
}

/// A bool: a bool, the ints 0 and 1, the floats 0.0 and 1.0, or one of pydantic's words.
pub fn as_bool(value: &Scalar<'_>) -> Result<bool, String> {
    const WANT: &str = "is not a boolean: give true or false (or yes/no, on/off, 1/0)";
    match value {
        Scalar::Bool(b) => Ok(*b),
        Scalar::Int(0) => Ok(false),
        Scalar::Int(1) => Ok(true),
        Scalar::Float(x) if *x == 0.0 => Ok(false),
        Scalar::Float(x) if *x == 1.0 => Ok(true),
        Scalar::Str(s) => str_as_bool(s).ok_or_else(|| refused(value, false, WANT)),
        _ => Err(refused(value, false, WANT)),
    }
}

/// A string: only a string (pydantic refuses a number, a boolean or null for `str`);
/// `strip` as the reference's models with `str_strip_whitespace`.
pub fn as_string(value: &Scalar<'_>, strip: bool, secret: bool) -> Result<String, String> {
    match value {
        Scalar::Str(s) if strip => Ok(s.trim().to_string()),
        Scalar::Str(s) => Ok(s.to_string()),
        Scalar::Null => Err(refused(value, secret, "is not a string: give a quoted string")),
        Scalar::Bool(_) => {
            Err(refused(value, secret, &format!("is a boolean, not a string {QUOTE_HINT}")))
        }
        Scalar::Int(_) | Scalar::Float(_) => {
            Err(refused(value, secret, &format!("is a number, not a string {QUOTE_HINT}")))
        }
    }
}

// ---- the visitor that hands a scalar to a conversion ----------------------------------

/// Reads any scalar and applies `convert`; `nullable` turns `null` into `None` first (an
/// `Optional[...]` field), else `null` goes to `convert` and is refused there.
struct Lax<T> {
    convert: fn(&Scalar<'_>) -> Result<T, String>,
    expecting: &'static str,
    nullable: bool,
}

impl<T> Lax<T> {
    fn apply<E: de::Error>(self, value: Scalar<'_>) -> Result<Option<T>, E> {
        if self.nullable && value == Scalar::Null {
            return Ok(None);
        }
        (self.convert)(&value).map(Some).map_err(E::custom)
    }
}

impl<'de, T> Visitor<'de> for Lax<T> {
    type Value = Option<T>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.expecting)
    }
    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Self::Value, E> {
        self.apply(Scalar::Bool(v))
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
        self.apply(Scalar::Int(i128::from(v)))
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
        self.apply(Scalar::Int(i128::from(v)))
    }
    fn visit_i128<E: de::Error>(self, v: i128) -> Result<Self::Value, E> {
        self.apply(Scalar::Int(v))
    }
    fn visit_u128<E: de::Error>(self, v: u128) -> Result<Self::Value, E> {
        match i128::try_from(v) {
            Ok(i) => self.apply(Scalar::Int(i)),
            Err(_) => self.apply(Scalar::Float(v as f64)),
        }
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Self::Value, E> {
        self.apply(Scalar::Float(v))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        self.apply(Scalar::Str(Cow::Borrowed(v)))
    }
    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        self.apply(Scalar::Null)
    }
    fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
        self.apply(Scalar::Null)
    }
}

fn read<'de, D: Deserializer<'de>, T>(
    d: D,
    convert: fn(&Scalar<'_>) -> Result<T, String>,
    expecting: &'static str,
    nullable: bool,
) -> Result<Option<T>, D::Error> {
    d.deserialize_any(Lax { convert, expecting, nullable })
}

/// A scalar through `convert` (refusing null unless `convert` takes it), for a key with a
/// rule of its own (`settings.runtime.min_duration_ms`).
pub fn scalar<'de, D: Deserializer<'de>, T>(
    d: D,
    convert: fn(&Scalar<'_>) -> Result<T, String>,
    expecting: &'static str,
) -> Result<T, D::Error> {
    present(d, convert, expecting)
}

fn present<'de, D: Deserializer<'de>, T>(
    d: D,
    convert: fn(&Scalar<'_>) -> Result<T, String>,
    expecting: &'static str,
) -> Result<T, D::Error> {
    // `nullable: false` hands null to `convert`, which refuses it, so `None` cannot come back.
    read(d, convert, expecting, false)?
        .ok_or_else(|| de::Error::custom(format!("null is not {expecting}")))
}

// ---- the helpers the schema names -----------------------------------------------------

/// The integer types of the schema, with the range named in an error.
pub trait LaxInt: TryFrom<i128> {
    const RANGE: &'static str;
}
impl LaxInt for u32 {
    const RANGE: &'static str = "from 0 to 4294967295";
}
impl LaxInt for u64 {
    const RANGE: &'static str = "from 0 to 18446744073709551615";
}
impl LaxInt for i64 {
    const RANGE: &'static str = "from -9223372036854775808 to 9223372036854775807";
}

fn int_in_range<T: LaxInt>(value: &Scalar<'_>) -> Result<T, String> {
    let i = as_int(value)?;
    T::try_from(i).map_err(|_| format!("{value} is out of range: give a whole number {}", T::RANGE))
}

/// `int` (pydantic lax).
pub fn int<'de, D: Deserializer<'de>, T: LaxInt>(d: D) -> Result<T, D::Error> {
    present(d, int_in_range::<T>, "a whole number")
}

/// `int | None`.
pub fn opt_int<'de, D: Deserializer<'de>, T: LaxInt>(d: D) -> Result<Option<T>, D::Error> {
    read(d, int_in_range::<T>, "a whole number or null", true)
}

/// `float`.
pub fn float<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    present(d, as_float, "a number")
}

/// `float | None`.
pub fn opt_float<'de, D: Deserializer<'de>>(d: D) -> Result<Option<f64>, D::Error> {
    read(d, as_float, "a number or null", true)
}

/// `bool`.
pub fn boolean<'de, D: Deserializer<'de>>(d: D) -> Result<bool, D::Error> {
    present(d, as_bool, "a boolean")
}

/// `bool | None`.
pub fn opt_boolean<'de, D: Deserializer<'de>>(d: D) -> Result<Option<bool>, D::Error> {
    read(d, as_bool, "a boolean or null", true)
}

fn plain_string(v: &Scalar<'_>) -> Result<String, String> {
    as_string(v, false, false)
}
fn stripped_string(v: &Scalar<'_>) -> Result<String, String> {
    as_string(v, true, false)
}
fn secret_string(v: &Scalar<'_>) -> Result<String, String> {
    as_string(v, true, true)
}

/// `str` of a model without `str_strip_whitespace`.
pub fn string<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    present(d, plain_string, "a string")
}

/// `str` of a model with `str_strip_whitespace` (the value is trimmed).
pub fn string_stripped<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    present(d, stripped_string, "a string")
}

/// `str | None` of a model without `str_strip_whitespace`.
pub fn opt_string<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    read(d, plain_string, "a string or null", true)
}

/// `str | None` of a model with `str_strip_whitespace`.
pub fn opt_string_stripped<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    read(d, stripped_string, "a string or null", true)
}

/// A secret `str | None` (`api_key`): a refused value is never shown.
pub fn opt_secret_string<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    read(d, secret_string, "a string or null", true)
}

/// One string of a list, read by `string_list`.
struct ListItem<const STRIP: bool, const SECRET: bool>(String);

impl<'de, const STRIP: bool, const SECRET: bool> Deserialize<'de> for ListItem<STRIP, SECRET> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        fn convert<const STRIP: bool, const SECRET: bool>(
            v: &Scalar<'_>,
        ) -> Result<String, String> {
            as_string(v, STRIP, SECRET)
        }
        present(d, convert::<STRIP, SECRET>, "a string").map(ListItem)
    }
}

/// `list[str]` of a model with `str_strip_whitespace` (`endpoints`).
pub fn string_list_stripped<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    let items = Vec::<ListItem<true, false>>::deserialize(d)?;
    Ok(items.into_iter().map(|i| i.0).collect())
}

/// A list of secret strings (`headers`, whose values are secrets): a refused one is not shown.
pub fn secret_string_list<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    let items = Vec::<ListItem<false, true>>::deserialize(d)?;
    Ok(items.into_iter().map(|i| i.0).collect())
}

/// An enum (`str, Enum` or `Literal[...]`): only a string naming a member exactly, as
/// pydantic matches it (case-sensitive, untrimmed). A boolean, the way YAML reads an
/// unquoted `on`, is refused with a hint to quote it.
pub fn choice<'de, D: Deserializer<'de>, T: DeserializeOwned>(d: D) -> Result<T, D::Error> {
    d.deserialize_any(Choice(PhantomData))
}

/// `choice` for `Enum | None`.
pub fn opt_choice<'de, D: Deserializer<'de>, T: DeserializeOwned>(
    d: D,
) -> Result<Option<T>, D::Error> {
    d.deserialize_any(OptChoice(PhantomData))
}

/// The member named `name`, or serde's error listing the members.
fn member<T: DeserializeOwned>(name: &str) -> Result<T, String> {
    let d: de::value::StrDeserializer<'_, de::value::Error> = name.into_deserializer();
    T::deserialize(d).map_err(|e| e.to_string())
}

/// Why a non-string scalar names no member, with the members (from serde's own error).
fn not_a_member<T: DeserializeOwned>(value: &Scalar<'_>) -> String {
    let members = match member::<T>("\u{0}") {
        Err(e) => e.split_once("expected ").map(|(_, m)| m.to_string()).unwrap_or_default(),
        Ok(_) => String::new(),
    };
    let kind = match value {
        Scalar::Bool(_) => format!("is a boolean, not a name {QUOTE_HINT}"),
        Scalar::Null => "is not a name".to_string(),
        _ => format!("is a number, not a name {QUOTE_HINT}"),
    };
    format!("{value} {kind}; expected {members}")
}

struct Choice<T>(PhantomData<T>);
struct OptChoice<T>(PhantomData<T>);

macro_rules! choice_visitor {
    ($name:ident, $out:ty, $wrap:expr, $null:expr) => {
        impl<'de, T: DeserializeOwned> Visitor<'de> for $name<T> {
            type Value = $out;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a name")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                member::<T>(v).map($wrap).map_err(E::custom)
            }
            fn visit_bool<E: de::Error>(self, v: bool) -> Result<Self::Value, E> {
                Err(E::custom(not_a_member::<T>(&Scalar::Bool(v))))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
                Err(E::custom(not_a_member::<T>(&Scalar::Int(i128::from(v)))))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
                Err(E::custom(not_a_member::<T>(&Scalar::Int(i128::from(v)))))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Self::Value, E> {
                Err(E::custom(not_a_member::<T>(&Scalar::Float(v))))
            }
            fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
                $null.map_err(|()| E::custom(not_a_member::<T>(&Scalar::Null)))
            }
            fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
                self.visit_unit()
            }
        }
    };
}

choice_visitor!(Choice, T, |t| t, Err(()));
choice_visitor!(OptChoice, Option<T>, Some, Ok(None));
