package api

import _ "embed"

// OpenAPI is the OpenAPI 3.1 document of the protocol, api/openapi.yaml:
// every route, body and error of a server, for tools and generated
// clients. Servers and agents serve it at GET /v1/openapi.yaml. The prose
// specification stays this package's comment; the server's tests check
// real requests and responses against the document, so it cannot drift.
//
//go:embed openapi.yaml
var OpenAPI []byte

// ContentYAML is the media type of the OpenAPI document (RFC 9512).
const ContentYAML = "application/yaml"
