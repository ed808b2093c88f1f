//! JSON Schema documents of the result files (`schema/*.schema.json`, compiled in) and a small
//! validator for the subset they use: `type` (one or a list), `required`, `properties`,
//! `additionalProperties` (false or a schema), `items`, `enum`, `minimum`, and local `$ref`s
//! (`#/$defs/NAME`). Every object in the schemas sets `additionalProperties: false`, so a field
//! the code writes but the schema does not document fails validation.

use serde_json::Value;

pub const SUMMARY: &str = include_str!("schema/summary.schema.json");
pub const RECORD: &str = include_str!("schema/record.schema.json");
pub const MANIFEST: &str = include_str!("schema/manifest.schema.json");
pub const ENGINE_WINDOW: &str = include_str!("schema/engine_window.schema.json");

/// Parses one of the compiled-in schemas.
pub fn parse(text: &str) -> Value {
    serde_json::from_str(text).expect("compiled-in schema is valid JSON")
}

/// Every violation of `schema` by `value`, as `path: problem` lines (empty = valid).
pub fn validate(value: &Value, schema: &Value) -> Vec<String> {
    let mut errors = Vec::new();
    check(value, schema, schema, "$", &mut errors);
    errors
}

fn resolve<'a>(schema: &'a Value, root: &'a Value) -> &'a Value {
    match schema.get("$ref").and_then(Value::as_str).and_then(|r| r.strip_prefix("#/$defs/")) {
        Some(name) => root.get("$defs").and_then(|d| d.get(name)).unwrap_or(&Value::Null),
        None => schema,
    }
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn type_ok(v: &Value, want: &str) -> bool {
    let got = type_name(v);
    // An integer is a number; a float with no fraction (e.g. 3.0) is an integer, as JSON Schema says.
    got == want || (want == "number" && got == "integer") || (want == "integer" && v.as_f64().is_some_and(|f| f.fract() == 0.0))
}

fn check(value: &Value, schema: &Value, root: &Value, path: &str, errors: &mut Vec<String>) {
    let schema = resolve(schema, root);
    if schema.is_null() {
        errors.push(format!("{path}: schema has an unresolved $ref"));
        return;
    }
    if let Some(t) = schema.get("type") {
        let wanted: Vec<&str> = match t {
            Value::String(s) => vec![s.as_str()],
            Value::Array(a) => a.iter().filter_map(Value::as_str).collect(),
            _ => Vec::new(),
        };
        if !wanted.iter().any(|w| type_ok(value, w)) {
            errors.push(format!("{path}: {} is not of type {}", type_name(value), wanted.join(" | ")));
            return;
        }
    }
    if let Some(Value::Array(options)) = schema.get("enum") {
        if !options.contains(value) {
            errors.push(format!("{path}: {value} is not one of {}", Value::Array(options.clone())));
        }
    }
    if let (Some(min), Some(v)) = (schema.get("minimum").and_then(Value::as_f64), value.as_f64()) {
        if v < min {
            errors.push(format!("{path}: {v} is below the minimum {min}"));
        }
    }
    match value {
        Value::Object(map) => {
            for name in schema.get("required").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str) {
                if !map.contains_key(name) {
                    errors.push(format!("{path}: required field \"{name}\" is missing"));
                }
            }
            let props = schema.get("properties").and_then(Value::as_object);
            for (k, v) in map {
                let sub = format!("{path}.{k}");
                match (props.and_then(|p| p.get(k)), schema.get("additionalProperties")) {
                    (Some(s), _) => check(v, s, root, &sub, errors),
                    (None, Some(Value::Bool(false))) => errors.push(format!("{sub}: field not in the schema")),
                    (None, Some(extra @ Value::Object(_))) => check(v, extra, root, &sub, errors),
                    (None, _) => {}
                }
            }
        }
        Value::Array(items) => {
            if let Some(s) = schema.get("items") {
                for (i, v) in items.iter().enumerate() {
                    check(v, s, root, &format!("{path}[{i}]"), errors);
                }
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_subset_catches_each_kind_of_violation() {
        let schema = json!({
            "type": "object", "required": ["a", "b"], "additionalProperties": false,
            "properties": {"a": {"type": "integer", "minimum": 0}, "b": {"$ref": "#/$defs/b"}, "c": {"type": ["string", "null"], "enum": ["x", null]}},
            "$defs": {"b": {"type": "array", "items": {"type": "number"}}}
        });
        assert!(validate(&json!({"a": 1, "b": [1.5, 2], "c": null}), &schema).is_empty());
        let bad = validate(&json!({"a": -1, "b": ["no"], "c": "y", "d": 1}), &schema);
        assert_eq!(
            bad,
            vec![
                "$.a: -1 is below the minimum 0",
                "$.b[0]: string is not of type number",
                "$.c: \"y\" is not one of [\"x\",null]",
                "$.d: field not in the schema",
            ]
        );
        assert_eq!(validate(&json!({"a": 1.5}), &schema), vec!["$: required field \"b\" is missing", "$.a: number is not of type integer"]);
    }

    #[test]
    fn the_compiled_in_schemas_parse() {
        for s in [SUMMARY, RECORD, MANIFEST, ENGINE_WINDOW] {
            assert_eq!(parse(s)["type"], "object");
        }
    }
}
