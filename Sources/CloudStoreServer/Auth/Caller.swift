/// Who a request comes from, once authenticated.
public enum Caller: Hashable, Sendable, CustomStringConvertible {
    /// A user, named by the userRecordName their bearer token maps to.
    case user(String)
    /// A server-to-server key, by key ID; reaches the public database only.
    case serverKey(String)

    /// The name written in `created`/`modified` stamps and answered by `users/caller`.
    public var userRecordName: String {
        switch self {
        case .user(let name): name
        case .serverKey(let keyID): "_serverKey_\(keyID)"
        }
    }

    public var description: String {
        switch self {
        case .user(let name): "user \(name)"
        case .serverKey(let keyID): "server key \(keyID)"
        }
    }
}
