//! Reading the schema's types from a `serde_json::Value` with errors that name where they are.

use super::*;

/// Reads `T` from `value`; an error starts with where it is, ``at `a.b[2].c`: ``, through
/// nested stages too.
pub fn from_value<T: DeserializeOwned>(value: Value) -> Result<T, serde_json::Error> {
    T::deserialize(Tracked(value))
}

/// Where an error's message says it is: ``at `PATH`: `` and the rest.
const AT: &str = "at `";

/// `e` one level further out: `segment` (a key or `[i]`) put before its path.
fn nest(e: serde_json::Error, segment: &str) -> serde_json::Error {
    let msg = e.to_string();
    let (path, rest) = match msg.strip_prefix(AT).and_then(|m| m.split_once("`: ")) {
        Some((path, rest)) => (path, rest),
        None => ("", msg.as_str()),
    };
    let path = match path.chars().next() {
        None => segment.to_string(),
        Some('[') => format!("{segment}{path}"),
        Some(_) => format!("{segment}.{path}"),
    };
    de::Error::custom(format!("{AT}{path}`: {rest}"))
}

/// A value being read, whose maps and sequences put their keys and indices into errors.
struct Tracked(Value);

impl<'de> Deserializer<'de> for Tracked {
    type Error = serde_json::Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Self::Error> {
        match self.0 {
            Value::Object(map) => visitor.visit_map(TrackedMap {
                entries: map.into_iter(),
                pending: None,
            }),
            Value::Array(items) => visitor.visit_seq(TrackedSeq {
                items: items.into_iter(),
                index: 0,
            }),
            other => other.deserialize_any(visitor),
        }
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Self::Error> {
        match self.0 {
            Value::Null => visitor.visit_none(),
            other => visitor.visit_some(Tracked(other)),
        }
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, Self::Error> {
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        name: &'static str,
        variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Self::Error> {
        self.0.deserialize_enum(name, variants, visitor)
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
        bytes byte_buf unit unit_struct seq tuple tuple_struct map struct identifier ignored_any
    }
}

/// The entries of an object, each value's errors under its key.
struct TrackedMap {
    entries: serde_json::map::IntoIter,
    pending: Option<(String, Value)>,
}

impl<'de> MapAccess<'de> for TrackedMap {
    type Error = serde_json::Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, Self::Error> {
        let Some((key, value)) = self.entries.next() else {
            return Ok(None);
        };
        let k = seed.deserialize(Value::String(key.clone()))?;
        self.pending = Some((key, value));
        Ok(Some(k))
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(
        &mut self,
        seed: V,
    ) -> Result<V::Value, Self::Error> {
        let (key, value) = self
            .pending
            .take()
            .ok_or_else(|| <serde_json::Error as de::Error>::custom("a value without a key"))?;
        seed.deserialize(Tracked(value)).map_err(|e| nest(e, &key))
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.entries.len())
    }
}

/// The items of an array, each one's errors under its index.
struct TrackedSeq {
    items: std::vec::IntoIter<Value>,
    index: usize,
}

impl<'de> SeqAccess<'de> for TrackedSeq {
    type Error = serde_json::Error;

    fn next_element_seed<T: DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, Self::Error> {
        let Some(item) = self.items.next() else {
            return Ok(None);
        };
        let index = self.index;
        self.index += 1;
        seed.deserialize(Tracked(item))
            .map(Some)
            .map_err(|e| nest(e, &format!("[{index}]")))
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.items.len())
    }
}
