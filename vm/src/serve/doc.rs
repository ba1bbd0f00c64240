//! The service's OpenAPI document, derived from its handlers' annotations, and the routes
//! it describes: runs, artifacts and schedules ([`super::api`]), evals ([`super::evals`]),
//! `/healthz` and the document itself (`GET /v1/openapi.json`).

use super::api::Shared;
use axum::Json;
use utoipa::openapi::security::{Http, HttpAuthScheme, SecurityScheme};
use utoipa::{Modify, OpenApi};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

struct Bearer;

impl Modify for Bearer {
    fn modify(&self, api: &mut utoipa::openapi::OpenApi) {
        let components = api.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(Http::new(HttpAuthScheme::Bearer)),
        );
    }
}

#[derive(OpenApi)]
#[openapi(
    info(
        title = "prosevm serve",
        description = "Shipped OpenProse workflows as a service: upload artifacts, start runs, follow their events, answer their questions."
    ),
    modifiers(&Bearer),
    security(("bearer" = []))
)]
struct Doc;

/// The routes under `/v1`, and the OpenAPI document describing them.
pub fn routes() -> OpenApiRouter<Shared> {
    OpenApiRouter::with_openapi(Doc::openapi())
        .merge(super::api::routes())
        .merge(super::evals::routes())
        .routes(routes!(openapi_json))
}

/// The MCP transport, served beside the API (`--mcp`), and the body of a webhook's
/// delivery.
#[derive(OpenApi)]
#[openapi(
    paths(super::mcp::off),
    components(schemas(super::api::WebhookPayload))
)]
struct McpDoc;

/// The request a webhook receiver gets, as OpenAPI 3.1 describes requests an API makes
/// (`webhooks`, beside `paths`): what [`super::webhooks`] posts.
fn webhook_request() -> serde_json::Value {
    use super::webhooks::sign::{ID, SIGNATURE, TIMESTAMP};
    let header = |name: &str, description: &str| serde_json::json!({"name": name, "in": "header", "required": true, "description": description, "schema": {"type": "string"}});
    serde_json::json!({
        "post": {
            "summary": "A run named this URL (`webhook`) and finished, failed, started to wait or paused",
            "description": "Posted until the receiver answers 2xx, waiting 1 s, 2 s, 4 s ... (at most 10 min) between tries, for as long as the server's --webhook-retry-for; every try carries the same id. Signed as Standard Webhooks signs: the base64 HMAC-SHA256, keyed by the server's secret, of `{webhook-id}.{webhook-timestamp}.{body}`.",
            "parameters": [
                header(ID, "the delivery's id, the same on every try: drop one already taken"),
                header(TIMESTAMP, "this try's time, in seconds since 1970: drop one far from now"),
                header(SIGNATURE, "`v1,` and the signature"),
            ],
            "requestBody": {
                "required": true,
                "content": {"application/json": {"schema": {"$ref": "#/components/schemas/WebhookPayload"}}}
            },
            "responses": {
                "2XX": {"description": "taken: the delivery is done"},
                "default": {"description": "anything else (or no answer within 10 s): tried again"}
            }
        }
    })
}

/// The OpenAPI document of the API (as `GET /v1/openapi.json` serves it).
pub fn openapi() -> utoipa::openapi::OpenApi {
    let (_, mut doc) = routes().split_for_parts();
    let (_, health) = super::api::health_routes().split_for_parts();
    // Its paths and the schemas they name (`Health`) both.
    doc.merge(health);
    doc.merge(McpDoc::openapi());
    // One handler answers every method of `/mcp`; each operation needs an id of its own.
    if let Some(item) = doc.paths.paths.get_mut(super::mcp::PATH) {
        for (operation, id) in [
            (&mut item.post, "mcp_post"),
            (&mut item.get, "mcp_get"),
            (&mut item.delete, "mcp_delete"),
        ] {
            if let Some(op) = operation {
                op.operation_id = Some(id.into());
            }
        }
    }
    doc.extensions.get_or_insert_with(Default::default).insert(
        "webhooks".into(),
        serde_json::json!({ "runEnded": webhook_request() }),
    );
    doc.info.version = env!("CARGO_PKG_VERSION").to_string();
    doc
}

/// This document.
#[utoipa::path(
    get,
    path = "/v1/openapi.json",
    responses((status = 200, content_type = "application/json", description = "the OpenAPI document of this API"))
)]
async fn openapi_json() -> Json<utoipa::openapi::OpenApi> {
    static DOC: std::sync::OnceLock<utoipa::openapi::OpenApi> = std::sync::OnceLock::new();
    Json(DOC.get_or_init(openapi).clone())
}

#[cfg(test)]
mod tests {
    /// `docs/openapi.json` is the document the code generates (`PROSE_BLESS=1` rewrites it).
    #[test]
    fn the_kept_openapi_document_is_the_generated_one() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/openapi.json");
        let generated = super::openapi().to_pretty_json().expect("JSON") + "\n";
        if std::env::var_os("PROSE_BLESS").is_some() {
            std::fs::write(&path, &generated).expect("docs/openapi.json");
        }
        let kept = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            kept == generated,
            "docs/openapi.json is not what the code generates: run `PROSE_BLESS=1 cargo test -p prosevm --lib serve::doc` and commit it"
        );
    }
}
