//! Addresses as `"0x…"` strings in JSON: exact for every 64-bit value, readable, and safe for
//! readers whose numbers are doubles.

use serde::{de::Error, Deserialize, Deserializer, Serializer};

pub fn serialize<S: Serializer>(value: &u64, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&format!("{value:#x}"))
}

pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    let text = String::deserialize(d)?;
    let digits = text.strip_prefix("0x").ok_or_else(|| D::Error::custom("expected a 0x-prefixed address"))?;
    u64::from_str_radix(digits, 16).map_err(D::Error::custom)
}

/// What the schema of the report says of such a field: a `0x`-prefixed lower-case hex
/// string.
#[cfg(feature = "schema")]
pub fn schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": "string",
        "pattern": "^0x[0-9a-f]{1,16}$",
        "description": "A 64-bit address or value, `0x`-prefixed lower-case hex."
    })
}
