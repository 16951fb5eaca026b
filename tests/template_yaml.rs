//! template.yaml as the tests read it (the Lambda tests and the OpenAPI test share it).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("workspace root").to_path_buf()
}

/// A route as the HTTP API and the router see it: (METHOD, path).
pub type Route = (String, String);

/// template.yaml as JSON, with short-form intrinsics (`!Ref X`, `!GetAtt A.B`, `!Sub s`) rewritten
/// to their long form (`{"Ref": X}`, `{"Fn::GetAtt": [A, B]}`, `{"Fn::Sub": s}`), so checks need
/// not care which form the template uses.
pub fn template() -> Value {
    let path = workspace_root().join("template.yaml");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let yaml: serde_yaml::Value = serde_yaml::from_str(&text).unwrap_or_else(|e| panic!("template.yaml: {e}"));
    yaml_to_json(yaml)
}

fn yaml_to_json(v: serde_yaml::Value) -> Value {
    use serde_yaml::Value as Y;
    match v {
        Y::Null => Value::Null,
        Y::Bool(b) => Value::Bool(b),
        Y::Number(n) => serde_json::to_value(&n).expect("number"),
        Y::String(s) => Value::String(s),
        Y::Sequence(s) => Value::Array(s.into_iter().map(yaml_to_json).collect()),
        Y::Mapping(m) => Value::Object(
            m.into_iter()
                .map(|(k, v)| {
                    let k = k.as_str().unwrap_or_else(|| panic!("template.yaml: non-string key {k:?}")).to_owned();
                    (k, yaml_to_json(v))
                })
                .collect(),
        ),
        Y::Tagged(t) => {
            let name = t.tag.to_string();
            let name = name.trim_start_matches('!');
            let inner = yaml_to_json(t.value);
            let inner = match (name, inner) {
                ("GetAtt", Value::String(s)) => {
                    let (res, attr) = s.split_once('.').unwrap_or_else(|| panic!("!GetAtt {s}: no attribute"));
                    json!([res, attr])
                }
                (_, v) => v,
            };
            let key = if name == "Ref" || name == "Condition" { name.to_owned() } else { format!("Fn::{name}") };
            json!({ key: inner })
        }
    }
}

/// Logical ids and bodies of the template's resources of `kind`.
pub fn resources_of<'a>(t: &'a Value, kind: &str) -> Vec<(&'a str, &'a Value)> {
    t["Resources"]
        .as_object()
        .expect("template.yaml has Resources")
        .iter()
        .filter(|(_, r)| r["Type"] == kind)
        .map(|(id, r)| (id.as_str(), r))
        .collect()
}

pub fn resource<'a>(t: &'a Value, id: &str) -> &'a Value {
    let r = &t["Resources"][id];
    assert!(r.is_object(), "template.yaml has no resource {id}");
    r
}

/// The HTTP API routes of a function: (METHOD, path) of its `HttpApi` events.
pub fn template_routes(t: &Value, function_id: &str) -> BTreeSet<Route> {
    let events = resource(t, function_id)["Properties"]["Events"].as_object().cloned().unwrap_or_default();
    events
        .iter()
        .map(|(name, e)| {
            assert_eq!(e["Type"], "HttpApi", "{function_id}.Events.{name}: only HttpApi events are expected");
            route_of(function_id, name, e)
        })
        .collect()
}

/// Every HTTP API route of the template, whichever function it goes to.
pub fn http_routes(t: &Value) -> BTreeSet<Route> {
    let resources = t["Resources"].as_object().expect("template.yaml has Resources");
    let events = resources.iter().flat_map(|(id, r)| {
        let events = r["Properties"]["Events"].as_object().into_iter().flatten();
        events.filter(|(_, e)| e["Type"] == "HttpApi").map(move |(name, e)| route_of(id, name, e))
    });
    events.collect()
}

/// (METHOD, path) of an `HttpApi` event.
fn route_of(function_id: &str, name: &str, e: &Value) -> Route {
    let p = &e["Properties"];
    assert_eq!(p["ApiId"], json!({"Ref": "HttpApi"}), "{function_id}.Events.{name}: ApiId must be !Ref HttpApi");
    let method = p["Method"].as_str().unwrap_or_else(|| panic!("{function_id}.Events.{name}: Method"));
    let path = p["Path"].as_str().unwrap_or_else(|| panic!("{function_id}.Events.{name}: Path"));
    (method.to_uppercase(), path.to_owned())
}
