//! The JSON field shapes the adapters decode by hand, borrowed where they can be: an `error`
//! member, vLLM's unwrapped error object, a value that may be a string, an array's first
//! element, and a finish reason in either API's form.

use loadgen_wire::FinishReason;
use serde::de::{Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;

/// An `error` member: absent or `null` is no error; a string is its message; an object's
/// `message` string is its message; anything else is an error without one.
#[derive(Debug, Default)]
pub(crate) struct ErrorField<'a>(pub Option<ErrorInfo<'a>>);

#[derive(Debug)]
pub(crate) struct ErrorInfo<'a> {
    pub message: Option<std::borrow::Cow<'a, str>>,
}

impl<'de: 'a, 'a> Deserialize<'de> for ErrorField<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        // The field's value read as any value; then the rule above.
        let info = match d.deserialize_any(ErrorVisitor)? {
            ErrorValue::Null => None,
            ErrorValue::Message(message) => Some(ErrorInfo { message }),
        };
        Ok(ErrorField(info))
    }
}

enum ErrorValue<'a> {
    Null,
    Message(Option<std::borrow::Cow<'a, str>>),
}

struct ErrorVisitor;

impl<'de> Visitor<'de> for ErrorVisitor {
    type Value = ErrorValue<'de>;
    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("an error")
    }
    fn visit_unit<E>(self) -> Result<ErrorValue<'de>, E> {
        Ok(ErrorValue::Null)
    }
    fn visit_borrowed_str<E>(self, v: &'de str) -> Result<ErrorValue<'de>, E> {
        Ok(ErrorValue::Message(Some(v.into())))
    }
    fn visit_str<E>(self, v: &str) -> Result<ErrorValue<'de>, E> {
        Ok(ErrorValue::Message(Some(v.to_owned().into())))
    }
    fn visit_bool<E>(self, _: bool) -> Result<ErrorValue<'de>, E> {
        Ok(ErrorValue::Message(None))
    }
    fn visit_i64<E>(self, _: i64) -> Result<ErrorValue<'de>, E> {
        Ok(ErrorValue::Message(None))
    }
    fn visit_u64<E>(self, _: u64) -> Result<ErrorValue<'de>, E> {
        Ok(ErrorValue::Message(None))
    }
    fn visit_f64<E>(self, _: f64) -> Result<ErrorValue<'de>, E> {
        Ok(ErrorValue::Message(None))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(ErrorValue::Message(None))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut message = None;
        while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
            let value = map.next_value::<MaybeStr<'de>>()?.0;
            if key == "message" && message.is_none() {
                message = value;
            }
        }
        Ok(ErrorValue::Message(message))
    }
}

/// The top-level `object` and `message` of a frame or body. vLLM's `ErrorResponse` comes
/// unwrapped, with no `error` key (`{"object":"error","message":"...","type":"BadRequestError",
/// "param":null,"code":400}`): `object` is `"error"` and `message` (when a string) says why.
#[derive(Clone, Copy)]
pub(crate) struct UnwrappedError<'f, 'a> {
    pub object: &'f MaybeStr<'a>,
    pub message: &'f MaybeStr<'a>,
}

impl<'a> UnwrappedError<'_, 'a> {
    /// `None` when this is no error object; else `Some(its message, when a string)`.
    pub(crate) fn message(self) -> Option<Option<std::borrow::Cow<'a, str>>> {
        (self.object.0.as_deref() == Some("error")).then(|| self.message.0.clone())
    }
}

/// Any JSON value; `Some` when it is a string.
#[derive(Default)]
pub(crate) struct MaybeStr<'a>(pub Option<std::borrow::Cow<'a, str>>);

impl<'de: 'a, 'a> Deserialize<'de> for MaybeStr<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct StrVisitor;
        impl<'de> Visitor<'de> for StrVisitor {
            type Value = MaybeStr<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("any value")
            }
            fn visit_borrowed_str<E>(self, v: &'de str) -> Result<MaybeStr<'de>, E> {
                Ok(MaybeStr(Some(v.into())))
            }
            fn visit_str<E>(self, v: &str) -> Result<MaybeStr<'de>, E> {
                Ok(MaybeStr(Some(v.to_owned().into())))
            }
            fn visit_unit<E>(self) -> Result<MaybeStr<'de>, E> {
                Ok(MaybeStr(None))
            }
            fn visit_bool<E>(self, _: bool) -> Result<MaybeStr<'de>, E> {
                Ok(MaybeStr(None))
            }
            fn visit_i64<E>(self, _: i64) -> Result<MaybeStr<'de>, E> {
                Ok(MaybeStr(None))
            }
            fn visit_u64<E>(self, _: u64) -> Result<MaybeStr<'de>, E> {
                Ok(MaybeStr(None))
            }
            fn visit_f64<E>(self, _: f64) -> Result<MaybeStr<'de>, E> {
                Ok(MaybeStr(None))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                Ok(MaybeStr(None))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(MaybeStr(None))
            }
        }
        d.deserialize_any(StrVisitor)
    }
}

/// The first element of a JSON array (the rest skipped without allocating); `null` or `[]` give
/// `None`.
#[derive(Debug)]
pub(crate) struct First<T>(pub Option<T>);

impl<T> Default for First<T> {
    fn default() -> Self {
        First(None)
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for First<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct FirstVisitor<T>(std::marker::PhantomData<T>);
        impl<'de, T: Deserialize<'de>> Visitor<'de> for FirstVisitor<T> {
            type Value = First<T>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("an array")
            }
            fn visit_unit<E>(self) -> Result<First<T>, E> {
                Ok(First(None))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<First<T>, A::Error> {
                let first = seq.next_element::<T>()?;
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                Ok(First(first))
            }
        }
        d.deserialize_any(FirstVisitor(std::marker::PhantomData))
    }
}

/// A finish reason given as a string (OpenAI), an object with `type` (SGLang) or null.
#[derive(Clone, Copy, Debug)]
pub(crate) struct FinishField(pub FinishReason);

impl<'de> Deserialize<'de> for FinishField {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct FinishVisitor;
        impl<'de> Visitor<'de> for FinishVisitor {
            type Value = FinishField;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a finish reason")
            }
            fn visit_str<E>(self, v: &str) -> Result<FinishField, E> {
                Ok(FinishField(FinishReason::parse(v)))
            }
            fn visit_unit<E>(self) -> Result<FinishField, E> {
                Ok(FinishField(FinishReason::None))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<FinishField, A::Error> {
                let mut reason = FinishReason::None;
                while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
                    if key == "type" {
                        reason = map.next_value::<FinishField>()?.0;
                    } else {
                        map.next_value::<IgnoredAny>()?;
                    }
                }
                Ok(FinishField(reason))
            }
        }
        d.deserialize_any(FinishVisitor)
    }
}
