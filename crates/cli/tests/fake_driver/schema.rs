//! The published JSON Schema of `--report-json` (`schemas/report-v1.json`), and the check
//! every test that reads a report makes with it: a report gpusan wrote that the schema does
//! not describe fails the test that made it.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// `schemas/report-v1.json` in the workspace.
pub fn published_schema_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../schemas/report-v1.json")
}

fn validator() -> &'static jsonschema::Validator {
    static VALIDATOR: OnceLock<jsonschema::Validator> = OnceLock::new();
    VALIDATOR.get_or_init(|| {
        let path = published_schema_path();
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let schema: serde_json::Value = serde_json::from_str(&text).expect("the published schema is JSON");
        jsonschema::validator_for(&schema).expect("the published schema is a valid JSON Schema")
    })
}

/// Why `report` does not match the published schema, one line per error (empty: it does).
pub fn schema_errors(report: &serde_json::Value) -> Vec<String> {
    validator().iter_errors(report).map(|e| format!("{}: {e}", e.instance_path())).collect()
}

/// Panics, naming each error, unless `report` matches the published schema.
pub fn assert_matches_schema(report: &serde_json::Value) {
    let errors = schema_errors(report);
    assert!(errors.is_empty(), "the report does not match schemas/report-v1.json:\n{}", errors.join("\n"));
}
