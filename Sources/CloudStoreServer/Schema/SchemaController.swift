import CloudStoreWire
import Foundation
import Hummingbird

/// `POST /database/1/{container}/{environment}/schema/modify` and `GET .../schema` (ext).
///
/// Any authenticated caller may read the schema. In development any caller may change it; in
/// production only a server-to-server key or the operator (WireProtocol.md §1), and a change must only
/// add (see ``SchemaRules/merge(_:into:environment:)``).
struct SchemaController: Sendable {
    let services: CloudServices

    func register(on group: RouterGroup<CloudRequestContext>) {
        group.get("schema", use: get)
        group.post("schema/modify", use: modify)
    }

    @Sendable func get(_ request: Request, context: CloudRequestContext) async throws -> Response {
        let call = context.authenticated
        let schema = try await services.storage.schema(container: call.container, environment: call.environment)
        return try JSONResponse.make(schema)
    }

    @Sendable func modify(_ request: Request, context: CloudRequestContext) async throws -> Response {
        let call = context.authenticated
        let body = try call.decode(CloudSchema.self)
        let environment = call.environment
        guard environment == .development || call.caller.isTrusted else {
            throw APIError(
                .accessDenied,
                "only a server-to-server key or the operator token may change the production schema; \(call.caller) may not")
        }
        let (schema, _) = try await services.storage.updateSchema(container: call.container, environment: environment) {
            current in
            (try SchemaRules.merge(body, into: current, environment: environment), ())
        }
        context.logger.notice(
            "schema modified",
            metadata: [
                "container": "\(call.container)", "environment": "\(environment.rawValue)",
                "version": "\(schema.version ?? 0)",
            ])
        return try JSONResponse.make(schema)
    }
}
