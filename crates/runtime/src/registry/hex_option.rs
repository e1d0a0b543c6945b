//! [`super::hex`] for an optional address.

use serde::{Deserialize, Deserializer, Serializer};

pub fn serialize<S: Serializer>(value: &Option<u64>, s: S) -> Result<S::Ok, S::Error> {
    match value {
        Some(v) => super::hex::serialize(v, s),
        None => s.serialize_none(),
    }
}

pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    #[derive(Deserialize)]
    struct Hex(#[serde(with = "super::hex")] u64);
    Ok(Option::<Hex>::deserialize(d)?.map(|Hex(v)| v))
}
