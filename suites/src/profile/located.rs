//! A YAML value that remembers where each of its parts was written. Kubernetes types from
//! k8s-openapi ignore unknown fields and cannot carry locations, so an inline object (the
//! DeviceClass spec) is read as this tree first, then converted to the typed object; a type
//! error or an unknown field is traced back to its line through the tree.

use std::fmt;

use serde::Deserialize;
use serde::de::{self, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_saphyr::{Location, Spanned};

#[derive(Debug, Clone)]
pub(crate) enum Node {
    Null,
    Bool(bool),
    Int(i64),
    UInt(u64),
    Float(f64),
    Str(String),
    Seq(Vec<Spanned<Node>>),
    Map(Vec<(Spanned<String>, Spanned<Node>)>),
}

impl<'de> Deserialize<'de> for Node {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Node, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Node;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("any YAML value")
            }
            fn visit_unit<E>(self) -> Result<Node, E> {
                Ok(Node::Null)
            }
            fn visit_none<E>(self) -> Result<Node, E> {
                Ok(Node::Null)
            }
            fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Node, D::Error> {
                Node::deserialize(d)
            }
            fn visit_bool<E>(self, v: bool) -> Result<Node, E> {
                Ok(Node::Bool(v))
            }
            fn visit_i64<E>(self, v: i64) -> Result<Node, E> {
                Ok(Node::Int(v))
            }
            fn visit_u64<E>(self, v: u64) -> Result<Node, E> {
                Ok(Node::UInt(v))
            }
            fn visit_f64<E>(self, v: f64) -> Result<Node, E> {
                Ok(Node::Float(v))
            }
            fn visit_str<E>(self, v: &str) -> Result<Node, E> {
                Ok(Node::Str(v.to_string()))
            }
            fn visit_string<E>(self, v: String) -> Result<Node, E> {
                Ok(Node::Str(v))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Node, A::Error> {
                let mut items = Vec::new();
                while let Some(item) = seq.next_element::<Spanned<Node>>()? {
                    items.push(item);
                }
                Ok(Node::Seq(items))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Node, A::Error> {
                let mut entries: Vec<(Spanned<String>, Spanned<Node>)> = Vec::new();
                while let Some(key) = map.next_key::<Spanned<String>>()? {
                    if entries.iter().any(|(k, _)| k.value == key.value) {
                        return Err(de::Error::custom(format!("duplicate key {:?}", key.value)));
                    }
                    let value = map.next_value::<Spanned<Node>>()?;
                    entries.push((key, value));
                }
                Ok(Node::Map(entries))
            }
        }
        d.deserialize_any(V)
    }
}

impl Node {
    pub(crate) fn to_json(&self) -> serde_json::Value {
        use serde_json::Value;
        match self {
            Node::Null => Value::Null,
            Node::Bool(b) => Value::Bool(*b),
            Node::Int(i) => Value::from(*i),
            Node::UInt(u) => Value::from(*u),
            Node::Float(f) => serde_json::Number::from_f64(*f).map_or(Value::Null, Value::Number),
            Node::Str(s) => Value::String(s.clone()),
            Node::Seq(items) => Value::Array(items.iter().map(|i| i.value.to_json()).collect()),
            Node::Map(entries) => {
                Value::Object(entries.iter().map(|(k, v)| (k.value.clone(), v.value.to_json())).collect())
            }
        }
    }
}

/// The location of the deepest part of `root` that `path` (a serde_path_to_error path)
/// reaches: of the key that leads to it, or of `root` itself.
pub(crate) fn locate(root: &Spanned<Node>, path: &serde_path_to_error::Path) -> Location {
    use serde_path_to_error::Segment;
    let mut here = root;
    let mut location = root.referenced;
    for segment in path.iter() {
        // `Spanned` fields add a `value` step that is no key of the file.
        if let Segment::Map { key } = segment
            && key == "value"
            && !matches!(&here.value, Node::Map(entries) if entries.iter().any(|(k, _)| k.value == "value"))
        {
            continue;
        }
        let next = match (segment, &here.value) {
            (Segment::Seq { index }, Node::Seq(items)) => items.get(*index).map(|i| (i, i.referenced)),
            (Segment::Map { key }, Node::Map(entries)) => {
                entries.iter().find(|(k, _)| &k.value == key).map(|(k, v)| (v, k.referenced))
            }
            _ => None,
        };
        match next {
            Some((node, loc)) => {
                here = node;
                location = loc;
            }
            None => break,
        }
    }
    location
}

/// The location of the part of `root` at `path`, written as the fields of messages are
/// (`requests[0].exactly.count`); as far as the path exists, as [`locate`] does.
pub(crate) fn locate_dotted(root: &Spanned<Node>, path: &str) -> Location {
    let mut here = root;
    let mut location = root.referenced;
    let steps = path.split('.').flat_map(|part| {
        let mut pieces = part.split('[');
        let key = pieces.next().filter(|k| !k.is_empty()).map(|k| Err(k.to_string()));
        key.into_iter().chain(pieces.filter_map(|i| i.trim_end_matches(']').parse::<usize>().ok().map(Ok)))
    });
    for step in steps {
        let next = match (&step, &here.value) {
            (Ok(index), Node::Seq(items)) => items.get(*index).map(|i| (i, i.referenced)),
            (Err(key), Node::Map(entries)) => {
                entries.iter().find(|(k, _)| &k.value == key).map(|(k, v)| (v, k.referenced))
            }
            _ => None,
        };
        match next {
            Some((node, loc)) => {
                here = node;
                location = loc;
            }
            None => break,
        }
    }
    location
}

/// The first key of `raw` that the typed object dropped (a field its type does not know):
/// its dotted path below `prefix`, its location and the key.
pub(crate) fn first_unknown_key(
    raw: &Spanned<Node>,
    typed: &serde_json::Value,
    prefix: &str,
) -> Option<(String, Location, String)> {
    match (&raw.value, typed) {
        (Node::Map(entries), serde_json::Value::Object(known)) => {
            for (key, value) in entries {
                let path = format!("{prefix}.{}", key.value);
                match known.get(&key.value) {
                    // An explicit null is the same as leaving the field out.
                    None if matches!(value.value, Node::Null) => {}
                    None => return Some((path, key.referenced, key.value.clone())),
                    Some(inner) => {
                        if let Some(found) = first_unknown_key(value, inner, &path) {
                            return Some(found);
                        }
                    }
                }
            }
            None
        }
        (Node::Seq(items), serde_json::Value::Array(known)) => items
            .iter()
            .zip(known)
            .enumerate()
            .find_map(|(i, (item, inner))| first_unknown_key(item, inner, &format!("{prefix}[{i}]"))),
        _ => None,
    }
}
