//! `gpusan schema`: the JSON Schema (draft 2020-12) of the document `--report-json` writes,
//! generated from the report's own types so that it cannot drift from what gpusan writes.
//! The copy published in the repository (`schemas/report-v<N>.json`, N the document's
//! `schema_version`) is held to this output by a test, and every report of the fake-driver
//! tests is validated against it.

use anyhow::Result;
use gpusan_runtime::report::{Document, SCHEMA_VERSION};

/// The schema of [`Document`], titled with its version.
pub fn report_schema() -> serde_json::Value {
    // What gpusan writes (the serialization's contract): a field it always writes is
    // required, even where reading would accept it missing.
    let generator = schemars::generate::SchemaSettings::draft2020_12().for_serialize().into_generator();
    let mut schema = generator.into_root_schema_for::<Document>();
    schema.insert("title".into(), format!("gpusan report, schema version {SCHEMA_VERSION}").into());
    schema.insert(
        "description".into(),
        "What `gpusan run --report-json FILE` writes: the findings of every process of one run, merged. \
         Addresses are `0x`-prefixed hex strings; enum values are snake_case. Fields may be added within a \
         schema version; one removed or changing meaning raises `schema_version`."
            .into(),
    );
    schema.to_value()
}

/// Prints the schema.
pub fn run() -> Result<()> {
    println!("{}", serde_json::to_string_pretty(&report_schema())?);
    Ok(())
}
