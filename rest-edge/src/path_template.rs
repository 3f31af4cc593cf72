//! `google.api.http` path templates: literal segments, `{field}` or `{field=*}` for one segment, and a final
//! `{field=**}` for the rest of the path. Field paths may be dotted (`{match.ref}`). They become axum routes
//! whose parameters are named `p0`, `p1`, ... (axum names cannot hold dots).

/// A path variable: the axum parameter it is captured as, and the request field path it fills.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PathVariable {
    pub param: String,
    pub field_path: Vec<String>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PathTemplate {
    /// The template as written in the proto file.
    pub template: String,
    /// The equivalent axum route path.
    pub axum_path: String,
    pub variables: Vec<PathVariable>,
}

impl PathTemplate {
    pub fn parse(template: &str) -> Result<Self, String> {
        let rest = template
            .strip_prefix('/')
            .ok_or_else(|| format!("path template `{template}` must start with /"))?;
        let segments: Vec<&str> = rest.split('/').collect();
        let mut axum_path = String::new();
        let mut variables = Vec::new();
        for (i, segment) in segments.iter().enumerate() {
            axum_path.push('/');
            let Some(inner) = segment.strip_prefix('{').and_then(|s| s.strip_suffix('}')) else {
                if segment.contains(['{', '}', '*']) {
                    return Err(format!("unsupported segment `{segment}` in `{template}`"));
                }
                axum_path.push_str(segment);
                continue;
            };
            let (field, pattern) = inner.split_once('=').unwrap_or((inner, "*"));
            let param = format!("p{}", variables.len());
            match pattern {
                "*" => axum_path.push_str(&format!("{{{param}}}")),
                "**" if i + 1 == segments.len() => axum_path.push_str(&format!("{{*{param}}}")),
                _ => return Err(format!("unsupported variable pattern `{inner}` in `{template}`")),
            }
            let field_path: Vec<String> = field.split('.').map(str::to_owned).collect();
            if field_path
                .iter()
                .any(|f| f.is_empty() || !f.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_'))
            {
                return Err(format!("bad field path `{field}` in `{template}`"));
            }
            variables.push(PathVariable { param, field_path });
        }
        Ok(Self {
            template: template.to_owned(),
            axum_path,
            variables,
        })
    }

    /// The OpenAPI form of the path: each variable written `{field.path}`.
    pub fn openapi_path(&self) -> String {
        let mut path = self.axum_path.clone();
        for variable in &self.variables {
            let name = variable.field_path.join(".");
            path = path
                .replace(&format!("{{*{}}}", variable.param), &format!("{{{name}}}"))
                .replace(&format!("{{{}}}", variable.param), &format!("{{{name}}}"));
        }
        path
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literal_and_variables() {
        let t = PathTemplate::parse("/v1/webhooks/{webhook_id}/deliveries").unwrap();
        assert_eq!(t.axum_path, "/v1/webhooks/{p0}/deliveries");
        assert_eq!(t.variables[0].field_path, ["webhook_id"]);
        assert_eq!(t.openapi_path(), "/v1/webhooks/{webhook_id}/deliveries");

        let t = PathTemplate::parse("/v1/{parent.name=*}/files/{path=**}").unwrap();
        assert_eq!(t.axum_path, "/v1/{p0}/files/{*p1}");
        assert_eq!(t.variables[0].field_path, ["parent", "name"]);
        assert_eq!(t.openapi_path(), "/v1/{parent.name}/files/{path}");
        assert_eq!(PathTemplate::parse("/healthz").unwrap().axum_path, "/healthz");
    }

    #[test]
    fn unsupported_forms_are_refused() {
        for bad in ["healthz", "/v1/{a=**}/b", "/v1/{a=x/*}", "/v1/a*", "/v1/{}"] {
            assert!(PathTemplate::parse(bad).is_err(), "{bad}");
        }
    }
}
