import CloudStoreWire
import Hummingbird

/// The endpoints of Apple's CloudKit Web Services reference that this server does not serve yet:
/// each answers 400 `BAD_REQUEST` saying so and what to use instead, never a 404 that reads as a
/// wrong path (WireProtocol.md, "Not supported").
enum UnsupportedOperations {
    static let subscriptions =
        "subscriptions are not supported by this server yet: learn of changes with the long poll GET /{database}/notifications, or call changes/database"
    static let pushTokens =
        "push tokens and the web courier are not supported by this server yet: long-poll GET /{database}/notifications instead"
    static let rereference = "assets/rereference is not supported by this server yet: upload the asset again with assets/upload"

    /// Routes relative to `/database/1/{container}/{environment}` (and `/device/1/…` for tokens).
    static func register(on database: RouterGroup<CloudRequestContext>, device: RouterGroup<CloudRequestContext>) {
        database.get(":database/subscriptions/list") { _, _ -> Response in throw APIError(.badRequest, subscriptions) }
        for operation in ["lookup", "modify"] {
            database.post(":database/subscriptions/\(operation)") { _, _ -> Response in throw APIError(.badRequest, subscriptions) }
        }
        database.post(":database/assets/rereference") { _, _ -> Response in throw APIError(.badRequest, rereference) }
        for group in [database, device] {
            for operation in ["create", "register"] {
                group.post("tokens/\(operation)") { _, _ -> Response in throw APIError(.badRequest, pushTokens) }
            }
        }
    }
}
