//! The request fields behaviour checks need, for the OpenAI-compatible APIs (the only families
//! that can carry them: `config::Checks::unsupported` refuses the others at config check time).

use serde_json::{Value, json};

use super::api::AgentStep;
use crate::config::{Checks, Schema, ToolChoice};

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
        body["tools"] = json!([function(&tool.name, tool.description.as_deref(), &tool.parameters, false)]);
        body["tool_choice"] = match tool.choice {
            ToolChoice::Required => json!("required"),
            ToolChoice::Auto => json!("auto"),
            ToolChoice::Function => json!({"type": "function", "function": {"name": tool.name}}),
        };
    }
}

/// A function tool's entry in `tools`: name, parameters and description where there is one,
/// nested under `function` (chat) or, with `flat`, beside `type` (Responses).
fn function(name: &str, description: Option<&str>, parameters: &Schema, flat: bool) -> Value {
    let mut f = json!({"name": name, "parameters": parameters.value});
    if let Some(d) = description {
        f["description"] = json!(d);
    }
    if flat {
        f["type"] = json!("function");
        f
    } else {
        json!({"type": "function", "function": f})
    }
}

/// An agent step's tools and `tool_choice` (`required` while expected calls remain, else
/// `auto`), in chat's shape or, with `flat`, the Responses API's.
pub fn add_agent(body: &mut Value, step: &AgentStep, flat: bool) {
    let tools: Vec<Value> = step.agent.tools.iter().map(|t| function(&t.name, t.description.as_deref(), &t.parameters, flat)).collect();
    body["tools"] = Value::Array(tools);
    body["tool_choice"] = json!(if step.must_call { "required" } else { "auto" });
}

