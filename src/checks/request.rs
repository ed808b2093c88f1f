//! The request fields behaviour checks need, for the OpenAI-compatible APIs (the only families
//! that can carry them: `config::Checks::unsupported` refuses the others at config check time).

use serde_json::{Value, json};

use crate::config::{Checks, ToolChoice};

/// Adds `temperature`, `stop`, and for chat `response_format` and `tools`/`tool_choice`. The
/// request parameters are pinned, since server defaults (`generation_config.json`) move.
pub fn add_openai(body: &mut Value, checks: &Checks) {
    let chat = body.get("messages").is_some();
    if checks.greedy() {
        body["temperature"] = json!(0);
        body["seed"] = json!(0);
    }
    if !checks.stop.is_empty() {
        body["stop"] = json!(checks.stop);
    }
    if !chat {
        return;
    }
    if let Some((name, schema)) = &checks.structured_output {
        body["response_format"] = json!({"type": "json_schema", "json_schema": {"name": name, "schema": schema.value, "strict": true}});
    }
    if let Some(tool) = &checks.tool_call {
        let mut function = json!({"name": tool.name, "parameters": tool.parameters.value});
        if let Some(d) = &tool.description {
            function["description"] = json!(d);
        }
        body["tools"] = json!([{"type": "function", "function": function}]);
        body["tool_choice"] = match tool.choice {
            ToolChoice::Required => json!("required"),
            ToolChoice::Auto => json!("auto"),
            ToolChoice::Function => json!({"type": "function", "function": {"name": tool.name}}),
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Schema, ToolCallCheck};

    #[test]
    fn chat_body_carries_every_field() {
        let schema = Schema::new(json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]})).unwrap();
        let checks = Checks { stop: vec!["###".into()], fingerprint: true, structured_output: Some(("city".into(), schema.clone())), ..Checks::default() };
        let mut body = json!({"messages": [], "model": "m"});
        add_openai(&mut body, &checks);
        assert_eq!(body["temperature"], json!(0));
        assert_eq!(body["stop"], json!(["###"]));
        assert_eq!(body["response_format"]["type"], "json_schema");
        assert_eq!(body["response_format"]["json_schema"]["schema"]["required"], json!(["city"]));

        let tool = ToolCallCheck { name: "get_weather".into(), description: Some("d".into()), parameters: schema, choice: ToolChoice::Function };
        let checks = Checks { tool_call: Some(tool), ..Checks::default() };
        let mut body = json!({"messages": []});
        add_openai(&mut body, &checks);
        assert_eq!(body["tools"][0]["function"]["name"], "get_weather");
        assert_eq!(body["tool_choice"]["function"]["name"], "get_weather");
        assert!(body.get("temperature").is_none(), "only known answers and fingerprints pin temperature 0");
    }

    #[test]
    fn completions_body_gets_no_chat_fields() {
        let schema = Schema::new(json!({"type": "object"})).unwrap();
        let checks = Checks { stop: vec!["\n\n".into()], structured_output: Some(("a".into(), schema)), ..Checks::default() };
        let mut body = json!({"prompt": "p"});
        add_openai(&mut body, &checks);
        assert_eq!(body["stop"], json!(["\n\n"]));
        assert!(body.get("response_format").is_none());
    }
}
