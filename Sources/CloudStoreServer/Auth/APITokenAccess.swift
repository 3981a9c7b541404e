import Hummingbird

/// What a request made with an API token alone may do: read the public database, as CloudKit's
/// users who have not signed in may. Everything else (a write, the private or shared database,
/// the schema, who the caller is) needs a signed-in user and answers 421.
enum APITokenAccess {
    /// The operations under `/database/1/{container}/{environment}/public/` that only read.
    static let readOperations: Set<String> = [
        "records/lookup", "records/query", "records/changes", "changes/database", "changes/zone", "zones/list",
        "zones/lookup", "notifications",
    ]

    /// Whether a request with an API token alone may go on.
    static func allows(_ method: HTTPRequest.Method, path: String) -> Bool {
        let segments = path.split(separator: "/", omittingEmptySubsequences: true)
        guard segments.count >= 6, segments[0] == "database", segments[4] == "public" else { return false }
        let operation = segments.dropFirst(5).joined(separator: "/")
        if method == .get, operation.hasPrefix("assets/download/") { return true }
        return readOperations.contains(operation)
    }
}
