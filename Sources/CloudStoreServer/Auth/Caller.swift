/// Who a request comes from, once authenticated.
public enum Caller: Hashable, Sendable, CustomStringConvertible {
    /// A user, named by the userRecordName their bearer token maps to.
    case user(String)
    /// A server-to-server key, by key ID; reaches the public database only.
    case serverKey(String)
    /// Whoever holds the operator token of the server's configuration: reaches the public database
    /// as a server-to-server key does, and may change the production schema.
    case `operator`
    /// An app known only by one of its container's API tokens (`ckAPIToken` without a user's
    /// token), by the token's name: reads the public database, as CloudKit's anonymous users do.
    case apiToken(String)

    /// The name written in `created`/`modified` stamps and answered by `users/caller`.
    public var userRecordName: String {
        switch self {
        case .user(let name): name
        case .serverKey(let keyID): "_serverKey_\(keyID)"
        case .operator: "_operator"
        case .apiToken(let name): "_apiToken_\(name)"
        }
    }

    /// The caller of a ``userRecordName``.
    init(userRecordName name: String) {
        if name == Caller.operator.userRecordName {
            self = .operator
        } else if name.hasPrefix("_serverKey_") {
            self = .serverKey(String(name.dropFirst("_serverKey_".count)))
        } else if name.hasPrefix("_apiToken_") {
            self = .apiToken(String(name.dropFirst("_apiToken_".count)))
        } else {
            self = .user(name)
        }
    }

    /// A server-to-server key or the operator: the public database's records and the production
    /// schema are theirs to change (WireProtocol.md §1).
    public var isTrusted: Bool {
        switch self {
        case .user, .apiToken: false
        case .serverKey, .operator: true
        }
    }

    public var description: String {
        switch self {
        case .user(let name): "user \(name)"
        case .serverKey(let keyID): "server key \(keyID)"
        case .operator: "the operator"
        case .apiToken(let name): "API token \(name)"
        }
    }
}
