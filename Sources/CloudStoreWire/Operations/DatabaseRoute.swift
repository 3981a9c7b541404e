/// The environment of a container: `development` or `production`.
public enum CloudEnvironment: String, Hashable, Sendable, Codable, CaseIterable {
    case development, production
}

/// The database of a container: `public`, `private` or `shared`.
public enum DatabaseScope: String, Hashable, Sendable, Codable, CaseIterable {
    case `public`, `private`, shared
}

/// An operation of the wire protocol (<doc:WireProtocol> §3), by its path below the database.
public enum DatabaseOperation: String, Hashable, Sendable, CaseIterable {
    case zonesModify = "zones/modify"
    case zonesList = "zones/list"
    case zonesLookup = "zones/lookup"
    case recordsModify = "records/modify"
    case recordsLookup = "records/lookup"
    case recordsQuery = "records/query"
    case changesDatabase = "changes/database"
    case changesZone = "changes/zone"
    case notifications = "notifications"
    case usersCaller = "users/caller"
    case usersCurrent = "users/current"
    case assetsUpload = "assets/upload"
    /// `POST /public/records/accept`: join shares by short GUID (§6).
    case recordsAccept = "records/accept"
    /// `POST /public/records/resolve`: preview shares by short GUID without joining (§6).
    case recordsResolve = "records/resolve"
    /// `POST /{db}/records/changes`: one zone's changes, the older form of `changes/zone`.
    case recordsChanges = "records/changes"
    /// `POST /{db}/zones/changes`: the changed zones, the older form of `changes/database`.
    case zonesChanges = "zones/changes"
    /// `POST /{db}/users/discover`: identities of users named by lookup info (``UsersLookupRequest``).
    case usersDiscover = "users/discover"
    /// `POST /{db}/users/lookup/id`: identities of users named by record name.
    case usersLookupID = "users/lookup/id"
    /// `GET /{db}/subscriptions/list`: the caller's subscriptions in the database.
    case subscriptionsList = "subscriptions/list"
    /// `POST /{db}/subscriptions/lookup`: the caller's subscriptions by ID.
    case subscriptionsLookup = "subscriptions/lookup"
    /// `POST /{db}/subscriptions/modify`: creates, updates and deletes subscriptions.
    case subscriptionsModify = "subscriptions/modify"

    /// Whether the operation only reads: sent twice, it changes nothing on the server (every GET,
    /// and the POSTs that look up, query, fetch changes and preview shares).
    public var onlyReads: Bool {
        switch self {
        case .zonesModify, .recordsModify, .assetsUpload, .recordsAccept, .subscriptionsModify: false
        case .zonesList, .zonesLookup, .recordsLookup, .recordsQuery, .changesDatabase, .changesZone, .notifications,
            .usersCaller, .usersCurrent, .recordsResolve, .recordsChanges, .zonesChanges, .usersDiscover, .usersLookupID,
            .subscriptionsList, .subscriptionsLookup:
            true
        }
    }

    /// The operation a database path ends with (`…/private/changes/zone`), if any.
    public init?(pathEnding path: Substring) {
        guard let operation = Self.allCases.first(where: { path.hasSuffix("/" + $0.rawValue) }) else { return nil }
        self = operation
    }

    /// The HTTP method: GET for `zones/list`, the users endpoints and the long poll, POST otherwise.
    public var method: String {
        switch self {
        case .zonesList, .usersCaller, .usersCurrent, .notifications, .subscriptionsList: "GET"
        default: "POST"
        }
    }
}

/// Where a container's databases live: `/database/1/{container}/{environment}`.
///
/// ```swift
/// let route = DatabaseRoute(container: "iCloud.com.example.notes", environment: .development)
/// route.path(.private, .recordsModify)
/// // "/database/1/iCloud.com.example.notes/development/private/records/modify"
/// ```
public struct DatabaseRoute: Hashable, Sendable {
    public var container: String
    public var environment: CloudEnvironment

    public init(container: String, environment: CloudEnvironment) {
        self.container = container
        self.environment = environment
    }

    /// Whether a container identifier is acceptable: 1 to 128 of `A-Z a-z 0-9 . _ -`.
    public static func isValidContainer(_ container: String) -> Bool {
        guard (1...128).contains(container.utf8.count) else { return false }
        return container.utf8.allSatisfy { byte in
            (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A)
                || byte == 0x2E || byte == 0x5F || byte == 0x2D
        }
    }

    /// `/database/1/{container}/{environment}`.
    public var basePath: String { "/database/1/\(container)/\(environment.rawValue)" }

    public func path(_ database: DatabaseScope, _ operation: DatabaseOperation) -> String {
        "\(basePath)/\(database.rawValue)/\(operation.rawValue)"
    }

    /// (ext) An upload URL's path (<doc:WireProtocol> §7): `POST` the asset's bytes to it.
    public func assetUploadPath(_ database: DatabaseScope, uploadID: String) -> String {
        "\(basePath)/\(database.rawValue)/assets/upload/\(uploadID)"
    }

    /// (ext) A download URL's path (<doc:WireProtocol> §7): `GET` the asset's bytes from it.
    public func assetDownloadPath(_ database: DatabaseScope, assetID: String) -> String {
        "\(basePath)/\(database.rawValue)/assets/download/\(assetID)"
    }

    /// `POST /schema/modify` relative to the container and environment (ext).
    public var schemaModifyPath: String { "\(basePath)/schema/modify" }
    /// `GET /schema` relative to the container and environment (ext).
    public var schemaPath: String { "\(basePath)/schema" }
}

/// Header names of the protocol.
public enum WireHeader {
    /// (ext) The sending device's ID, echoed in `created`/`modified` of the records it writes.
    public static let device = "X-CloudStore-Device"
    public static let keyID = "X-Apple-CloudKit-Request-KeyID"
    public static let date = "X-Apple-CloudKit-Request-ISO8601Date"
    public static let signature = "X-Apple-CloudKit-Request-SignatureV1"
    public static let retryAfter = "Retry-After"
}
