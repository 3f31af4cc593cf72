//! Reads every `google.api.http` rule (and its additional bindings) out of the descriptor set: one
//! `Binding` per HTTP route, checked at start-up so a bad annotation stops the edge instead of a request.

use http::{Method, uri::PathAndQuery};
use prost_reflect::{DescriptorPool, FieldDescriptor, Kind, MessageDescriptor, MethodDescriptor};

use crate::path_template::PathTemplate;
use frontdesk_api::google::api::{HttpRule, http_rule::Pattern};
pub use frontdesk_api::json_out::Naming;

/// Where the HTTP body goes in the request message.
#[derive(Clone, Debug)]
pub enum BodyRule {
    /// No body; every non-path field comes from the query string.
    None,
    /// `body: "*"`: the body is the whole request message (minus path variables).
    Whole,
    /// `body: "field"`: the body is that field; other fields come from the path and query string.
    Field(FieldDescriptor),
}

#[derive(Clone, Debug)]
pub struct Binding {
    pub method: MethodDescriptor,
    /// The status of a successful answer (`frontdesk.v1.success_status`, else 200).
    pub success_status: http::StatusCode,
    pub grpc_path: PathAndQuery,
    pub http_method: Method,
    pub template: PathTemplate,
    pub body: BodyRule,
    pub naming: Naming,
}

impl Binding {
    pub fn input(&self) -> MessageDescriptor {
        self.method.input()
    }
}

pub fn load(pool: &DescriptorPool) -> Result<Vec<Binding>, String> {
    let Some(http) = pool.get_extension_by_name("google.api.http") else {
        return Ok(Vec::new());
    };
    let mut bindings = Vec::new();
    for service in pool.services() {
        for method in service.methods() {
            let options = method.options();
            if !options.has_extension(&http) {
                continue;
            }
            let rule: HttpRule = options
                .get_extension(&http)
                .as_message()
                .ok_or_else(|| format!("{}: google.api.http is not a message", method.full_name()))?
                .transcode_to()
                .map_err(|e| format!("{}: bad google.api.http: {e}", method.full_name()))?;
            if method.is_client_streaming() || method.is_server_streaming() {
                return Err(format!(
                    "{}: streaming methods cannot be transcoded",
                    method.full_name()
                ));
            }
            for additional in &rule.additional_bindings {
                bindings.push(binding(&method, additional)?);
            }
            bindings.push(binding(&method, &rule)?);
        }
    }
    Ok(bindings)
}

fn binding(method: &MethodDescriptor, rule: &HttpRule) -> Result<Binding, String> {
    let name = method.full_name();
    let (http_method, template) = match &rule.pattern {
        Some(Pattern::Get(p)) => (Method::GET, p),
        Some(Pattern::Put(p)) => (Method::PUT, p),
        Some(Pattern::Post(p)) => (Method::POST, p),
        Some(Pattern::Delete(p)) => (Method::DELETE, p),
        Some(Pattern::Patch(p)) => (Method::PATCH, p),
        Some(Pattern::Custom(c)) => (
            Method::from_bytes(c.kind.as_bytes()).map_err(|e| format!("{name}: bad method: {e}"))?,
            &c.path,
        ),
        None => return Err(format!("{name}: google.api.http has no pattern")),
    };
    if !rule.response_body.is_empty() {
        return Err(format!("{name}: response_body is not supported"));
    }
    let template = PathTemplate::parse(template).map_err(|e| format!("{name}: {e}"))?;
    let input = method.input();
    for variable in &template.variables {
        let field = resolve_field_path(&input, &variable.field_path)
            .ok_or_else(|| format!("{name}: path variable {} is not a field", variable.field_path.join(".")))?;
        if field.is_list() || field.is_map() || matches!(field.kind(), Kind::Message(_)) {
            return Err(format!("{name}: path variable {} must be a scalar field", field.name()));
        }
    }
    let body = match rule.body.as_str() {
        "" => BodyRule::None,
        "*" => BodyRule::Whole,
        field => BodyRule::Field(
            input
                .get_field_by_name(field)
                .ok_or_else(|| format!("{name}: body field {field} does not exist"))?,
        ),
    };
    let grpc_path = format!("/{}/{}", method.parent_service().full_name(), method.name())
        .parse()
        .map_err(|e| format!("{name}: {e}"))?;
    Ok(Binding {
        success_status: success_status(method)?,
        method: method.clone(),
        grpc_path,
        http_method,
        template,
        body,
        naming: naming_of(method),
    })
}

/// The method's `frontdesk.v1.success_status` option, else 200.
fn success_status(method: &MethodDescriptor) -> Result<http::StatusCode, String> {
    let pool = method.parent_pool();
    let Some(option) = pool.get_extension_by_name("frontdesk.v1.success_status") else {
        return Ok(http::StatusCode::OK);
    };
    let options = method.options();
    if !options.has_extension(&option) {
        return Ok(http::StatusCode::OK);
    }
    let code = options.get_extension(&option).as_i32().unwrap_or(200);
    u16::try_from(code)
        .ok()
        .and_then(|code| http::StatusCode::from_u16(code).ok())
        .filter(http::StatusCode::is_success)
        .ok_or_else(|| format!("{}: success_status {code} is not a 2xx status", method.full_name()))
}

/// The field at a dotted path of proto field names, through singular message fields.
pub fn resolve_field_path(message: &MessageDescriptor, path: &[String]) -> Option<FieldDescriptor> {
    let (last, parents) = path.split_last()?;
    let mut current = message.clone();
    for name in parents {
        match current.get_field_by_name(name)?.kind() {
            Kind::Message(inner) => current = inner,
            _ => return None,
        }
    }
    current.get_field_by_name(last)
}

/// Packages under `frontdesk.site` are the site surface (lowerCamelCase); every other package is the
/// platform surface (snake_case).
fn naming_of(method: &MethodDescriptor) -> Naming {
    if method.parent_service().package_name().starts_with("frontdesk.site") {
        Naming::LowerCamel
    } else {
        Naming::Snake
    }
}
