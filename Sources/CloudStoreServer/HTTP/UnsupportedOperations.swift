import CloudStoreWire
import Hummingbird

/// The endpoints of Apple's CloudKit Web Services reference that this server does not serve yet:
/// each answers 400 `BAD_REQUEST` saying so and what to use instead, never a 404 that reads as a
/// wrong path (WireProtocol.md, "Not supported").
enum UnsupportedOperations {
    static let rereference = "assets/rereference is not supported by this server yet: upload the asset again with assets/upload"

    /// Routes relative to `/database/1/{container}/{environment}`.
    static func register(on database: RouterGroup<CloudRequestContext>) {
        database.post(":database/assets/rereference") { _, _ -> Response in throw APIError(.badRequest, rereference) }
    }
}