/// The Responses API's forms of the same fields: `temperature`, structured output as
/// `text.format`, flat function tools and their `tool_choice`. It has no `stop`.
pub fn add_responses(body: &mut Value, checks: &Checks) {
    if checks.greedy() {
        body["temperature"] = json!(0);
    }
    if let Some((name, schema)) = &checks.structured_output {
        body["text"] = json!({"format": {"type": "json_schema", "name": name, "schema": schema.value, "strict": true}});
    }
    if let Some(tool) = &checks.tool_call {
        body["tools"] = json!([function(&tool.name, tool.description.as_deref(), &tool.parameters, true)]);
        body["tool_choice"] = match tool.choice {
            ToolChoice::Required => json!("required"),
            ToolChoice::Auto => json!("auto"),
            ToolChoice::Function => json!({"type": "function", "name": tool.name}),
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ToolCallCheck;

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
    fn responses_body_has_its_own_shapes() {
        let schema = Schema::new(json!({"type": "object"})).unwrap();
        let tool = ToolCallCheck { name: "f".into(), description: None, parameters: schema.clone(), choice: ToolChoice::Function };
        let mut body = json!({"input": "p"});
        add_responses(&mut body, &Checks { tool_call: Some(tool), fingerprint: true, ..Checks::default() });
        assert_eq!(body["tools"], json!([{"type": "function", "name": "f", "parameters": {"type": "object"}}]));
        assert_eq!(body["tool_choice"], json!({"type": "function", "name": "f"}));
        assert_eq!(body["temperature"], json!(0));
        let mut body = json!({"input": "p"});
        add_responses(&mut body, &Checks { structured_output: Some(("city".into(), schema)), ..Checks::default() });
        assert_eq!(body["text"]["format"]["name"], "city");
        assert!(body.get("response_format").is_none() && body.get("stop").is_none());
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

    /// An answer whose end is checked is the model's own: no `ignore_eos`/`min_tokens`, on every
    /// family, while the target's (default) `ignore_eos` still goes out otherwise (the cap check
    /// alone keeps it).
    #[test]
    fn checked_requests_never_ignore_eos() {
        use crate::config::ProtocolKind;
        use crate::protocol::RequestSpec;
        let checks = Checks { natural_stop: Some(8), ..Checks::default() };
        for api in ProtocolKind::ALL {
            let yaml = format!(
                "targets:\n  - {{name: t, base_url: \"http://127.0.0.1:1\", api: {}, model: m}}\nscenarios:\n  - {{name: s, input_tokens: 8, output_tokens: 4}}\n",
                api.as_str()
            );
            let cfg = crate::app::loader::parse(&yaml, "t.yaml").unwrap();
            let target = &cfg.targets[0];
            assert!(target.ignore_eos, "on by default");
            let spec = RequestSpec { model: "m", prompt: "p", max_tokens: 4, checks: None, reasoning: None, history: &[], agent: None };
            let plain = api.protocol().body(target, &spec).to_string();
            assert!(plain.contains("ignore_eos"), "{api:?}: {plain}");
            let checked = api.protocol().body(target, &RequestSpec { checks: Some(&checks), ..spec }).to_string();
            assert!(!checked.contains("ignore_eos") && !checked.contains("min_tokens"), "{api:?}: {checked}");
            let cap_only = Checks { output_cap: true, finish_reasons: Some(vec!["length".into()]), ..Checks::default() };
            assert!(api.protocol().body(target, &RequestSpec { checks: Some(&cap_only), ..spec }).to_string().contains("ignore_eos"));
        }
    }

    #[test]
    fn an_agent_step_carries_its_tools_and_the_loop_so_far() {
        use crate::protocol::{Call, Message};
        let tool = |name: &str| crate::config::AgentTool {
            name: name.into(),
            description: Some("d".into()),
            parameters: Schema::new(json!({"type": "object"})).unwrap(),
            result: "{}".into(),
        };
        let agent = crate::config::Agent {
            tools: vec![tool("get_weather"), tool("get_time")],
            max_steps: 3,
            required: true,
            expect_calls: vec!["get_weather".into()],
            task: None,
        };
        let mut chat = json!({"messages": []});
        add_agent(&mut chat, &AgentStep { agent: &agent, must_call: true }, false);
        assert_eq!(chat["tools"][1], json!({"type": "function", "function": {"name": "get_time", "parameters": {"type": "object"}, "description": "d"}}));
        assert_eq!(chat["tool_choice"], "required");
        let mut flat = json!({"input": []});
        add_agent(&mut flat, &AgentStep { agent: &agent, must_call: false }, true);
        assert_eq!(flat["tools"][0], json!({"type": "function", "name": "get_weather", "parameters": {"type": "object"}, "description": "d"}));
        assert_eq!(flat["tool_choice"], "auto");

        let call = Call { id: "call_9".into(), name: "get_weather".into(), arguments: "{\"city\":\"Paris\"}".into() };
        let history = [
            Message::User("weather?".into()),
            Message::Assistant { text: String::new(), calls: vec![call] },
            Message::ToolResult { call_id: "call_9".into(), content: "{\"t\":18}".into() },
        ];
        assert_eq!(Message::calls_made(&history), 1);
        // A later step sends no new user message: it continues from the results.
        assert_eq!(
            Message::chat(&history, ""),
            json!([
                {"role": "user", "content": "weather?"},
                {"role": "assistant", "content": null, "tool_calls": [{"id": "call_9", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}}]},
                {"role": "tool", "tool_call_id": "call_9", "content": "{\"t\":18}"}
            ])
        );
        assert_eq!(
            Message::responses_input(&history, ""),
            json!([
                {"role": "user", "content": "weather?"},
                {"type": "function_call", "call_id": "call_9", "name": "get_weather", "arguments": "{\"city\":\"Paris\"}"},
                {"type": "function_call_output", "call_id": "call_9", "output": "{\"t\":18}"}
            ])
        );
        // A conversation's turns are unchanged: user and assistant, then the new prompt.
        let turns = [Message::User("a".into()), Message::Assistant { text: "b".into(), calls: vec![] }];
        assert_eq!(
            Message::chat(&turns, "c"),
            json!([{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}, {"role": "user", "content": "c"}])
        );
        assert_eq!(Message::transcript(&turns, "c"), "a\n\nb\n\nc");
    }
}
