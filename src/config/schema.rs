//! The JSON Schema of the config file, derived from the serde types it is read with (`raw.rs` and
//! the sections' `Raw*` types carry `schemars::JsonSchema` beside `Deserialize`), so the schema
//! cannot drift from what the loader accepts: every `deny_unknown_fields` struct is
//! `additionalProperties: false`, and each field's `///` comment is its description. The types
//! with a hand-written `Deserialize` get a hand-written schema here that accepts the same forms.
//!
//! The Helm chart embeds it: `helm/llmprobe/values.schema.json` holds these definitions under
//! `$defs` and `config` refers to them, so a nested typo (`config.probe.max_inflight`) fails at
//! `helm install`. `chart_values_schema` rewrites that part of the file.

use std::borrow::Cow;

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde_json::{Map, Value};

use super::bench::RawBenchArrival;
use super::duration::RawDuration;
use super::raw::RawConfig;
use super::raw_workload::{RawDist, RawLength};
use super::target::RawHeaders;

/// Name of the whole file's schema among the chart's `$defs`.
pub const CHART_CONFIG_DEF: &str = "LLMProbeConfig";

impl JsonSchema for RawDuration {
    fn schema_name() -> Cow<'static, str> {
        "Duration".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        // The loader takes any scalar and reports a number without its unit in validation.
        json_schema!({
            "description": "A duration: a number followed by us, ms, s, m or h, e.g. 250ms, 2s, 1.5m.",
            "type": ["string", "number"]
        })
    }
}

impl JsonSchema for RawLength {
    fn schema_name() -> Cow<'static, str> {
        "TokenLength".into()
    }

    fn json_schema(generator: &mut SchemaGenerator) -> Schema {
        let dist = generator.subschema_for::<RawDist>();
        json_schema!({
            "description": "A token count: a number, {min, max} (uniform) or a distribution {kind: ...}.",
            "anyOf": [{"type": "integer"}, dist]
        })
    }
}

impl JsonSchema for RawHeaders {
    fn schema_name() -> Cow<'static, str> {
        "Headers".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "description": "Header names to string values.",
            "type": "object",
            "additionalProperties": {"type": "string"}
        })
    }
}

impl JsonSchema for RawBenchArrival {
    fn schema_name() -> Cow<'static, str> {
        "BenchArrival".into()
    }

    fn json_schema(generator: &mut SchemaGenerator) -> Schema {
        let spec = generator.subschema_for::<super::bench::RawBenchArrivalSpec>();
        json_schema!({
            "description": "An arrival kind (poisson, gamma, constant) or {kind, cv or burstiness, diurnal}.",
            "anyOf": [{"type": "string"}, spec]
        })
    }
}

/// The JSON Schema (draft 2020-12) of a whole config file.
pub fn config_json_schema() -> Value {
    schemars::schema_for!(RawConfig).to_value()
}

/// `values` (a Helm `values.schema.json`) with its config part regenerated: `$defs` becomes the
/// config types' definitions plus the whole file's schema as `LLMProbeConfig`, and the first
/// entry of `properties.config.allOf` (and of `properties.bench.properties.config.allOf`, when
/// present) a reference to it. The chart's own further constraints, later in those `allOf`s, and
/// everything else in the file are kept. Errors name what the file lacks.
pub fn chart_values_schema(values: &Value) -> Result<Value, String> {
    let mut out = values.clone();
    let root = out.as_object_mut().ok_or("values schema: not a JSON object")?;
    let Value::Object(mut generated) = config_json_schema() else {
        return Err("generated config schema is not an object".to_owned());
    };
    let mut defs = match generated.remove("$defs") {
        Some(Value::Object(d)) => d,
        _ => Map::new(),
    };
    generated.remove("$schema");
    defs.insert(CHART_CONFIG_DEF.to_owned(), Value::Object(generated));
    root.insert("$defs".to_owned(), Value::Object(defs));
    let reference = serde_json::json!({ "$ref": format!("#/$defs/{CHART_CONFIG_DEF}") });
    set_first_all_of(root, &["properties", "config"], &reference, true)?;
    set_first_all_of(root, &["properties", "bench", "properties", "config"], &reference, false)?;
    Ok(out)
}

