//! The schema of an imported `server.json`: every rule the import checks
//! (the card's registry members, `pinfold_core::card`), so that a request
//! this schema admits is refused only for what the tenant holds (a version
//! already published with other content).

use std::borrow::Cow;

use pinfold_core::card::Limits;
use pinfold_core::names::{SERVER_NAME_PATTERN, VERSION_PATTERN};
use pinfold_http::NOT_BLANK_PATTERN;
use pinfold_http::schema::{absent, keywords};
use serde_json::json;
use utoipa::openapi::RefOr;
use utoipa::openapi::schema::{
    AllOfBuilder, AnyOfBuilder, ArrayBuilder, ObjectBuilder, OneOfBuilder, Schema, SchemaType, Type,
};
use utoipa::{PartialSchema, ToSchema};

/// The body of `POST .../import/server-json` (never deserialized: the
/// handler reads the document as JSON and the card rules check it).
pub struct ServerJsonImport;

fn text() -> ObjectBuilder {
    ObjectBuilder::new().schema_type(Type::String)
}

/// What the card rules call an `http(s)://` URL: the scheme in lower case,
/// then at least one character and no white space (Rust's
/// `char::is_whitespace`, the class `NOT_BLANK_PATTERN` excludes).
fn web_url(description: &str) -> ObjectBuilder {
    text()
        .pattern(Some(format!("^https?://{NOT_BLANK_PATTERN}+$")))
        .description(Some(description))
}

fn version(description: &str) -> ObjectBuilder {
    text()
        .max_length(Some(255))
        .pattern(Some(VERSION_PATTERN))
        .description(Some(description))
}

fn object() -> ObjectBuilder {
    ObjectBuilder::new().schema_type(Type::Object)
}

/// A package's `packageArguments` or `runtimeArguments`: each a
/// `positional` argument with a `value` or a `valueHint`, or a `named` one
/// with a `name`.
fn arguments(description: &str) -> ArrayBuilder {
    let kind = |k: &str| text().enum_values(Some([k]));
    let positional = AllOfBuilder::new()
        .item(
            object()
                .property("type", kind("positional"))
                .required("type"),
        )
        .item(
            AnyOfBuilder::new()
                .item(object().required("value"))
                .item(object().required("valueHint")),
        );
    let named = object()
        .property("type", kind("named"))
        .property("name", text())
        .required("type")
        .required("name");
    ArrayBuilder::new()
        .items(OneOfBuilder::new().item(positional).item(named))
        .description(Some(description))
}

impl PartialSchema for ServerJsonImport {
    fn schema() -> RefOr<Schema> {
        let max_description = Limits::default().max_card_description_chars;
        let repository = object()
            .property("url", web_url("The repository's URL."))
            .property(
                "source",
                text().description(Some("`github`, `gitlab`, ...")),
            )
            .required("url")
            .required("source")
            .description(Some("Where the source lives."));
        let remote = object()
            .property(
                "type",
                text()
                    .enum_values(Some(["streamable-http", "sse"]))
                    .description(Some("The transport.")),
            )
            .property("url", web_url("The endpoint."))
            .required("type")
            .required("url");
        let package = object()
            .property(
                "registryType",
                text().description(Some("`npm`, `pypi`, `oci`, ...")),
            )
            .property(
                "identifier",
                text().description(Some("The package's name there.")),
            )
            .property(
                "version",
                text()
                    .min_length(Some(1))
                    .extensions(keywords([(
                        "not",
                        json!({"pattern": "^[Ll][Aa][Tt][Ee][Ss][Tt]$"}),
                    )]))
                    .description(Some("A pinned version: not empty, not `latest`.")),
            )
            .property(
                "transport",
                object()
                    .property("type", text())
                    .required("type")
                    .description(Some("How a client talks to it (`stdio`, ...).")),
            )
            .property(
                "packageArguments",
                arguments("Arguments given to the package."),
            )
            .property(
                "runtimeArguments",
                arguments("Arguments given to its runtime."),
            )
            .required("registryType")
            .required("identifier")
            .required("transport");
        let members = object()
            .property(
                "name",
                text()
                    .min_length(Some(3))
                    .max_length(Some(200))
                    .pattern(Some(SERVER_NAME_PATTERN))
                    .description(Some(
                        "Server name: a reverse-DNS namespace, one `/`, a name.",
                    )),
            )
            .property(
                "version",
                version(
                    "The version: SemVer 2.0.0 without build metadata (`latest` is not a \
                     version). Required, unless the 2025-07-09 format's \
                     `version_detail.version` gives it.",
                ),
            )
            .property(
                "version_detail",
                ObjectBuilder::new().schema_type(SchemaType::AnyValue).description(Some(
                    "The 2025-07-09 format's version member: its `version` stands in for a \
                     missing `version`.",
                )),
            )
            .property(
                "title",
                text()
                    .min_length(Some(1))
                    .max_length(Some(100))
                    .description(Some("A display name.")),
            )
            .property(
                "description",
                text()
                    .max_length(Some(max_description))
                    .pattern(Some(NOT_BLANK_PATTERN))
                    .description(Some(format!(
                        "What the server does: not only white space, at most {max_description} \
                         characters (the deployment's `limits.max_card_description_chars`)."
                    ))),
            )
            .property("websiteUrl", web_url("The server's web page."))
            .property("repository", repository)
            .property(
                "remotes",
                ArrayBuilder::new()
                    .items(remote)
                    .description(Some("Where the server runs remotely.")),
            )
            .property(
                "packages",
                ArrayBuilder::new()
                    .items(package)
                    .description(Some("How to run the server locally.")),
            )
            .property(
                "_meta",
                object().description(Some("Extension metadata.")),
            )
            .property(
                "signature",
                absent(
                    "Not in a server.json: publish a signed card with `PUT .../versions/{version}`.",
                ),
            )
            .required("name")
            .description(Some(
                "An official-registry server.json (any of its formats). `$schema` is dropped; \
                 every other member is kept as given.",
            ));
        let has_version = AnyOfBuilder::new().item(object().required("version")).item(
            object()
                .property(
                    "version_detail",
                    object()
                        .property("version", version("The version."))
                        .required("version"),
                )
                .required("version_detail"),
        );
        AllOfBuilder::new()
            .item(members)
            .item(has_version)
            .examples([json!({
                "$schema": "https://static.modelcontextprotocol.io/schemas/2025-09-29/server.schema.json",
                "name": "io.github.acme/files", "version": "1.0.0",
                "description": "Files in an Acme workspace",
                "remotes": [{"type": "streamable-http", "url": "https://mcp.acme.example/files"}]
            })])
            .into()
    }
}

impl ToSchema for ServerJsonImport {
    fn name() -> Cow<'static, str> {
        Cow::Borrowed("ServerJsonImport")
    }
}