fn set_first_all_of(root: &mut Map<String, Value>, path: &[&str], reference: &Value, required: bool) -> Result<(), String> {
    let mut node = root;
    for (i, key) in path.iter().enumerate() {
        match node.get_mut(*key) {
            Some(Value::Object(next)) => node = next,
            _ if !required => return Ok(()),
            _ => return Err(format!("values schema: no object at /{}", path[..=i].join("/"))),
        }
    }
    match node.get_mut("allOf") {
        Some(Value::Array(all)) if !all.is_empty() => {
            all[0] = reference.clone();
            Ok(())
        }
        _ => {
            // first generation: the existing constraints become the second entry
            let own = std::mem::take(node);
            let description = own.get("description").cloned();
            if let Some(d) = description {
                node.insert("description".to_owned(), d);
            }
            node.insert("allOf".to_owned(), Value::Array(vec![reference.clone(), Value::Object(own)]));
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CHART_SCHEMA: &str = "helm/llmprobe/values.schema.json";

    fn committed() -> Value {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(CHART_SCHEMA);
        serde_json::from_str(&std::fs::read_to_string(&path).expect("chart schema readable")).expect("chart schema is JSON")
    }

    /// The chart's copy of the config schema is the one the types generate: a changed config
    /// type fails here until `llmprobe config-schema --chart-values` has been run.
    #[test]
    fn chart_values_schema_is_current() {
        let committed = committed();
        let regenerated = chart_values_schema(&committed).expect("chart schema has a config property");
        assert!(
            committed == regenerated,
            "{CHART_SCHEMA} is stale: run `cargo run -- config-schema --chart-values {CHART_SCHEMA} > /tmp/s.json && mv /tmp/s.json {CHART_SCHEMA}`"
        );
    }

    #[test]
    fn every_section_is_closed_and_documented() {
        let schema = config_json_schema();
        let defs = schema["$defs"].as_object().expect("definitions");
        let probe = &defs["RawProbe"];
        assert_eq!(probe["additionalProperties"], Value::Bool(false));
        assert!(probe["properties"]["max_in_flight"]["description"].as_str().is_some_and(|d| d.contains("In-flight cap")));
        assert_eq!(schema["additionalProperties"], Value::Bool(false));
        for section in ["listen", "probe", "targets", "scenarios", "slo", "tracing", "sources", "bench", "detect"] {
            assert!(schema["properties"].get(section).is_some(), "no {section} in the schema");
        }
        // a section that reads `slo:` (null) as its default accepts null
        let slo = serde_json::to_string(&schema["properties"]["slo"]).unwrap();
        assert!(slo.contains("null"), "slo: {slo}");
        // the hand-written forms: a number or a distribution; a duration string or number
        let length = &defs["TokenLength"]["anyOf"];
        assert_eq!(length[0]["type"], "integer");
        assert_eq!(length[1]["$ref"], "#/$defs/RawDist");
        assert_eq!(defs["Duration"]["type"], serde_json::json!(["string", "number"]));
    }

    #[test]
    fn chart_values_schema_keeps_the_chart_constraints_and_names_what_is_missing() {
        let values = serde_json::json!({
            "properties": {"config": {"description": "d", "required": ["targets"]}, "port": {"type": "integer"}}
        });
        let out = chart_values_schema(&values).unwrap();
        assert_eq!(out["properties"]["config"]["allOf"][0]["$ref"], format!("#/$defs/{CHART_CONFIG_DEF}"));
        assert_eq!(out["properties"]["config"]["allOf"][1]["required"], serde_json::json!(["targets"]));
        assert_eq!(out["properties"]["config"]["description"], "d");
        assert_eq!(out["properties"]["port"], values["properties"]["port"]);
        assert!(out["$defs"][CHART_CONFIG_DEF]["properties"]["probe"].is_object());
        // idempotent: a second run changes nothing
        assert_eq!(chart_values_schema(&out).unwrap(), out);
        let err = chart_values_schema(&serde_json::json!({"properties": {}})).unwrap_err();
        assert!(err.contains("/properties/config"), "{err}");
        assert!(chart_values_schema(&serde_json::json!([])).is_err());
    }
}
